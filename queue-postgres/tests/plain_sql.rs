//! The design document's statements (shared/seeds 000, section 2) run as
//! written against our tables, and the storage then drives the rows they
//! wrote. Placeholders are replaced by literal values; where the document
//! gives only MySQL syntax for a step (TIMESTAMPADD), PostgreSQL's
//! `now() + interval` stands in, as the document itself suggests.

mod common;

use queue_core::{FinalStatus, JobId, NewJob, Storage};
use queue_testkit::interop;
use serde_json::json;
use sqlx::PgPool;

/// §2.1, PostgreSQL.
const ENQUEUE: &str = "INSERT INTO job_queue (queue_name, priority, unique_key, payload, max_attempts, available_at)
VALUES ('emails', 5, 'welcome-ada', '{\"to\": \"ada\"}'::jsonb, 3, NOW() + ('0' || ' seconds')::interval)
ON CONFLICT (queue_name, unique_key)
DO NOTHING
RETURNING id";

const FIND_BY_KEY: &str =
    "SELECT id FROM job_queue WHERE queue_name='emails' AND unique_key='welcome-ada'";

async fn exec(pool: &PgPool, sql: String) -> u64 {
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(pool)
        .await
        .unwrap_or_else(|e| panic!("the design's statement fails: {e}"))
        .rows_affected()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_designs_enqueue_runs_and_the_storage_claims_and_acks_its_job() {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    let id: Option<i64> = sqlx::query_scalar(ENQUEUE)
        .fetch_optional(&pool)
        .await
        .expect("enqueue");
    let id = id.expect("a new id");
    let again: Option<i64> = sqlx::query_scalar(ENQUEUE)
        .fetch_optional(&pool)
        .await
        .expect("again");
    assert_eq!(again, None, "the key exists: no row returned");
    let found: i64 = sqlx::query_scalar(FIND_BY_KEY)
        .fetch_one(&pool)
        .await
        .expect("by key");
    assert_eq!(found, id);

    let job = storage
        .get_job(JobId(id))
        .await
        .expect("read")
        .expect("live");
    assert_eq!((job.priority, job.attempts, job.max_attempts), (5, 0, 3));
    assert_eq!(job.payload, json!({ "to": "ada" }));
    let lease = interop::claim(&storage, "emails", "w1").await;
    assert_eq!(lease.job_id, JobId(id));
    storage.ack(&lease, Some(json!("sent"))).await.expect("ack");
    let record = storage
        .get_history(JobId(id))
        .await
        .expect("read")
        .expect("archived");
    assert_eq!(
        (record.status, record.attempts, record.max_attempts),
        (FinalStatus::Completed, 1, 3)
    );
    pool.close().await;
    schema.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_claimed_and_heartbeated_by_the_designs_statements_is_acked_by_the_storage() {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    let id = storage
        .enqueue(NewJob::new("reports", json!({ "n": 1 })))
        .await
        .expect("enqueue")
        .id
        .get();
    // §2.2, in one transaction.
    let mut tx = pool.begin().await.expect("begin");
    let picked: i64 = sqlx::query_scalar(
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
    .fetch_one(&mut *tx)
    .await
    .expect("pick");
    assert_eq!(picked, id);
    let updated = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "UPDATE job_queue
SET lease_until = CURRENT_TIMESTAMP(6) + interval '30 seconds',
    locked_by   = 'w1',
    attempts    = attempts + 1
WHERE id = {id}
  AND lease_until IS NULL
  AND attempts < max_attempts"
    )))
    .execute(&mut *tx)
    .await
    .expect("lease")
    .rows_affected();
    assert_eq!(updated, 1);
    tx.commit().await.expect("commit");

    // §2.5, PostgreSQL's form.
    let beat = exec(
        &pool,
        format!(
            "UPDATE job_queue
SET lease_until = NOW() + interval '60 seconds'
WHERE id = {id} AND locked_by = 'w1' AND lease_until > CURRENT_TIMESTAMP(6)"
        ),
    )
    .await;
    assert_eq!(beat, 1);

    interop::claimed_by_hand_is_acked_by_the_storage(&storage, JobId(id), "w1").await;
    pool.close().await;
    schema.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_designs_nack_schedules_the_job_and_the_storage_sees_it_waiting() {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    let id = storage
        .enqueue(NewJob::new("flaky", json!({})))
        .await
        .expect("enqueue")
        .id;
    let lease = interop::claim(&storage, "flaky", "w1").await;
    // §2.4, PostgreSQL, with base 10 s and jitter 0.2.
    let released = exec(
        &pool,
        format!(
            "WITH j AS (
  SELECT attempts FROM job_queue WHERE id={id} AND locked_by='w1'
)
UPDATE job_queue
SET lease_until = NULL,
    locked_by   = NULL,
    available_at = NOW()
      + make_interval(secs => GREATEST(1, ROUND(10 * pow(2, j.attempts-1) * (1 + (0.2 * (random()-0.5)*2)))))
FROM j
WHERE id={id} AND locked_by='w1'"
        ),
    )
    .await;
    assert_eq!(released, 1);
    interop::nacked_by_hand_waits(&storage, &lease, "flaky").await;
    pool.close().await;
    schema.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_archived_by_the_designs_statements_read_back_and_retry() {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    for n in 0..2 {
        storage
            .enqueue(NewJob::new("billing", json!({ "n": n })).max_attempts(4))
            .await
            .expect("enqueue");
    }
    let done = interop::claim(&storage, "billing", "w1").await.job_id;
    let dead = interop::claim(&storage, "billing", "w1").await.job_id;
    // §2.3, in one transaction.
    exec(
        &pool,
        format!(
            "BEGIN;
INSERT INTO job_history (id, queue_name, priority, unique_key, payload,
                         result, status_final, attempts, processed_by,
                         created_at, started_at, finished_at)
SELECT id, queue_name, priority, unique_key, payload,
       '\"done\"'::jsonb, 'completed', attempts, 'w1',
       created_at,
       NULLIF(least(created_at, lease_until), created_at),
       NOW()
FROM job_queue
WHERE id = {done} AND locked_by = 'w1';
DELETE FROM job_queue WHERE id = {done} AND locked_by = 'w1';
COMMIT;"
        ),
    )
    .await;
    // §2.7, in one transaction.
    exec(
        &pool,
        format!(
            "BEGIN;
INSERT INTO job_history (id, queue_name, priority, unique_key, payload,
                         result, status_final, attempts, processed_by,
                         created_at, started_at, finished_at)
SELECT id, queue_name, priority, unique_key, payload,
       jsonb_build_object('error', '{{\"message\": \"boom\"}}'::jsonb), 'dead_letter', attempts, 'w1',
       created_at, NULL, NOW()
FROM job_queue
WHERE id={dead};
DELETE FROM job_queue WHERE id={dead};
COMMIT;"
        ),
    )
    .await;

    interop::archived_by_hand_reads_back_and_retries(&storage, done, dead).await;
    pool.close().await;
    schema.drop_schema().await;
}
