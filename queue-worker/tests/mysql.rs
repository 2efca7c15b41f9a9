//! The worker on MySQL / MariaDB.

mod common;

use std::sync::Arc;

use diesel_async::{AsyncConnection, RunQueryDsl, SimpleAsyncConnection};
use queue_mysql::MySqlStorage;
use queue_testkit::harness::mysql::TestDatabase;
use queue_worker::{JobContext, JobError};
use serde_json::json;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn storage() -> (TestDatabase, MySqlStorage) {
    let db = TestDatabase::create().await;
    let storage = MySqlStorage::connect_with_size(&db.url(), 8).expect("pool");
    storage.migrate().await.expect("migrate");
    (db, storage)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_jobs_complete_exactly_once_in_priority_order() {
    let (db, storage) = storage().await;
    common::five_thousand_jobs_complete_exactly_once_in_priority_order(Arc::new(storage)).await;
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_jobs_start_on_time_without_polling() {
    let (db, storage) = storage().await;
    common::delayed_jobs_start_on_time_without_polling(Arc::new(storage)).await;
    db.drop_database().await;
}

#[derive(diesel::QueryableByName)]
struct Effect {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    job: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_completes_its_job_in_its_own_transaction() {
    let (db, storage) = storage().await;
    let mut conn = storage.pool().get().await.expect("conn");
    conn.batch_execute("CREATE TABLE effects (job BIGINT PRIMARY KEY)")
        .await
        .expect("effects");
    drop(conn);
    let storage = Arc::new(storage);
    let in_handler = Arc::clone(&storage);
    let (committed, _rolled_back) =
        common::handler_side_completion(Arc::clone(&storage), move |ctx: JobContext| {
            let storage = Arc::clone(&in_handler);
            async move {
                let commit = ctx.payload()["commit"] == json!(true);
                let mut conn = storage.pool().get().await.map_err(JobError::retry)?;
                let outcome = conn
                    .transaction(async |conn| {
                        diesel::sql_query(format!(
                            "INSERT INTO effects (job) VALUES ({})",
                            ctx.job().id
                        ))
                        .execute(conn)
                        .await?;
                        if !commit {
                            return Err::<(), BoxError>("rolled back on purpose".into());
                        }
                        storage
                            .ack_in(conn, ctx.lease(), Some(json!("by the handler")))
                            .await?;
                        Ok(())
                    })
                    .await;
                match outcome {
                    Ok(()) => {
                        ctx.mark_completed();
                        Ok(Some(json!("by the worker")))
                    }
                    Err(error) => Err(JobError::discard(error)),
                }
            }
        })
        .await;
    let mut conn = storage.pool().get().await.expect("conn");
    let effects: Vec<i64> = diesel::sql_query("SELECT job FROM effects ORDER BY job")
        .load::<Effect>(&mut conn)
        .await
        .expect("effects")
        .into_iter()
        .map(|e| e.job)
        .collect();
    assert_eq!(
        effects,
        [committed.get()],
        "only the committed effect remains"
    );
    drop(conn);
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_fires_the_token_and_the_late_result_is_dropped() {
    let (db, storage) = storage().await;
    let clock = queue_core::ManualClock::new(chrono::Utc::now());
    let storage = Arc::new(storage.with_clock(clock.clone()));
    common::lost_lease_fires_the_token_and_drops_the_result(storage, clock).await;
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_acks_the_finished_and_releases_the_stuck() {
    let (db, storage) = storage().await;
    common::shutdown_acks_the_finished_and_releases_the_stuck(Arc::new(storage)).await;
    db.drop_database().await;
}
