//! A tour of the queue on PostgreSQL: jobs of different priorities, a
//! delayed one, one that fails twice then succeeds, one that runs out of
//! attempts into the dead letters; a worker runs them all, woken by
//! LISTEN/NOTIFY, and the history is printed.
//!
//! ```sh
//! cargo run -p queue-worker --example quickstart
//! QUEUE_DEMO_DATABASE_URL=postgres://user@host/db cargo run -p queue-worker --example quickstart
//! ```
//!
//! Works in the schema `queue_quickstart`, which it drops and recreates.

use std::time::Duration;

use queue_core::{Backoff, FinalStatus, HistoryFilter, NewJob, Storage};
use queue_postgres::{PgStorage, Wakeup};
use queue_worker::{JobContext, JobError, QueueOptions, WorkerBuilder, WorkerOptions};
use serde_json::json;

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/queue_test";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("QUEUE_DEMO_DATABASE_URL").unwrap_or_else(|_| DEFAULT_URL.into());
    println!("database: {url} (schema queue_quickstart)");
    let storage = PgStorage::connect(&url)
        .await?
        .with_schema("queue_quickstart")?;
    sqlx::raw_sql("DROP SCHEMA IF EXISTS queue_quickstart CASCADE")
        .execute(storage.pool())
        .await?;
    storage.migrate().await?;

    // Jobs: three priorities, one delayed, one flaky, one hopeless.
    for (name, priority) in [("low", -5), ("normal", 0), ("urgent", 10)] {
        storage
            .enqueue(NewJob::new("emails", json!({ "kind": name })).priority(priority))
            .await?;
    }
    storage
        .enqueue(
            NewJob::new("emails", json!({ "kind": "delayed 2s" })).delay(Duration::from_secs(2)),
        )
        .await?;
    storage
        .enqueue(NewJob::new("flaky", json!({ "kind": "fails twice" })).max_attempts(5))
        .await?;
    storage
        .enqueue(NewJob::new("flaky", json!({ "kind": "always fails" })).max_attempts(3))
        .await?;

    let retry_fast = QueueOptions {
        backoff: Backoff::new(
            Duration::from_millis(100),
            Duration::ZERO,
            Duration::from_secs(1),
            0.2,
        )?,
        ..QueueOptions::with_concurrency(2)
    };
    let worker = WorkerBuilder::new(storage.clone())
        .options(WorkerOptions {
            poll_interval: Duration::from_millis(250),
            ..WorkerOptions::default()
        })
        .queue(
            "emails",
            QueueOptions::with_concurrency(1),
            |ctx: JobContext| async move {
                println!(
                    "  emails: ran {} (attempt {})",
                    ctx.payload()["kind"],
                    ctx.attempt()
                );
                Ok(Some(json!("sent")))
            },
        )?
        .queue("flaky", retry_fast, |ctx: JobContext| async move {
            let kind = ctx.payload()["kind"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            println!("  flaky:  ran \"{kind}\" (attempt {})", ctx.attempt());
            match kind.as_str() {
                "fails twice" if ctx.attempt() <= 2 => Err(JobError::retry("not yet")),
                "always fails" => Err(JobError::retry("the remote keeps refusing")),
                _ => Ok(Some(json!("done"))),
            }
        })?
        .start()?;

    // Wake the worker as soon as PostgreSQL signals new jobs.
    let mut wakeups = storage.listen().await?;
    let waker = worker.waker();
    tokio::spawn(async move {
        while let Ok(wakeup) = wakeups.next().await {
            if matches!(wakeup, Wakeup::Queue(_) | Wakeup::Reconnected) {
                waker.wake();
            }
        }
    });

    println!("running:");
    let filter = HistoryFilter::default();
    while storage.list_history(&filter).await?.records.len() < 6 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    worker.shutdown(Duration::from_secs(5)).await;

    println!("history (newest first):");
    for record in storage.list_history(&filter).await?.records {
        let outcome = match record.status {
            FinalStatus::Completed => {
                format!("completed with {}", record.result.unwrap_or_default())
            }
            FinalStatus::DeadLetter => format!(
                "dead letter: {}",
                record.last_error.unwrap_or_default()["message"]
            ),
            FinalStatus::Discarded => "discarded".to_owned(),
        };
        println!(
            "  #{} {:<7} {:<16} attempts {}  {outcome}",
            record.id,
            record.queue,
            record.payload["kind"].as_str().unwrap_or_default(),
            record.attempts
        );
    }
    Ok(())
}
