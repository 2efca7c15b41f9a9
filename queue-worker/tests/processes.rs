//! Flow control, periodic schedules and cancel across real worker
//! processes on PostgreSQL and MariaDB / MySQL: three OS processes (this
//! test binary re-run as `worker_process`, ignored unless a parent starts
//! it) serve one schema or database while the parent drives and samples.
//!
//! - a queue limited to 5: a sampler never sees more than 5 leases held;
//! - 50 jobs/s with a burst of 10 for 10 s: 510 +-10% jobs start, and no
//!   one-second window starts more than 60;
//! - a per-second cron on all three for about 10 s: one job per fire time;
//! - cancel of a running job: its handler sees the token fire within
//!   100 ms on PostgreSQL (NOTIFY), within a heartbeat on MySQL.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Utc};
use queue_core::{
    FinalStatus, HistoryFilter, JobFilter, MAX_PAGE_SIZE, NewJob, QueueLimits, QueueName,
    RateLimit, Storage,
};
use queue_mysql::MySqlStorage;
use queue_postgres::PgStorage;
use queue_testkit::harness::mysql::TestDatabase;
use queue_testkit::harness::postgres::TestSchema;
use queue_worker::{JobContext, Periodic, QueueOptions, WorkerBuilder, WorkerOptions};
use serde_json::json;

const PROCESSES: usize = 3;
/// A lease short enough that MySQL's heartbeat (lease / 3) tells of a
/// cancel within a second.
const LEASE: Duration = Duration::from_millis(2_400);

fn micros_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// The child: a worker on the parent's schema or database, serving every
/// queue of the checks, until its standard input closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a worker process started by the tests below"]
async fn worker_process() {
    let backend = std::env::var("FLOW_BACKEND").expect("started by a parent test");
    let url = std::env::var("FLOW_URL").expect("started by a parent test");
    match backend.as_str() {
        "postgres" => {
            let schema = std::env::var("FLOW_SCHEMA").expect("schema");
            let storage = PgStorage::connect(&url)
                .await
                .expect("connect")
                .with_schema(&schema)
                .expect("schema");
            serve(storage).await;
        }
        _ => serve(MySqlStorage::connect_with_size(&url, 8).expect("pool")).await,
    }
}

async fn serve<S: Storage>(storage: S) {
    let options = QueueOptions {
        lease: LEASE,
        ..QueueOptions::with_concurrency(8)
    };
    let tick = Periodic::new("tick", "* * * * * *", |at| {
        NewJob::new("ticks", json!({ "at": at }))
    })
    .expect("schedule");
    let worker = WorkerBuilder::new(storage)
        .options(WorkerOptions {
            poll_interval: Duration::from_millis(50),
            ..WorkerOptions::default()
        })
        .queue("limited", options.clone(), |_ctx: JobContext| async {
            tokio::time::sleep(Duration::from_millis(30)).await;
            Ok(None)
        })
        .expect("queue")
        .queue("rated", options.clone(), |_ctx: JobContext| async {
            Ok(None)
        })
        .expect("queue")
        .queue("ticks", options.clone(), |_ctx: JobContext| async {
            Ok(None)
        })
        .expect("queue")
        .queue("cancel", options, |ctx: JobContext| async move {
            ctx.cancellation().cancelled().await;
            println!("\nflow-cancelled {} {}", ctx.job().id, micros_now());
            Ok(None)
        })
        .expect("queue")
        .periodic(tick)
        .expect("periodic")
        .start()
        .expect("start");
    // On its own line: libtest prints its own "test ... " prefix first.
    println!("\nflow-worker-ready");
    // Until the parent closes our standard input.
    tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {
            line.clear();
        }
    })
    .await
    .expect("stdin reader");
    worker.shutdown(Duration::from_secs(5)).await;
}

