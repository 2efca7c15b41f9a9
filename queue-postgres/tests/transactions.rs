//! Enqueue and completion inside the caller's own transaction.

mod common;

use queue_core::{FinalStatus, JobState, NackOutcome, NewJob, QueueError, Retry, Storage};
use queue_postgres::PgStorage;
use queue_testkit::harness::postgres::TestSchema;
use serde_json::json;
use sqlx::PgPool;

const LEASE: std::time::Duration = std::time::Duration::from_secs(30);

/// A migrated storage plus a business table `orders` in the same schema.
async fn setup() -> (TestSchema, PgPool, PgStorage) {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    sqlx::query("CREATE TABLE orders (id BIGINT PRIMARY KEY, status TEXT NOT NULL)")
        .execute(&pool)
        .await
        .expect("business table");
    (schema, pool, storage)
}

async fn finish(schema: TestSchema, pool: PgPool) {
    pool.close().await;
    schema.drop_schema().await;
}

async fn order_status(pool: &PgPool, id: i64) -> Option<String> {
    sqlx::query_scalar("SELECT status FROM orders WHERE id = $1")
        .bind(id)
        .fetch_optional(pool)
        .await
        .expect("read order")
}

async fn claim(storage: &PgStorage) -> queue_core::Job {
    let request = queue_core::DequeueRequest::new(
        vec![queue_core::QueueName::new("orders").expect("valid")],
        1,
        LEASE,
        queue_core::WorkerId::new("w1").expect("valid"),
    )
    .expect("valid request");
    let mut jobs = storage.dequeue(&request).await.expect("dequeue");
    assert_eq!(jobs.len(), 1);
    jobs.remove(0)
}

#[tokio::test]
async fn enqueue_in_a_committed_transaction_creates_the_job_with_the_business_row() {
    let (schema, pool, storage) = setup().await;
    let mut tx = pool.begin().await.expect("begin");
    sqlx::query("INSERT INTO orders VALUES (1, 'placed')")
        .execute(&mut *tx)
        .await
        .expect("insert order");
    let outcome = storage
        .enqueue_in(&mut tx, NewJob::new("orders", json!({"order": 1})))
        .await
        .expect("enqueue_in");
    tx.commit().await.expect("commit");

    assert_eq!(order_status(&pool, 1).await.as_deref(), Some("placed"));
    let job = storage
        .get_job(outcome.id)
        .await
        .expect("get_job")
        .expect("job exists");
    assert_eq!(
        job.state(storage.now().await.expect("now")),
        JobState::Pending
    );
    finish(schema, pool).await;
}

#[tokio::test]
async fn enqueue_in_a_rolled_back_transaction_leaves_neither() {
    let (schema, pool, storage) = setup().await;
    let mut tx = pool.begin().await.expect("begin");
    sqlx::query("INSERT INTO orders VALUES (2, 'placed')")
        .execute(&mut *tx)
        .await
        .expect("insert order");
    let outcome = storage
        .enqueue_in(&mut tx, NewJob::new("orders", json!({"order": 2})))
        .await
        .expect("enqueue_in");
    tx.rollback().await.expect("rollback");

    assert_eq!(order_status(&pool, 2).await, None);
    assert_eq!(storage.get_job(outcome.id).await.expect("get_job"), None);
    assert!(storage.stats().await.expect("stats").is_empty());
    finish(schema, pool).await;
}

#[tokio::test]
async fn ack_in_a_committed_transaction_commits_effect_and_completion_together() {
    let (schema, pool, storage) = setup().await;
    sqlx::query("INSERT INTO orders VALUES (3, 'placed')")
        .execute(&pool)
        .await
        .expect("insert order");
    storage
        .enqueue(NewJob::new("orders", json!({"order": 3})))
        .await
        .expect("enqueue");
    let job = claim(&storage).await;
    let lease = job.lease().expect("lease");

    let mut tx = pool.begin().await.expect("begin");
    sqlx::query("UPDATE orders SET status = 'shipped' WHERE id = 3")
        .execute(&mut *tx)
        .await
        .expect("business effect");
    storage
        .ack_in(&mut tx, &lease, Some(json!({"shipped": true})))
        .await
        .expect("ack_in");
    tx.commit().await.expect("commit");

    assert_eq!(order_status(&pool, 3).await.as_deref(), Some("shipped"));
    let record = storage
        .get_history(job.id)
        .await
        .expect("get_history")
        .expect("archived");
    assert_eq!(record.status, FinalStatus::Completed);
    assert_eq!(record.result, Some(json!({"shipped": true})));
    assert_eq!(storage.get_job(job.id).await.expect("get_job"), None);
    finish(schema, pool).await;
}

#[tokio::test]
async fn ack_in_a_rolled_back_transaction_leaves_effect_undone_and_job_leased() {
    let (schema, pool, storage) = setup().await;
    sqlx::query("INSERT INTO orders VALUES (4, 'placed')")
        .execute(&pool)
        .await
        .expect("insert order");
    storage
        .enqueue(NewJob::new("orders", json!({"order": 4})))
        .await
        .expect("enqueue");
    let job = claim(&storage).await;
    let lease = job.lease().expect("lease");

    let mut tx = pool.begin().await.expect("begin");
    sqlx::query("UPDATE orders SET status = 'shipped' WHERE id = 4")
        .execute(&mut *tx)
        .await
        .expect("business effect");
    storage.ack_in(&mut tx, &lease, None).await.expect("ack_in");
    tx.rollback().await.expect("rollback");

    assert_eq!(order_status(&pool, 4).await.as_deref(), Some("placed"));
    assert_eq!(
        storage.get_history(job.id).await.expect("get_history"),
        None
    );
    let live = storage
        .get_job(job.id)
        .await
        .expect("get_job")
        .expect("still live");
    assert_eq!(
        live.lease(),
        Some(lease.clone()),
        "still leased by the same holder"
    );
    storage
        .ack(&lease, None)
        .await
        .expect("the lease still acks afterwards");
    finish(schema, pool).await;
}

#[tokio::test]
async fn nack_in_follows_the_callers_transaction() {
    let (schema, pool, storage) = setup().await;
    storage
        .enqueue(NewJob::new("orders", json!({"order": 5})).max_attempts(3))
        .await
        .expect("enqueue");
    let job = claim(&storage).await;
    let lease = job.lease().expect("lease");

    let mut tx = pool.begin().await.expect("begin");
    let outcome = storage
        .nack_in(&mut tx, &lease, json!("try later"), Retry::After(LEASE))
        .await
        .expect("nack_in");
    assert!(matches!(outcome, NackOutcome::Retrying { .. }));
    tx.rollback().await.expect("rollback");
    assert_eq!(
        storage
            .get_job(job.id)
            .await
            .expect("get_job")
            .expect("live")
            .lease(),
        Some(lease.clone())
    );

    let mut tx = pool.begin().await.expect("begin");
    storage
        .nack_in(&mut tx, &lease, json!("fatal"), Retry::Never)
        .await
        .expect("nack_in");
    tx.commit().await.expect("commit");
    let record = storage
        .get_history(job.id)
        .await
        .expect("get_history")
        .expect("archived");
    assert_eq!(record.status, FinalStatus::DeadLetter);
    let stale = storage
        .ack_in(&mut pool.acquire().await.expect("conn"), &lease, None)
        .await;
    assert!(
        matches!(stale, Err(QueueError::LeaseLost { .. })),
        "{stale:?}"
    );
    finish(schema, pool).await;
}
