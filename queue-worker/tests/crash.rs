//! A worker killed with SIGKILL mid-job: another worker reclaims its jobs
//! after the lease and completes them; none is lost, the killed attempts
//! are counted.
//!
//! The killed worker is this test binary run again as a child process for
//! the ignored test `crash_child`, told what to do by `QUEUE_CRASH_CHILD`.

mod common;

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use queue_core::{FinalStatus, NewJob, Storage};
use queue_mysql::MySqlStorage;
use queue_postgres::PgStorage;
use queue_testkit::harness::mysql::TestDatabase;
use queue_testkit::harness::postgres::TestSchema;
use queue_worker::{JobContext, QueueOptions, WorkerBuilder, WorkerOptions};
use serde_json::json;

const CHILD_ENV: &str = "QUEUE_CRASH_CHILD";
const JOBS: usize = 4;
const LEASE: Duration = Duration::from_secs(2);

fn options() -> QueueOptions {
    QueueOptions {
        lease: LEASE,
        ..QueueOptions::with_concurrency(JOBS)
    }
}

/// The child: serves the queue with a handler that never finishes, until killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by the crash tests"]
async fn crash_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split('\t').collect();
    let hang = |_ctx: JobContext| async move {
        std::future::pending::<()>().await;
        Ok(None)
    };
    match parts.as_slice() {
        ["postgres", url, schema] => {
            let storage = PgStorage::connect(url)
                .await
                .expect("connect")
                .with_schema(schema)
                .expect("schema");
            let _worker = WorkerBuilder::new(storage)
                .queue("crash", options(), hang)
                .expect("queue")
                .start()
                .expect("start");
            std::future::pending::<()>().await;
        }
        ["mysql", url] => {
            let storage = MySqlStorage::connect(url).expect("connect");
            let _worker = WorkerBuilder::new(storage)
                .queue("crash", options(), hang)
                .expect("queue")
                .start()
                .expect("start");
            std::future::pending::<()>().await;
        }
        _ => panic!("bad {CHILD_ENV}: {spec:?}"),
    }
}

fn spawn_child(spec: String) -> Child {
    Command::new(std::env::current_exe().expect("test binary"))
        .args(["crash_child", "--exact", "--ignored", "--nocapture"])
        .env(CHILD_ENV, spec)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the child worker")
}

async fn wait_for<F, Fut>(what: &str, limit: Duration, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let until = Instant::now() + limit;
    while !done().await {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Enqueue, let the child claim everything, kill it, recover with a second
/// worker, and check the outcome.
async fn kill_and_recover<S: Storage>(storage: Arc<S>, child_spec: String) {
    let ids: Vec<_> = storage
        .enqueue_batch(
            (0..JOBS)
                .map(|i| NewJob::new("crash", json!(i)).max_attempts(3))
                .collect(),
        )
        .await
        .expect("enqueue")
        .into_iter()
        .map(|o| o.id)
        .collect();
    let mut child = spawn_child(child_spec);
    wait_for(
        "the child to run every job",
        Duration::from_secs(60),
        || async {
            storage
                .stats()
                .await
                .expect("stats")
                .iter()
                .map(|s| s.running)
                .sum::<u64>()
                == JOBS as u64
        },
    )
    .await;

    child.kill().expect("SIGKILL the child");
    child.wait().expect("reap the child");
    let killed = Instant::now();

    let worker = WorkerBuilder::from_arc(Arc::clone(&storage))
        .options(WorkerOptions {
            reclaim_interval: Duration::from_millis(100),
            poll_interval: Duration::from_millis(50),
            ..WorkerOptions::default()
        })
        .queue("crash", options(), |ctx: JobContext| async move {
            Ok(Some(json!(ctx.attempt())))
        })
        .expect("queue")
        .start()
        .expect("start");
    wait_for(
        "the jobs to be recovered",
        Duration::from_secs(60),
        || async { common::live(&*storage).await == 0 },
    )
    .await;
    let recovered_after = killed.elapsed();
    worker.shutdown(Duration::from_secs(5)).await;

    for id in ids {
        let record = storage
            .get_history(id)
            .await
            .expect("history")
            .expect("not lost");
        assert_eq!(record.status, FinalStatus::Completed);
        assert_eq!(record.attempts, 2, "the killed attempt counts");
        assert_eq!(record.result, Some(json!(2)));
        assert_eq!(
            record.last_error.as_ref().map(|e| e["kind"].clone()),
            Some(json!("lease_expired"))
        );
    }
    // Not a benchmark: the lease (2 s) bounds it from below, reclaim and
    // polling add a little. Printed for the record.
    eprintln!("recovered {JOBS} jobs {recovered_after:?} after SIGKILL (lease {LEASE:?})");
    assert!(
        recovered_after >= Duration::from_millis(1500),
        "recovered before the lease could expire"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_killed_workers_jobs_are_reclaimed_and_completed() {
    let schema = TestSchema::create().await;
    let storage = PgStorage::from_pool(schema.pool().await)
        .with_schema(schema.name())
        .expect("schema");
    storage.migrate().await.expect("migrate");
    let spec = format!("postgres\t{}\t{}", schema.url(), schema.name());
    let storage = Arc::new(storage);
    kill_and_recover(Arc::clone(&storage), spec).await;
    storage.pool().close().await;
    schema.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_a_killed_workers_jobs_are_reclaimed_and_completed() {
    let db = TestDatabase::create().await;
    let storage = MySqlStorage::connect_with_size(&db.url(), 4).expect("pool");
    storage.migrate().await.expect("migrate");
    let spec = format!("mysql\t{}", db.url());
    kill_and_recover(Arc::new(storage), spec).await;
    db.drop_database().await;
}
