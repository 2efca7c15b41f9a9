//! Several OS processes on one database file: this binary runs the checks
//! and re-executes itself (with `QUEUE_SQLITE_ROLE` set) as the workers.

use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::process::{Command, Stdio};
use std::time::Duration;

use queue_core::{Ack, DequeueRequest, NewJob, QueueError, QueueName, Storage, WorkerId};
use queue_sqlite::SqliteStorage;
use serde_json::json;

const ROLE: &str = "QUEUE_SQLITE_ROLE";
const DB: &str = "QUEUE_SQLITE_DB";
const JOBS: usize = 10_000;
const PROCESSES: usize = 4;

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let role = std::env::var(ROLE).unwrap_or_default();
    let db = std::env::var(DB).unwrap_or_default();
    match role.as_str() {
        "" => run_tests(&runtime),
        "holder" => runtime.block_on(holder(&db)),
        worker => runtime.block_on(drain(&db, worker)),
    }
}

/// A check of this file: its name and its body.
type Check = (&'static str, fn() -> Pin<Box<dyn Future<Output = ()>>>);

/// Runs the checks the arguments select (libtest's name filters; with
/// `--ignored` none, as none is ignored), each caught on its own, and
/// prints libtest's lines with the real counts; exits 101 if one failed.
fn run_tests(runtime: &tokio::runtime::Runtime) {
    let checks: [Check; 2] = [
        ("four_processes_complete_every_job_exactly_once", || {
            Box::pin(four_processes_complete_every_job_exactly_once())
        }),
        ("a_holder_paused_past_its_lease_cannot_ack", || {
            Box::pin(a_holder_paused_past_its_lease_cannot_ack())
        }),
    ];
    let args: Vec<String> = std::env::args().skip(1).collect();
    let only_ignored = args.iter().any(|a| a == "--ignored");
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let selected: Vec<&Check> = checks
        .iter()
        .filter(|(name, _)| {
            !only_ignored
                && (filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())))
        })
        .collect();
    println!("\nrunning {} tests", selected.len());
    let (mut passed, mut failed) = (0, Vec::new());
    for (name, check) in &selected {
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| runtime.block_on(check())));
        if outcome.is_ok() {
            println!("test {name} ... ok");
            passed += 1;
        } else {
            println!("test {name} ... FAILED");
            failed.push(*name);
        }
    }
    let summary = summary(passed, failed.len(), checks.len() - selected.len());
    println!("\n{summary}");
    if !failed.is_empty() {
        println!("failures: {}", failed.join(", "));
        std::process::exit(101);
    }
}

/// libtest's closing line for these counts.
fn summary(passed: usize, failed: usize, filtered_out: usize) -> String {
    let result = if failed == 0 { "ok" } else { "FAILED" };
    format!(
        "test result: {result}. {passed} passed; {failed} failed; 0 ignored; 0 measured; {filtered_out} filtered out"
    )
}

fn url(path: &str) -> String {
    format!("sqlite://{path}?mode=rwc")
}

fn request(worker: &str, limit: u32, lease: Duration) -> DequeueRequest {
    DequeueRequest::new(
        vec![QueueName::new("work").expect("valid")],
        limit,
        lease,
        WorkerId::new(worker).expect("valid"),
    )
    .expect("valid request")
}

fn spawn(role: &str, db: &str) -> std::process::Child {
    Command::new(std::env::current_exe().expect("own path"))
        .env(ROLE, role)
        .env(DB, db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn a worker process")
}

/// A worker process: claims and acks until the queue is empty. Any error,
/// a busy one included, fails the process.
async fn drain(db: &str, worker: &str) {
    let storage = SqliteStorage::connect(&url(db)).await.expect("connect");
    let request = request(worker, 50, Duration::from_secs(60));
    loop {
        let jobs = storage.dequeue(&request).await.expect("dequeue");
        if jobs.is_empty() {
            break;
        }
        let acks: Vec<Ack> = jobs
            .iter()
            .map(|job| Ack {
                lease: job.lease().expect("claimed"),
                result: Some(json!({"by": worker})),
            })
            .collect();
        let acked = storage.ack_batch(&acks).await.expect("ack");
        assert!(acked.iter().all(|a| *a), "a live lease was lost");
    }
}

async fn four_processes_complete_every_job_exactly_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("shared.db").display().to_string();
    let storage = SqliteStorage::connect(&url(&db)).await.expect("connect");
    for chunk in (0..JOBS).collect::<Vec<_>>().chunks(1_000) {
        let jobs = chunk
            .iter()
            .map(|n| NewJob::new("work", json!({"n": n})))
            .collect();
        storage.enqueue_batch(jobs).await.expect("enqueue");
    }
    let children: Vec<_> = (0..PROCESSES)
        .map(|n| spawn(&format!("w{n}"), &db))
        .collect();
    for child in children {
        let output = child.wait_with_output().expect("wait");
        assert!(
            output.status.success(),
            "a worker process failed: {:?}",
            output.status
        );
    }
    let counts: (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT id), (SELECT count(*) FROM job_queue) FROM job_history \
         WHERE status_final = 'completed'",
    )
    .fetch_one(storage.pool())
    .await
    .expect("count");
    assert_eq!(
        counts,
        (JOBS as i64, JOBS as i64, 0),
        "(history, distinct ids, live)"
    );
    let workers: i64 = sqlx::query_scalar("SELECT count(DISTINCT processed_by) FROM job_history")
        .fetch_one(storage.pool())
        .await
        .expect("workers");
    assert!(workers >= 2, "only {workers} process(es) did any work");
}

/// The holder process: claims the one job with a short lease, says so,
/// waits to be told to go on (past its lease), then must get `LeaseLost`.
async fn holder(db: &str) {
    let storage = SqliteStorage::connect(&url(db)).await.expect("connect");
    let mut jobs = storage
        .dequeue(&request("holder", 1, Duration::from_millis(200)))
        .await
        .expect("dequeue");
    let job = jobs.pop().expect("the holder claims the job");
    println!("claimed");
    std::io::stdout().flush().expect("flush");
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .expect("wait for the go");
    let lease = job.lease().expect("claimed");
    match storage.ack(&lease, None).await {
        Err(QueueError::LeaseLost { .. }) => {}
        other => panic!("a stale holder's ack must be LeaseLost, got {other:?}"),
    }
}

async fn a_holder_paused_past_its_lease_cannot_ack() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("lease.db").display().to_string();
    let storage = SqliteStorage::connect(&url(&db)).await.expect("connect");
    let id = storage
        .enqueue(NewJob::new("work", json!({})))
        .await
        .expect("enqueue")
        .id;
    let mut child = spawn("holder", &db);
    let mut said = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut said)
        .expect("read");
    assert_eq!(said.trim(), "claimed");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        storage.reclaim_stalled(10).await.expect("reclaim").requeued,
        1
    );
    let taken = storage
        .dequeue(&request("successor", 1, Duration::from_secs(60)))
        .await
        .expect("dequeue");
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].id, id);
    writeln!(child.stdin.take().expect("stdin")).expect("go");
    assert!(
        child.wait().expect("wait").success(),
        "the holder's ack was not refused"
    );
    let live = storage.get_job(id).await.expect("get").expect("still live");
    assert_eq!(
        live.locked_by.map(|w| w.into_string()),
        Some("successor".to_owned())
    );
}
