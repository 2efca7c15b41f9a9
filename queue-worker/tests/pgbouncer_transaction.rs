//! The worker on PostgreSQL through a PgBouncer in transaction pooling
//! mode (`QUEUE_TEST_PGBOUNCER_URL`, a server pool of 4; scripts/pgbouncer.sh,
//! scripts/test.sh), the storage in its transaction pooling mode
//! (`PgStorage::with_transaction_pooling`), listening for wake-ups on a
//! direct connection (`QUEUE_TEST_POSTGRES_URL`). Without the variables
//! every test fails naming them.

mod common;

use std::sync::Arc;
use std::time::Duration;

use queue_core::{NewJob, Storage};
use queue_postgres::PgStorage;
use queue_testkit::harness::postgres::TestSchema;
use queue_worker::{JobContext, JobError, QueueOptions, WorkerBuilder, WorkerOptions};
use serde_json::json;
use tokio::sync::mpsc;

const URL_VAR: &str = "QUEUE_TEST_PGBOUNCER_URL";

/// A storage on `schema` through PgBouncer in transaction pooling, its
/// wake-ups on a direct connection when `listen`.
async fn through_pgbouncer(schema: &TestSchema, listen: bool) -> PgStorage {
    let url = std::env::var(URL_VAR).unwrap_or_else(|_| {
        panic!(
            "{URL_VAR} is not set: these tests need a PgBouncer in transaction pooling mode \
             (scripts/pgbouncer.sh start; then {URL_VAR}=postgres://postgres@127.0.0.1:6432/queue_test)"
        )
    });
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(8)
        .connect(&url)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {URL_VAR}: {e}"));
    let storage = PgStorage::from_pool(pool)
        .with_transaction_pooling(true)
        .with_schema(schema.name())
        .expect("valid schema");
    if listen {
        storage.with_listen_url(schema.url()).expect("valid URL")
    } else {
        storage
    }
}

async fn storage(listen: bool) -> (TestSchema, PgStorage) {
    let schema = TestSchema::create().await;
    let storage = through_pgbouncer(&schema, listen).await;
    storage.migrate().await.expect("migrate through PgBouncer");
    (schema, storage)
}

async fn finish(schema: TestSchema, storage: &PgStorage) {
    storage.pool().close().await;
    schema.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_jobs_complete_exactly_once_in_priority_order() {
    let (schema, storage) = storage(true).await;
    let storage = Arc::new(storage);
    common::five_thousand_jobs_complete_exactly_once_in_priority_order(Arc::clone(&storage)).await;
    finish(schema, &storage).await;
}

/// `ack_in` on the handler's own transaction through PgBouncer: the
/// storage's statement there is unnamed too, and the handler's own is
/// (`persistent(false)`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_completes_its_job_in_its_own_transaction() {
    let (schema, storage) = storage(true).await;
    let table = format!("\"{}\".effects", schema.name());
    let direct = schema.pool().await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE {table} (job BIGINT PRIMARY KEY)"
    )))
    .execute(&direct)
    .await
    .expect("effects table");
    let storage = Arc::new(storage);
    let in_handler = Arc::clone(&storage);
    let insert = format!("INSERT INTO {table} (job) VALUES ($1)");
    let (committed, _rolled_back) =
        common::handler_side_completion(Arc::clone(&storage), move |ctx: JobContext| {
            let storage = Arc::clone(&in_handler);
            let insert = insert.clone();
            async move {
                let mut tx = storage.pool().begin().await.map_err(JobError::from)?;
                sqlx::query(sqlx::AssertSqlSafe(insert))
                    .persistent(false)
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
        "SELECT job FROM {table} ORDER BY job"
    )))
    .fetch_all(&direct)
    .await
    .expect("effects");
    assert_eq!(
        effects,
        [committed.get()],
        "only the committed effect remains"
    );
    direct.close().await;
    finish(schema, &storage).await;
}

/// The worker subscribes on the storage's direct listen connection: a job
/// enqueued through PgBouncer by another process (another storage, its own
/// pool) starts at once, long before the idle back-off would look again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_wakes_on_the_direct_listen_connection() {
    let (schema, storage) = storage(true).await;
    let producer = through_pgbouncer(&schema, false).await;
    common::a_worker_wakes_on_another_producers_enqueue(storage.clone(), &producer).await;
    producer.pool().close().await;
    finish(schema, &storage).await;
}

/// Without a listen connection the storage declares no wake-ups, and the
/// worker finds jobs by polling alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_listen_connection_the_worker_polls() {
    let (schema, storage) = storage(false).await;
    assert!(storage.subscribe().await.expect("subscribe").is_none());
    let (done, mut dones) = mpsc::unbounded_channel();
    let worker = WorkerBuilder::new(storage.clone())
        .options(WorkerOptions {
            poll_interval: Duration::from_millis(200),
            ..WorkerOptions::default()
        })
        .queue(
            "polled",
            QueueOptions::with_concurrency(2),
            move |ctx: JobContext| {
                let _ = done.send(ctx.job().id);
                async { Ok(None) }
            },
        )
        .expect("queue")
        .start()
        .expect("start");
    for i in 0..20 {
        storage
            .enqueue(NewJob::new("polled", json!(i)))
            .await
            .expect("enqueue");
    }
    for _ in 0..20 {
        tokio::time::timeout(Duration::from_secs(10), dones.recv())
            .await
            .expect("every job runs")
            .expect("a run");
    }
    worker.shutdown(Duration::from_secs(5)).await;
    finish(schema, &storage).await;
}