struct Workers {
    children: Vec<Child>,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Workers {
    fn start(env: &[(&str, String)]) -> Self {
        let (send, lines) = std::sync::mpsc::channel();
        let mut children = Vec::new();
        for _ in 0..PROCESSES {
            let mut command = Command::new(std::env::current_exe().expect("the test binary"));
            command
                .args([
                    "--ignored",
                    "--exact",
                    "worker_process",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped());
            for (key, value) in env {
                command.env(key, value);
            }
            let mut child = command.spawn().expect("a worker process");
            let stdout = child.stdout.take().expect("stdout");
            let send = send.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    let _ = send.send(line);
                }
            });
            children.push(child);
        }
        let workers = Self { children, lines };
        let mut ready = 0;
        while ready < PROCESSES {
            let line = workers
                .lines
                .recv_timeout(Duration::from_secs(60))
                .expect("every worker process says ready");
            ready += usize::from(line.trim() == "flow-worker-ready");
        }
        workers
    }

    /// The first `flow-cancelled <id> <micros>` line within `wait`.
    fn cancelled(&self, wait: Duration) -> Option<(i64, i64)> {
        let until = Instant::now() + wait;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            let Ok(line) = self.lines.recv_timeout(left) else {
                return None;
            };
            let mut parts = line.split_whitespace();
            if parts.next() == Some("flow-cancelled") {
                let id = parts.next()?.parse().ok()?;
                let at = parts.next()?.parse().ok()?;
                return Some((id, at));
            }
        }
        None
    }

    fn stop(mut self) {
        for child in &mut self.children {
            drop(child.stdin.take());
        }
        for child in &mut self.children {
            let status = child.wait().expect("a worker process exits");
            assert!(status.success(), "a worker process failed: {status}");
        }
    }
}

fn queue(name: &str) -> QueueName {
    QueueName::new(name).expect("valid name")
}

async fn history_of<S: Storage>(storage: &S, queue_name: &str) -> Vec<queue_core::HistoryRecord> {
    let mut filter = HistoryFilter {
        queue: Some(queue(queue_name)),
        limit: MAX_PAGE_SIZE,
        ..HistoryFilter::default()
    };
    let mut records = Vec::new();
    loop {
        let page = storage.list_history(&filter).await.expect("history");
        records.extend(page.records);
        match page.next {
            Some(next) => filter.before = Some(next),
            None => return records,
        }
    }
}

