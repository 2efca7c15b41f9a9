//! A tour of the queue: jobs of different priorities, a delayed one, one
//! that fails twice then succeeds, one that runs out of attempts into the
//! dead letters; a worker runs them all and the history is printed.
//!
//! ```sh
//! cargo run -p queue --example quickstart      # SQLite, in ./queue-demo.db
//! QUEUE_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres cargo run -p queue --example quickstart
//! QUEUE_DATABASE_URL=mysql://root@127.0.0.1:3306/app cargo run -p queue --example quickstart
//! ```
//!
//! It migrates the database it is given (creating the queue's tables if
//! they are missing; on PostgreSQL in the schema `queue_demo`) and leaves
//! its jobs' history there.

use std::process::ExitCode;
use std::time::Duration;

use queue::prelude::*;
use queue::{FinalStatus, HistoryRecord, JobId};
use serde_json::json;

const URL_VAR: &str = "QUEUE_DATABASE_URL";
const DEFAULT_URL: &str = "sqlite://queue-demo.db?mode=rwc";

#[tokio::main]
async fn main() -> ExitCode {
    let url = std::env::var(URL_VAR).unwrap_or_else(|_| DEFAULT_URL.into());
    match run(&url).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!(
                "quickstart: {error} (database {}; set {URL_VAR} to another one)",
                queue::redact_url(&url)
            );
            ExitCode::FAILURE
        }
    }
}

async fn run(url: &str) -> queue::Result<()> {
    let storage = queue::connect(url).await?;
    // On PostgreSQL the demo keeps to a schema of its own.
    let storage = match storage.backend() {
        "postgres" => storage.with_schema("queue_demo")?,
        _ => storage,
    };
    storage.migrate().await?;
    println!(
        "database: {} ({})",
        queue::redact_url(url),
        storage.backend()
    );

    // Jobs: three priorities, one delayed, one flaky, one hopeless.
    let mut ids: Vec<JobId> = Vec::new();
    for (name, priority) in [("low", -5), ("normal", 0), ("urgent", 10)] {
        let job = NewJob::new("emails", json!({ "kind": name })).priority(priority);
        ids.push(storage.enqueue(job).await?.id);
    }
    let delayed =
        NewJob::new("emails", json!({ "kind": "delayed 2s" })).delay(Duration::from_secs(2));
    ids.push(storage.enqueue(delayed).await?.id);
    let flaky = NewJob::new("flaky", json!({ "kind": "fails twice" })).max_attempts(5);
    ids.push(storage.enqueue(flaky).await?.id);
    let hopeless = NewJob::new("flaky", json!({ "kind": "always fails" })).max_attempts(3);
    ids.push(storage.enqueue(hopeless).await?.id);

    let retry_fast = QueueOptions {
        backoff: Backoff::new(
            Duration::from_millis(100),
            Duration::ZERO,
            Duration::from_secs(1),
            0.2,
        )?,
        ..QueueOptions::with_concurrency(2)
    };
    // The worker subscribes to the storage's wake-ups by itself (LISTEN/NOTIFY
    // on PostgreSQL, in-process signals on SQLite); elsewhere it polls.
    let worker = WorkerBuilder::new(storage.clone())
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

    println!("running:");
    let records = wait_for_history(&storage, &ids).await;
    worker.shutdown(Duration::from_secs(5)).await;

    println!("history:");
    for record in records? {
        let outcome = match record.status {
            FinalStatus::Completed => {
                format!("completed with {}", record.result.unwrap_or_default())
            }
            FinalStatus::DeadLetter => format!(
                "dead letter: {}",
                record.last_error.unwrap_or_default()["message"]
            ),
            FinalStatus::Discarded => "discarded".to_owned(),
            FinalStatus::Cancelled => "cancelled".to_owned(),
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

/// Waits (up to 30 s) until every job of `ids` is in history.
async fn wait_for_history(
    storage: &AnyStorage,
    ids: &[JobId],
) -> queue::Result<Vec<HistoryRecord>> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut records = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(record) = storage.get_history(*id).await? {
                records.push(record);
            }
        }
        if records.len() == ids.len() {
            return Ok(records);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(queue::QueueError::backend(format!(
                "only {} of {} jobs finished within 30 s",
                records.len(),
                ids.len()
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
