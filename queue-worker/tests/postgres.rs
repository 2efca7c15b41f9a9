//! The worker on PostgreSQL.

mod common;

use std::sync::Arc;

use queue_postgres::PgStorage;
use queue_testkit::harness::postgres::TestSchema;
use queue_worker::{JobContext, JobError};
use serde_json::json;

async fn storage() -> (TestSchema, PgStorage) {
    let schema = TestSchema::create().await;
    let storage = PgStorage::from_pool(schema.pool().await)
        .with_schema(schema.name())
        .expect("valid schema");
    storage.migrate().await.expect("migrate");
    (schema, storage)
}

async fn finish(schema: TestSchema, storage: &PgStorage) {
    storage.pool().close().await;
    schema.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_jobs_complete_exactly_once_in_priority_order() {
    let (schema, storage) = storage().await;
    let storage = Arc::new(storage);
    common::five_thousand_jobs_complete_exactly_once_in_priority_order(Arc::clone(&storage)).await;
    finish(schema, &storage).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_completes_its_job_in_its_own_transaction() {
    let (schema, storage) = storage().await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE \"{}\".effects (job BIGINT PRIMARY KEY)",
        schema.name()
    )))
    .execute(storage.pool())
    .await
    .expect("effects table");
    let table = format!("\"{}\".effects", schema.name());
    let storage = Arc::new(storage);
    let in_handler = Arc::clone(&storage);
    let (committed, _rolled_back) =
        common::handler_side_completion(Arc::clone(&storage), move |ctx: JobContext| {
            let storage = Arc::clone(&in_handler);
            let insert = format!("INSERT INTO {table} (job) VALUES ($1)");
            async move {
                let mut tx = storage.pool().begin().await.map_err(JobError::from)?;
                sqlx::query(sqlx::AssertSqlSafe(insert))
                    .bind(ctx.job().id.get())
                    .execute(&mut *tx)
                    .await
                    .map_err(JobError::from)?;
                if ctx.payload()["commit"] == json!(true) {
                    storage
                        .ack_in(&mut tx, ctx.lease(), Some(json!("by the handler")))
                        .await
                        .map_err(JobError::retry)?;
                    tx.commit().await.map_err(JobError::from)?;
                    ctx.mark_completed();
                    Ok(Some(json!("by the worker")))
                } else {
                    tx.rollback().await.map_err(JobError::from)?;
                    Err(JobError::discard("rolled back on purpose"))
                }
            }
        })
        .await;
    let effects: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT job FROM \"{}\".effects ORDER BY job",
        schema.name()
    )))
    .fetch_all(storage.pool())
    .await
    .expect("effects");
    assert_eq!(
        effects,
        [committed.get()],
        "only the committed effect remains"
    );
    finish(schema, &storage).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_fires_the_token_and_the_late_result_is_dropped() {
    let (schema, storage) = storage().await;
    let clock = queue_core::ManualClock::new(chrono::Utc::now());
    let storage = Arc::new(storage.with_clock(clock.clone()));
    common::lost_lease_fires_the_token_and_drops_the_result(Arc::clone(&storage), clock).await;
    finish(schema, &storage).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_jobs_start_on_time_without_polling() {
    let (schema, storage) = storage().await;
    let storage = Arc::new(storage);
    common::delayed_jobs_start_on_time_without_polling(Arc::clone(&storage)).await;
    finish(schema, &storage).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_acks_the_finished_and_releases_the_stuck() {
    let (schema, storage) = storage().await;
    let storage = Arc::new(storage);
    common::shutdown_acks_the_finished_and_releases_the_stuck(Arc::clone(&storage)).await;
    finish(schema, &storage).await;
}

/// The worker subscribes to LISTEN/NOTIFY by itself: a job enqueued by
/// another process (here another storage on its own pool) starts at once,
/// long before the idle back-off would have looked again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_wakes_itself_on_another_process_enqueue() {
    let (schema, storage) = storage().await;
    let producer = PgStorage::from_pool(schema.pool().await)
        .with_schema(schema.name())
        .expect("valid schema");
    common::a_worker_wakes_on_another_producers_enqueue(storage.clone(), &producer).await;
    producer.pool().close().await;
    finish(schema, &storage).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_worker_is_listed_and_gone_after_shutdown() {
    let (schema, storage) = storage().await;
    let storage = Arc::new(storage);
    common::a_running_worker_is_listed_and_gone_after_shutdown(Arc::clone(&storage)).await;
    finish(schema, &storage).await;
}