async fn checks<S: Storage>(storage: Arc<S>, env: &[(&str, String)], cancel_bound: Duration) {
    let five = QueueLimits {
        concurrency: Some(5),
        ..QueueLimits::default()
    };
    storage
        .configure_queue(&queue("limited"), &five)
        .await
        .expect("limit");
    let rate = QueueLimits {
        rate: Some(RateLimit {
            per_second: 50.0,
            burst: 10,
        }),
        ..QueueLimits::default()
    };
    storage
        .configure_queue(&queue("rated"), &rate)
        .await
        .expect("rate");
    let workers = Workers::start(env);

    // The concurrency limit, sampled while 300 jobs of 30 ms drain.
    let jobs = (0..300)
        .map(|i| NewJob::new("limited", json!({ "i": i })))
        .collect();
    storage.enqueue_batch(jobs).await.expect("enqueue");
    let mut most = 0;
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let stats = storage.stats().await.expect("stats");
        let limited = stats.iter().find(|s| s.queue == queue("limited"));
        let held = limited.map_or(0, |s| s.running + s.stalled);
        most = most.max(held);
        assert!(held <= 5, "{held} leases held in a queue limited to 5");
        if limited.is_none_or(|s| s.live() == 0) {
            break;
        }
        assert!(
            Instant::now() < until,
            "the limited queue did not drain in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        most >= 3,
        "the sampler never saw the limit approached ({most})"
    );

    // The rate limit: 1,000 jobs waiting, 10 s of starts.
    let jobs = (0..1_000)
        .map(|i| NewJob::new("rated", json!({ "i": i })))
        .collect();
    storage.enqueue_batch(jobs).await.expect("enqueue");
    tokio::time::sleep(Duration::from_secs(11)).await;
    let mut starts: Vec<DateTime<Utc>> = history_of(&*storage, "rated")
        .await
        .iter()
        .filter_map(|r| r.started_at)
        .collect();
    starts.sort();
    let first = *starts.first().expect("some rated job ran");
    let window = chrono::TimeDelta::seconds(10);
    let in_ten = starts.iter().filter(|at| **at < first + window).count();
    assert!(
        (459..=561).contains(&in_ten),
        "{in_ten} jobs started in the first 10 s, not 510 +-10%"
    );
    let mut busiest = 0;
    for (i, at) in starts.iter().enumerate() {
        let end = *at + chrono::TimeDelta::seconds(1);
        busiest = busiest.max(starts[i..].iter().take_while(|s| **s < end).count());
    }
    assert!(busiest <= 60, "{busiest} jobs started within one second");

    // The per-second cron has been firing on all three since they started.
    let mut fires: Vec<String> = history_of(&*storage, "ticks")
        .await
        .iter()
        .map(|r| r.payload["at"].as_str().expect("fire time").to_owned())
        .collect();
    let live = storage
        .list_jobs(&JobFilter {
            queue: Some(queue("ticks")),
            limit: MAX_PAGE_SIZE,
            ..JobFilter::default()
        })
        .await
        .expect("jobs");
    fires.extend(
        live.jobs
            .iter()
            .map(|j| j.payload["at"].as_str().expect("fire time").to_owned()),
    );
    let distinct: HashSet<&String> = fires.iter().collect();
    assert_eq!(distinct.len(), fires.len(), "a fire time enqueued twice");
    assert!(fires.len() >= 10, "only {} fires in over 10 s", fires.len());

    // Cancel of a running job.
    let id = storage
        .enqueue(NewJob::new("cancel", json!({})))
        .await
        .expect("enqueue")
        .id;
    let until = Instant::now() + Duration::from_secs(20);
    while storage
        .get_job(id)
        .await
        .expect("job")
        .and_then(|j| j.lease_until)
        .is_none()
    {
        assert!(Instant::now() < until, "the cancel job never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let asked = micros_now();
    storage.cancel(id).await.expect("cancel");
    let (heard_id, heard_at) = workers
        .cancelled(Duration::from_secs(10))
        .expect("the handler saw its token fire");
    assert_eq!(heard_id, id.get());
    let took = Duration::from_micros(u64::try_from(heard_at - asked).unwrap_or(0));
    assert!(
        took <= cancel_bound,
        "the token fired {took:?} after the cancel (bound {cancel_bound:?})"
    );
    workers.stop();
    let record = storage
        .get_history(id)
        .await
        .expect("history")
        .expect("archived");
    assert_eq!(
        record.status,
        FinalStatus::Cancelled,
        "the holder's late ack changed nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_postgres_processes_honour_limits_cron_and_cancel() {
    let schema = TestSchema::create().await;
    let storage = PgStorage::from_pool(schema.pool().await)
        .with_schema(schema.name())
        .expect("schema");
    storage.migrate().await.expect("migrate");
    let env = [
        ("FLOW_BACKEND", "postgres".to_owned()),
        ("FLOW_URL", schema.url().to_owned()),
        ("FLOW_SCHEMA", schema.name().to_owned()),
    ];
    let storage = Arc::new(storage);
    checks(Arc::clone(&storage), &env, Duration::from_millis(100)).await;
    storage.pool().close().await;
    schema.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_mysql_processes_honour_limits_cron_and_cancel() {
    let db = TestDatabase::create().await;
    let storage = MySqlStorage::connect_with_size(&db.url(), 8).expect("pool");
    storage.migrate().await.expect("migrate");
    let env = [("FLOW_BACKEND", "mysql".to_owned()), ("FLOW_URL", db.url())];
    // A heartbeat every lease / 3, and the round trip and poll around it.
    checks(
        Arc::new(storage),
        &env,
        LEASE / 3 + Duration::from_millis(300),
    )
    .await;
    db.drop_database().await;
}
