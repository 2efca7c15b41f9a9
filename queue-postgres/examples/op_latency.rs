//! Single-connection latency of each `Storage` operation on PostgreSQL
//! (one statement, one round trip each).
//!
//! ```sh
//! cargo run --release -p queue-postgres --example op_latency -- postgres://postgres@127.0.0.1/queue_test 2000
//! ```
//!
//! Works in the schema `queue_latency`, which it drops and recreates.

use queue_postgres::PgStorage;
use sqlx::postgres::PgPoolOptions;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/queue_test".into());
    let n: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(2000);

    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await?;
    sqlx::raw_sql("DROP SCHEMA IF EXISTS queue_latency CASCADE")
        .execute(&pool)
        .await?;
    let storage = PgStorage::from_pool(pool).with_schema("queue_latency")?;
    storage.migrate().await?;
    queue_testkit::latency::measure(&storage, "postgres", n).await?;
    Ok(())
}
