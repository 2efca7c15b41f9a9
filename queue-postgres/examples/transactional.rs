//! A business write and its job in one transaction, and a handler that
//! completes its job in the same transaction as its effect.
//!
//! ```sh
//! cargo run -p queue-postgres --example transactional -- postgres://postgres@127.0.0.1/queue_test
//! ```

use std::time::Duration;

use queue_core::{DequeueRequest, NewJob, QueueName, Storage, WorkerId};
use queue_postgres::PgStorage;
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/queue_test".into());
    let storage = PgStorage::connect(&url)
        .await?
        .with_schema("queue_example")?;
    storage.migrate().await?;
    let pool = storage.pool().clone();
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS queue_example.orders (id BIGSERIAL PRIMARY KEY, status TEXT NOT NULL)",
    )
    .execute(&pool)
    .await?;

    // 1. Place an order and enqueue its shipping job atomically: if the
    //    transaction rolls back, neither the order nor the job exists.
    let mut tx = pool.begin().await?;
    let order: i64 = sqlx::query_scalar(
        "INSERT INTO queue_example.orders (status) VALUES ('placed') RETURNING id",
    )
    .fetch_one(&mut *tx)
    .await?;
    let job =
        NewJob::new("shipping", json!({ "order": order })).unique_key(format!("ship-{order}"));
    let enqueued = storage.enqueue_in(&mut tx, job).await?;
    tx.commit().await?;
    println!("order {order} placed, shipping job {}", enqueued.id);

    // 2. A handler claims the job and ships the order; the status change
    //    and the job's completion commit together, or not at all.
    let request = DequeueRequest::new(
        vec![QueueName::new("shipping")?],
        1,
        Duration::from_secs(30),
        WorkerId::new("example-worker")?,
    )?;
    for job in storage.dequeue(&request).await? {
        let lease = job.lease().ok_or("a claimed job carries its lease")?;
        let order = job.payload["order"]
            .as_i64()
            .ok_or("payload names an order")?;
        let mut tx = pool.begin().await?;
        sqlx::query("UPDATE queue_example.orders SET status = 'shipped' WHERE id = $1")
            .bind(order)
            .execute(&mut *tx)
            .await?;
        storage
            .ack_in(&mut tx, &lease, Some(json!({ "shipped": order })))
            .await?;
        tx.commit().await?;
        println!("order {order} shipped, job {} completed", job.id);
    }
    Ok(())
}
