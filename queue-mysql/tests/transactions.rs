//! Enqueue and completion inside the caller's diesel-async transaction,
//! and times that stay UTC whatever the session time zone.

mod common;

use std::time::Duration;

use chrono::{TimeZone, Utc};
use diesel::QueryableByName;
use diesel::sql_types::Text;
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};
use queue_core::{
    DequeueRequest, FinalStatus, Job, ManualClock, NackOutcome, NewJob, QueueError, QueueName,
    Retry, Storage, WorkerId,
};
use queue_mysql::MySqlStorage;
use queue_testkit::harness::mysql::TestDatabase;
use serde_json::json;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(QueryableByName)]
struct Status {
    #[diesel(sql_type = Text)]
    status: String,
}

/// A migrated storage, an `orders` table, and a connection of the caller's own.
async fn setup() -> (TestDatabase, MySqlStorage, AsyncMysqlConnection) {
    let (db, storage) = common::storage_in_new_database().await;
    let mut conn = AsyncMysqlConnection::establish(&db.url())
        .await
        .expect("connect");
    conn.batch_execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, status VARCHAR(20) NOT NULL)")
        .await
        .expect("business table");
    (db, storage, conn)
}

async fn order_status(conn: &mut AsyncMysqlConnection, id: i64) -> Option<String> {
    diesel::sql_query(format!("SELECT status FROM orders WHERE id = {id}"))
        .load::<Status>(conn)
        .await
        .expect("read order")
        .pop()
        .map(|s| s.status)
}

async fn claim(storage: &MySqlStorage) -> Job {
    let request = DequeueRequest::new(
        vec![QueueName::new("orders").expect("valid")],
        1,
        Duration::from_secs(30),
        WorkerId::new("w1").expect("valid"),
    )
    .expect("valid request");
    let mut jobs = storage.dequeue(&request).await.expect("dequeue");
    assert_eq!(jobs.len(), 1);
    jobs.remove(0)
}

#[tokio::test]
async fn enqueue_in_commits_and_rolls_back_with_the_business_row() {
    let (db, storage, mut conn) = setup().await;
    let committed = conn
        .transaction(async |conn| {
            conn.batch_execute("INSERT INTO orders VALUES (1, 'placed')")
                .await?;
            let outcome = storage
                .enqueue_in(conn, NewJob::new("orders", json!({"order": 1})))
                .await?;
            Ok::<_, BoxError>(outcome)
        })
        .await
        .expect("committed transaction");
    let rolled_back = conn
        .transaction(async |conn| {
            conn.batch_execute("INSERT INTO orders VALUES (2, 'placed')")
                .await?;
            let outcome = storage
                .enqueue_in(conn, NewJob::new("orders", json!({"order": 2})))
                .await?;
            Err::<(), BoxError>(format!("abort after enqueueing {}", outcome.id).into())
        })
        .await;
    assert!(rolled_back.is_err());

    assert_eq!(order_status(&mut conn, 1).await.as_deref(), Some("placed"));
    assert!(
        storage
            .get_job(committed.id)
            .await
            .expect("get_job")
            .is_some()
    );
    assert_eq!(order_status(&mut conn, 2).await, None);
    let stats = storage.stats().await.expect("stats");
    assert_eq!(
        stats.iter().map(|s| s.live()).sum::<u64>(),
        1,
        "only the committed job"
    );
    drop(conn);
    db.drop_database().await;
}

#[tokio::test]
async fn ack_in_commits_or_rolls_back_with_the_handlers_effect() {
    let (db, storage, mut conn) = setup().await;
    conn.batch_execute("INSERT INTO orders VALUES (3, 'placed'), (4, 'placed')")
        .await
        .expect("orders");
    storage
        .enqueue(NewJob::new("orders", json!({"order": 3})))
        .await
        .expect("enqueue");
    storage
        .enqueue(NewJob::new("orders", json!({"order": 4})))
        .await
        .expect("enqueue");

    // Rolled back: the effect is undone and the job is still leased.
    let job = claim(&storage).await;
    let lease = job.lease().expect("lease");
    let rolled_back = conn
        .transaction(async |conn| {
            conn.batch_execute("UPDATE orders SET status = 'shipped' WHERE id = 3")
                .await?;
            storage.ack_in(conn, &lease, None).await?;
            Err::<(), BoxError>("handler gave up".into())
        })
        .await;
    assert!(rolled_back.is_err());
    assert_eq!(order_status(&mut conn, 3).await.as_deref(), Some("placed"));
    assert_eq!(
        storage.get_history(job.id).await.expect("get_history"),
        None
    );
    let live = storage
        .get_job(job.id)
        .await
        .expect("get_job")
        .expect("still live");
    assert_eq!(live.lease(), Some(lease.clone()));

    // Committed: effect and completion together.
    conn.transaction(async |conn| {
        conn.batch_execute("UPDATE orders SET status = 'shipped' WHERE id = 3")
            .await?;
        storage
            .ack_in(conn, &lease, Some(json!({"shipped": 3})))
            .await?;
        Ok::<_, BoxError>(())
    })
    .await
    .expect("committed");
    assert_eq!(order_status(&mut conn, 3).await.as_deref(), Some("shipped"));
    let record = storage
        .get_history(job.id)
        .await
        .expect("get_history")
        .expect("archived");
    assert_eq!(record.status, FinalStatus::Completed);
    assert_eq!(record.result, Some(json!({"shipped": 3})));

    // nack_in follows the transaction too, and a stale lease is refused.
    let other = claim(&storage).await;
    let other_lease = other.lease().expect("lease");
    let outcome = conn
        .transaction(async |conn| {
            Ok::<_, BoxError>(
                storage
                    .nack_in(conn, &other_lease, json!("later"), Retry::Never)
                    .await?,
            )
        })
        .await
        .expect("committed");
    assert_eq!(outcome, NackOutcome::DeadLettered);
    let stale = storage.ack_in(&mut conn, &lease, None).await;
    assert!(
        matches!(stale, Err(QueueError::LeaseLost { .. })),
        "{stale:?}"
    );
    drop(conn);
    db.drop_database().await;
}

#[tokio::test]
async fn times_stay_utc_in_a_non_utc_session() {
    let (db, storage, mut conn) = setup().await;
    conn.batch_execute("SET time_zone = '+05:00'")
        .await
        .expect("session time zone");

    // The database clock: UTC_TIMESTAMP(6), never the session's local time.
    let before = Utc::now();
    let outcome = storage
        .enqueue_in(&mut conn, NewJob::new("tz", json!(1)))
        .await
        .expect("enqueue_in");
    let after = Utc::now();
    let job = storage
        .get_job(outcome.id)
        .await
        .expect("get_job")
        .expect("job");
    let slack = chrono::TimeDelta::seconds(5);
    assert!(
        job.created_at >= before - slack && job.created_at <= after + slack,
        "created_at {} is not the UTC time of the enqueue ({before} ..= {after})",
        job.created_at
    );

    // A manual clock and an explicit run_at come back to the microsecond.
    let at = Utc
        .timestamp_opt(1_930_453_567, 123_456_000)
        .single()
        .expect("valid");
    let manual = storage.clone().with_clock(ManualClock::new(at));
    let run_at = at + chrono::TimeDelta::microseconds(42);
    let outcome = manual
        .enqueue_in(&mut conn, NewJob::new("tz", json!(2)).run_at(run_at))
        .await
        .expect("enqueue_in");
    let job = manual
        .get_job(outcome.id)
        .await
        .expect("get_job")
        .expect("job");
    assert_eq!((job.created_at, job.available_at), (at, run_at));
    drop(conn);
    db.drop_database().await;
}
