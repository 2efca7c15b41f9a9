//! awa's batch enqueue on a real PostgreSQL, timed as `queue-bench
//! enqueue` times ours: `N` jobs of `{"i": i}` in batches of `BATCH`, one
//! producer, a pool of 10, a fresh `awa` schema (dropped and migrated
//! before the clock starts).
//!
//! `awa-enqueue [MODE] [N] [BATCH]`, the database from `DATABASE_URL`
//! (default `postgres://postgres@127.0.0.1:5432/awa_enqueue`, which must
//! exist). MODE: `queue-storage-copy` (default: `QueueStorage::
//! enqueue_params_copy`, awa's COPY path for producers), `compat-copy`
//! (`insert_many_copy_from_pool`) or `compat-insert` (`insert_many`).
//! Prints one `result key=value ...` line.

use std::time::Instant;

use awa::awa_model::{
    InsertOpts, InsertParams, QueueStorage, QueueStorageConfig, insert, migrations,
};
use sqlx::postgres::PgPoolOptions;

type Error = Box<dyn std::error::Error>;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map_or("queue-storage-copy", String::as_str);
    let n: usize = args
        .get(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(20_000);
    let batch: usize = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(1_000);
    if batch == 0 || !matches!(mode, "queue-storage-copy" | "compat-copy" | "compat-insert") {
        return Err(format!("usage: awa-enqueue [queue-storage-copy|compat-copy|compat-insert] [N] [BATCH>0], not {args:?}").into());
    }
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/awa_enqueue".into());
    let pool = PgPoolOptions::new()
        .max_connections(10)
        .connect(&url)
        .await?;
    sqlx::query("DROP SCHEMA IF EXISTS awa CASCADE")
        .execute(&pool)
        .await?;
    migrations::run(&pool).await?;
    let storage = QueueStorage::new(QueueStorageConfig::default())?;
    storage.install(&pool).await?;

    let batches: Vec<Vec<InsertParams>> = (0..n)
        .step_by(batch)
        .map(|start| {
            (start..(start + batch).min(n))
                .map(|i| InsertParams {
                    kind: "bench".into(),
                    args: serde_json::json!({ "i": i }),
                    opts: InsertOpts::default(),
                })
                .collect()
        })
        .collect();
    let started = Instant::now();
    for jobs in &batches {
        match mode {
            "queue-storage-copy" => {
                storage.enqueue_params_copy(&pool, jobs).await?;
            }
            "compat-copy" => {
                insert::insert_many_copy_from_pool(&pool, jobs).await?;
            }
            _ => {
                insert::insert_many(&pool, jobs).await?;
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let live: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.jobs")
        .fetch_one(&pool)
        .await?;
    if live != i64::try_from(n)? {
        return Err(format!("enqueued {n} jobs but awa.jobs holds {live}").into());
    }
    println!(
        "result system=awa-0.6.9 workload=enqueue mode={mode} n={n} batch={batch} jobs_per_s={:.0} seconds={seconds:.3}",
        n as f64 / seconds
    );
    Ok(())
}
