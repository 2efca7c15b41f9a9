//! Large batch enqueues (what a bulk producer sends): in the caller's
//! transaction, with one wake-up at its commit; atomic when the server
//! refuses one row; the connection usable after.

mod common;

use common::{next_within, queue};

use std::time::Duration;

use queue_core::{NewJob, Storage};
use serde_json::json;

/// `n` jobs for `queue`.
fn batch(queue: &str, n: usize) -> Vec<NewJob> {
    (0..n)
        .map(|i| NewJob::new(queue, json!({ "i": i })))
        .collect()
}

async fn live(pool: &sqlx::PgPool, schema: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM \"{schema}\".job_queue"
    )))
    .fetch_one(pool)
    .await
    .expect("count")
}

/// In the caller's transaction: rolled back, nothing; committed, every job,
/// and one wake-up for its queue, sent at the commit.
#[tokio::test]
async fn a_large_batch_follows_the_callers_transaction_and_wakes_at_commit() {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    let mut wakeups = storage.listen().await.expect("listen");

    let mut tx = pool.begin().await.expect("begin");
    let outcomes = storage
        .enqueue_batch_in(&mut tx, batch("bulk", 500))
        .await
        .expect("enqueue_batch_in");
    assert_eq!(outcomes.len(), 500);
    tx.rollback().await.expect("rollback");
    assert_eq!(live(&pool, schema.name()).await, 0, "rolled back: no job");
    assert_eq!(
        next_within(&mut wakeups, Duration::from_millis(300)).await,
        None,
        "no wake-up from a rolled-back batch"
    );

    let mut tx = pool.begin().await.expect("begin");
    let outcomes = storage
        .enqueue_batch_in(&mut tx, batch("bulk", 500))
        .await
        .expect("enqueue_batch_in");
    assert_eq!(
        next_within(&mut wakeups, Duration::from_millis(300)).await,
        None,
        "no wake-up before the commit"
    );
    tx.commit().await.expect("commit");
    assert_eq!(
        next_within(&mut wakeups, Duration::from_secs(5)).await,
        Some(queue("bulk")),
        "one wake-up for the batch's queue at the commit"
    );
    assert_eq!(
        next_within(&mut wakeups, Duration::from_millis(300)).await,
        None,
        "one only"
    );
    assert_eq!(live(&pool, schema.name()).await, 500);
    let first = storage.get_job(outcomes[0].id).await.expect("get_job");
    assert_eq!(first.map(|job| job.payload), Some(json!({ "i": 0 })));

    drop(wakeups);
    pool.close().await;
    schema.drop_schema().await;
}

/// A row the server refuses (here a CHECK constraint an application
/// added, failing on the 200th job) fails the whole batch: no job of it
/// is written, the error is typed, and the connection takes the next
/// batch.
#[tokio::test]
async fn a_refused_row_fails_the_whole_batch_and_the_next_one_goes_in() {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "ALTER TABLE \"{}\".job_queue ADD CONSTRAINT no_poison CHECK (payload <> '\"poison\"')",
        schema.name()
    )))
    .execute(&pool)
    .await
    .expect("the application's constraint");
    let mut jobs = batch("q", 300);
    jobs[199] = NewJob::new("q", json!("poison"));
    let error = storage
        .enqueue_batch(jobs)
        .await
        .expect_err("the constraint refuses the batch");
    assert!(
        error.to_string().contains("no_poison"),
        "the error names the constraint: {error}"
    );
    assert_eq!(live(&pool, schema.name()).await, 0, "nothing written");
    // Every connection of the pool still works (one of them ran the batch).
    for _ in 0..12 {
        storage
            .enqueue_batch(batch("q", 100))
            .await
            .expect("the next batch");
    }
    assert_eq!(live(&pool, schema.name()).await, 1200);
    pool.close().await;
    schema.drop_schema().await;
}
