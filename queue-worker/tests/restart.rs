//! The database goes away mid-run and comes back: the worker logs, backs
//! off and resumes; no job is lost and none completes twice.
//!
//! Stopping a server is not something a test may do unasked: these tests
//! are `#[ignore]`d, so `cargo test` lists them as ignored, and run with
//! `--ignored` and the commands that stop and start the server:
//! `QUEUE_TEST_POSTGRES_STOP` / `QUEUE_TEST_POSTGRES_START` and
//! `QUEUE_TEST_MYSQL_STOP` / `QUEUE_TEST_MYSQL_START` (shell commands).
//! `scripts/test.sh` sets them for this machine's own servers and runs
//! them; run with `--ignored` but without the commands, they fail. The
//! crash test also needs `QUEUE_TEST_POSTGRES_CRASH`, a command that stops
//! the server without a checkpoint (`pg_ctl stop -m immediate`).
//! They live in a test binary of their own, so no other test shares the
//! outage.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use queue_core::{FinalStatus, JobId, NewJob, Storage};
use queue_mysql::MySqlStorage;
use queue_postgres::PgStorage;
use queue_testkit::harness::mysql::TestDatabase;
use queue_testkit::harness::postgres::TestSchema;
use queue_worker::{JobContext, QueueOptions, WorkerBuilder, WorkerOptions};
use serde_json::json;

const JOBS: usize = 300;
const OUTAGE: Duration = Duration::from_secs(3);

/// The stop and start commands in `prefix_STOP` / `prefix_START`.
///
/// # Panics
/// When either is unset: the test was asked to run without being told how
/// to stop the server.
fn commands(prefix: &str) -> (String, String) {
    (command(prefix, "STOP"), command(prefix, "START"))
}

/// The shell command in `prefix_suffix`.
///
/// # Panics
/// When it is unset.
fn command(prefix: &str, suffix: &str) -> String {
    let name = format!("{prefix}_{suffix}");
    std::env::var(&name).unwrap_or_else(|_| {
        panic!("{name} is not set: set {prefix}_STOP, {prefix}_START (and for the crash test {prefix}_CRASH, a stop without a checkpoint) to shell commands (scripts/test.sh does for local servers)")
    })
}

fn shell(command: &str) {
    let status = std::process::Command::new("sh")
        .args(["-c", command])
        .status()
        .expect("run the command");
    assert!(status.success(), "`{command}` failed: {status}");
}

async fn outage_mid_run<S: Storage>(storage: Arc<S>, stop: &str, start: &str) {
    for chunk in (0..JOBS).collect::<Vec<_>>().chunks(100) {
        let batch = chunk
            .iter()
            .map(|i| NewJob::new("steady", json!(i)))
            .collect();
        storage.enqueue_batch(batch).await.expect("enqueue");
    }
    // Runs per job: a claim undone by a crash shows as a second run.
    let runs: Arc<Mutex<HashMap<JobId, usize>>> = Arc::default();
    let counted = Arc::clone(&runs);
    let worker = WorkerBuilder::from_arc(Arc::clone(&storage))
        .options(WorkerOptions {
            poll_interval: Duration::from_millis(100),
            reclaim_interval: Duration::from_millis(500),
            ..WorkerOptions::default()
        })
        .queue(
            "steady",
            QueueOptions {
                lease: Duration::from_secs(5),
                ..QueueOptions::with_concurrency(4)
            },
            move |ctx: JobContext| {
                *counted
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .entry(ctx.job().id)
                    .or_default() += 1;
                async move {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Ok(Some(json!(ctx.attempt())))
                }
            },
        )
        .expect("queue")
        .start()
        .expect("start");

    // Let part of the work finish, then take the server away.
    let until = Instant::now() + Duration::from_secs(60);
    while common::all_history(&*storage).await.len() < JOBS / 5 {
        assert!(Instant::now() < until, "no progress before the outage");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shell(stop);
    tokio::time::sleep(OUTAGE).await;
    shell(start);
    let restarted = Instant::now();

    let until = Instant::now() + Duration::from_secs(120);
    loop {
        match storage.stats().await {
            Ok(stats) if stats.iter().map(|s| s.live()).sum::<u64>() == 0 => break,
            _ => {}
        }
        assert!(
            Instant::now() < until,
            "jobs left two minutes after the restart"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let drained_after = restarted.elapsed();
    worker.shutdown(Duration::from_secs(10)).await;

    let records = common::all_history(&*storage).await;
    assert_eq!(records.len(), JOBS, "every job archived exactly once");
    assert!(records.iter().all(|r| r.status == FinalStatus::Completed));
    let retried = records.iter().filter(|r| r.attempts > 1).count();
    let ran_again = runs
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .values()
        .filter(|n| **n > 1)
        .count();
    eprintln!(
        "{JOBS} jobs, {:?} outage: all completed once, {retried} on a second attempt, \
         {ran_again} run more than once, backlog drained {drained_after:?} after the restart",
        OUTAGE
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stops and starts the PostgreSQL server: scripts/test.sh runs it with QUEUE_TEST_POSTGRES_STOP/START"]
async fn postgres_restart_mid_run_loses_nothing() {
    let (stop, start) = commands("QUEUE_TEST_POSTGRES");
    let schema = TestSchema::create().await;
    let storage = PgStorage::from_pool(schema.pool().await)
        .with_schema(schema.name())
        .expect("schema");
    storage.migrate().await.expect("migrate");
    let storage = Arc::new(storage);
    outage_mid_run(Arc::clone(&storage), &stop, &start).await;
    storage.pool().close().await;
    schema.drop_schema().await;
}

/// With `with_async_claims(true)`, a crash (no checkpoint) may undo the
/// claims of its last fraction of a second: their jobs run again, and
/// still every job completes, once in history, nothing lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "crashes and starts the PostgreSQL server: scripts/test.sh runs it with QUEUE_TEST_POSTGRES_CRASH/START"]
async fn postgres_crash_mid_run_with_async_claims_loses_nothing() {
    let crash = command("QUEUE_TEST_POSTGRES", "CRASH");
    let start = command("QUEUE_TEST_POSTGRES", "START");
    let schema = TestSchema::create().await;
    let storage = PgStorage::from_pool(schema.pool().await)
        .with_schema(schema.name())
        .expect("schema")
        .with_async_claims(true);
    storage.migrate().await.expect("migrate");
    let storage = Arc::new(storage);
    outage_mid_run(Arc::clone(&storage), &crash, &start).await;
    storage.pool().close().await;
    schema.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stops and starts the MySQL server: scripts/test.sh runs it with QUEUE_TEST_MYSQL_STOP/START"]
async fn mysql_restart_mid_run_loses_nothing() {
    let (stop, start) = commands("QUEUE_TEST_MYSQL");
    let db = TestDatabase::create().await;
    let storage = MySqlStorage::connect_with_size(&db.url(), 4).expect("pool");
    storage.migrate().await.expect("migrate");
    outage_mid_run(Arc::new(storage), &stop, &start).await;
    db.drop_database().await;
}
