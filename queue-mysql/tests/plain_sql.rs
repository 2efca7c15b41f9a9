//! The design document's MySQL statements (shared/seeds 000, section 2)
//! run as written against our tables, and the storage then drives the rows
//! they wrote. Placeholders are replaced by literal values. Two changes
//! that MariaDB needs (docs/sql-interop.md): it has no `CAST(... AS JSON)`
//! (its JSON is text with a validity check), so a JSON value is written as
//! its text, which MySQL 8 accepts too; the archive statements, which the
//! document writes once in PostgreSQL syntax, use `JSON_OBJECT` and
//! `JSON_EXTRACT` for `jsonb_build_object` and `::jsonb`. The session runs
//! in UTC: the document's CURRENT_TIMESTAMP follows the session time zone.

mod common;

use diesel::QueryableByName;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};
use queue_core::{FinalStatus, JobId, NewJob, Storage};
use queue_mysql::MySqlStorage;
use queue_testkit::harness::mysql::TestDatabase;
use queue_testkit::interop;
use serde_json::json;

#[derive(QueryableByName)]
struct Id {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

/// A migrated database, its storage, and a UTC session of the test's own.
async fn setup() -> (TestDatabase, MySqlStorage, AsyncMysqlConnection) {
    let (db, storage) = common::storage_in_new_database().await;
    let mut conn = AsyncMysqlConnection::establish(&db.url())
        .await
        .expect("connect");
    conn.batch_execute("SET time_zone = '+00:00'")
        .await
        .expect("UTC session");
    (db, storage, conn)
}

async fn exec(conn: &mut AsyncMysqlConnection, sql: &str) -> usize {
    diesel::sql_query(sql)
        .execute(conn)
        .await
        .unwrap_or_else(|e| panic!("the design's statement fails: {e}\n{sql}"))
}

async fn ids(conn: &mut AsyncMysqlConnection, sql: &str) -> Vec<i64> {
    diesel::sql_query(sql)
        .load::<Id>(conn)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{sql}"))
        .into_iter()
        .map(|row| row.id)
        .collect()
}

const ENQUEUE: &str = "INSERT INTO job_queue (queue_name, priority, unique_key, payload, max_attempts, available_at)
VALUES ('emails', 5, 'welcome-ada', '{\"to\": \"ada\"}', 3, TIMESTAMPADD(SECOND, 0, CURRENT_TIMESTAMP(6)))
ON DUPLICATE KEY UPDATE id = id";

const FIND_BY_KEY: &str =
    "SELECT id FROM job_queue WHERE queue_name='emails' AND unique_key='welcome-ada'";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_designs_enqueue_runs_and_the_storage_claims_and_acks_its_job() {
    let (db, storage, mut conn) = setup().await;
    assert_eq!(exec(&mut conn, ENQUEUE).await, 1);
    exec(&mut conn, ENQUEUE).await;
    let found = ids(&mut conn, FIND_BY_KEY).await;
    assert_eq!(found.len(), 1, "one row for the key");
    let id = JobId(found[0]);

    let job = storage.get_job(id).await.expect("read").expect("live");
    assert_eq!((job.priority, job.attempts, job.max_attempts), (5, 0, 3));
    assert_eq!(job.payload, json!({ "to": "ada" }));
    let age = storage.now().await.expect("now") - job.created_at;
    assert!(
        age.num_seconds().abs() < 60,
        "created_at defaults to UTC: {age}"
    );
    let lease = interop::claim(&storage, "emails", "w1").await;
    assert_eq!(lease.job_id, id);
    storage.ack(&lease, Some(json!("sent"))).await.expect("ack");
    let record = storage
        .get_history(id)
        .await
        .expect("read")
        .expect("archived");
    assert_eq!(
        (record.status, record.attempts, record.max_attempts),
        (FinalStatus::Completed, 1, 3)
    );
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_claimed_and_heartbeated_by_the_designs_statements_is_acked_by_the_storage() {
    let (db, storage, mut conn) = setup().await;
    let id = storage
        .enqueue(NewJob::new("reports", json!({ "n": 1 })))
        .await
        .expect("enqueue")
        .id
        .get();
    // §2.2: the two steps in one transaction, then the read.
    conn.batch_execute("START TRANSACTION")
        .await
        .expect("begin");
    let picked = ids(
        &mut conn,
        "SELECT id
FROM job_queue
WHERE queue_name IN ('reports')
  AND lease_until IS NULL
  AND available_at <= CURRENT_TIMESTAMP(6)
  AND attempts < max_attempts
ORDER BY priority DESC, available_at ASC, id ASC
LIMIT 1
FOR UPDATE SKIP LOCKED",
    )
    .await;
    assert_eq!(picked, [id]);
    let updated = exec(
        &mut conn,
        &format!(
            "UPDATE job_queue
SET lease_until = TIMESTAMPADD(SECOND, 30, CURRENT_TIMESTAMP(6)),
    locked_by   = 'w1',
    attempts    = attempts + 1
WHERE id = {id}
  AND lease_until IS NULL 
  AND attempts < max_attempts"
        ),
    )
    .await;
    assert_eq!(updated, 1);
    conn.batch_execute("COMMIT").await.expect("commit");
    assert_eq!(
        ids(
            &mut conn,
            &format!("SELECT * FROM job_queue WHERE id = {id}")
        )
        .await,
        [id]
    );

    // §2.5.
    let beat = exec(
        &mut conn,
        &format!(
            "UPDATE job_queue
SET lease_until = TIMESTAMPADD(SECOND, 60, CURRENT_TIMESTAMP(6))
WHERE id = {id} AND locked_by = 'w1' AND lease_until > CURRENT_TIMESTAMP(6)"
        ),
    )
    .await;
    assert_eq!(beat, 1);

    interop::claimed_by_hand_is_acked_by_the_storage(&storage, JobId(id), "w1").await;
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_designs_nack_and_reclaim_return_jobs_the_storage_claims_again() {
    let (db, storage, mut conn) = setup().await;
    let flaky = storage
        .enqueue(NewJob::new("flaky", json!({})))
        .await
        .expect("enqueue")
        .id;
    let lease = interop::claim(&storage, "flaky", "w1").await;
    // §2.4, MySQL, with base 10 s and jitter 0.2.
    let released = exec(
        &mut conn,
        &format!(
            "UPDATE job_queue
SET lease_until = NULL,
    locked_by   = NULL,
    available_at = TIMESTAMPADD(
      SECOND,
      GREATEST(1, ROUND(10 * POW(2, attempts-1) * (1 + (0.2 * (RAND()-0.5)*2)))),
      CURRENT_TIMESTAMP(6)
    )
WHERE id={flaky} AND locked_by='w1'"
        ),
    )
    .await;
    assert_eq!(released, 1);
    interop::nacked_by_hand_waits(&storage, &lease, "flaky").await;

    // §2.6: an expired lease released by the design's reclaim.
    let stuck = storage
        .enqueue(NewJob::new("stuck", json!({})))
        .await
        .expect("enqueue")
        .id;
    interop::claim(&storage, "stuck", "w2").await;
    exec(
        &mut conn,
        &format!("UPDATE job_queue SET lease_until = TIMESTAMPADD(SECOND, -5, CURRENT_TIMESTAMP(6)) WHERE id = {stuck}"),
    )
    .await;
    let reclaimed = exec(
        &mut conn,
        "UPDATE job_queue
SET lease_until = NULL,
    locked_by   = NULL,
    available_at = LEAST(available_at, CURRENT_TIMESTAMP(6))
WHERE lease_until IS NOT NULL
  AND lease_until <= CURRENT_TIMESTAMP(6)
LIMIT 1000",
    )
    .await;
    assert_eq!(reclaimed, 1);
    let again = interop::claim(&storage, "stuck", "w3").await;
    assert_eq!((again.job_id, again.attempt), (stuck, 2));
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_archived_by_the_designs_statements_read_back_and_retry() {
    let (db, storage, mut conn) = setup().await;
    for n in 0..2 {
        storage
            .enqueue(NewJob::new("billing", json!({ "n": n })).max_attempts(4))
            .await
            .expect("enqueue");
    }
    let done = interop::claim(&storage, "billing", "w1").await.job_id;
    let dead = interop::claim(&storage, "billing", "w1").await.job_id;
    // §2.3, in one transaction.
    conn.batch_execute("START TRANSACTION")
        .await
        .expect("begin");
    exec(
        &mut conn,
        &format!(
            "INSERT INTO job_history (id, queue_name, priority, unique_key, payload,
                         result, status_final, attempts, processed_by,
                         created_at, started_at, finished_at)
SELECT id, queue_name, priority, unique_key, payload,
       JSON_EXTRACT('\"done\"', '$'), 'completed', attempts, 'w1',
       created_at,
       NULLIF(least(created_at, lease_until), created_at),
       NOW()
FROM job_queue
WHERE id = {done} AND locked_by = 'w1'"
        ),
    )
    .await;
    exec(
        &mut conn,
        &format!("DELETE FROM job_queue WHERE id = {done} AND locked_by = 'w1'"),
    )
    .await;
    conn.batch_execute("COMMIT").await.expect("commit");
    // §2.7, in one transaction.
    conn.batch_execute("START TRANSACTION")
        .await
        .expect("begin");
    exec(
        &mut conn,
        &format!(
            "INSERT INTO job_history (id, queue_name, priority, unique_key, payload,
                         result, status_final, attempts, processed_by,
                         created_at, started_at, finished_at)
SELECT id, queue_name, priority, unique_key, payload,
       JSON_OBJECT('error', JSON_EXTRACT('{{\"message\": \"boom\"}}', '$')), 'dead_letter', attempts, 'w1',
       created_at, NULL, NOW()
FROM job_queue
WHERE id={dead}"
        ),
    )
    .await;
    exec(&mut conn, &format!("DELETE FROM job_queue WHERE id={dead}")).await;
    conn.batch_execute("COMMIT").await.expect("commit");

    interop::archived_by_hand_reads_back_and_retries(&storage, done, dead).await;
    db.drop_database().await;
}
