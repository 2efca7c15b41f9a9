//! `queue-bench portable`: this queue as an adapter of the public
//! cross-system benchmark, hardbyte/postgresql-job-queue-benchmarking
//! (its `CONTRIBUTING_ADAPTERS.md` is the contract).
//!
//! One long-running process on PostgreSQL, configured by the harness's
//! environment ([`config`]): it creates the database if missing, migrates
//! the schema through `PgStorage::migrate`, prints a descriptor line, then
//! produces jobs (a fixed rate or a depth target, through
//! `Storage::enqueue_batch`) and runs them on a `queue-worker` worker with
//! `WORKER_COUNT` slots whose handler sleeps `JOB_WORK_MS`. Every
//! `SAMPLE_EVERY_S`, on the wall clock's boundaries, it prints one JSON
//! line per metric: pickup latency percentiles over 30 s (from just before
//! the insert to the handler's start), enqueue and completion rates, queue
//! depth. SIGTERM or
//! SIGINT stops it with exit status 0 within 5 s. Standard output carries
//! only those lines; everything else goes to standard error.

mod completions;
mod config;
mod latency;
mod output;
mod pacing;
mod producer;

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use queue_core::{QueueName, Storage};
use queue_postgres::PgStorage;
use queue_worker::{JobContext, QueueOptions, WorkerBuilder};
use tokio::sync::watch;

use self::completions::CompletionRecorder;
use self::config::Config;
use self::latency::LatencyWindow;
use self::output::{Descriptor, emit, iso_millis, sample, wall_clock};
use self::pacing::next_boundary;
use self::producer::{Producer, load_rate};

/// The queue every replica produces to and consumes from.
pub(crate) const QUEUE: &str = "portable_bench";

/// The rolling window of the latency percentiles.
const LATENCY_WINDOW_S: u64 = 30;

/// Depth reads count at most this many jobs (a backlog beyond it reads as
/// this number, and a read never scans more).
const DEPTH_CAP: u64 = 1_000_000;

/// How often the queue depth is read for the `queue_depth` metric.
const DEPTH_EVERY: Duration = Duration::from_secs(1);

/// How often it is read when the producer keeps a depth target: as the
/// harness's awa adapter does (a read every 200 ms), so that the producer
/// is not the bottleneck of a throughput cell.
const DEPTH_EVERY_TARGET: Duration = Duration::from_millis(200);

/// How long startup keeps trying to reach the server and migrate.
const STARTUP_PATIENCE: Duration = Duration::from_secs(60);

/// The whole shutdown, SIGTERM to exit, stays within this (the contract
/// allows 5 s).
const SHUTDOWN_BUDGET: Duration = Duration::from_millis(4_000);

/// Counters and windows the tasks share.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Jobs whose enqueue committed.
    pub(crate) enqueued: AtomicU64,
    /// The last queue depth read (pending jobs of [`QUEUE`]).
    pub(crate) depth: Mutex<DepthRead>,
    /// The producer's current target rate, as `f64` bits.
    pub(crate) target_rate: AtomicU64,
    /// Pickup latencies.
    pub(crate) latency: Mutex<LatencyWindow>,
}

/// A depth read, and how many jobs had been enqueued when it began: the
/// producer adds the jobs enqueued since to the read, so a read that is up
/// to [`DEPTH_EVERY_TARGET`] old neither stalls nor overfills it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DepthRead {
    /// Pending jobs of [`QUEUE`].
    pub(crate) pending: u64,
    /// [`Shared::enqueued`] just before the read.
    pub(crate) enqueued_before: u64,
}

impl Shared {
    /// The last depth read.
    pub(crate) fn depth(&self) -> DepthRead {
        *self.depth.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether the stop signal has been given.
pub(crate) fn stopped(stop: &watch::Receiver<bool>) -> bool {
    *stop.borrow()
}

const USAGE: &str = "\
queue-bench portable: this queue as an adapter of the public benchmark
hardbyte/postgresql-job-queue-benchmarking (JSONL on standard output).

Usage: queue-bench portable

Configured by the environment the harness sets: DATABASE_URL (required),
SCENARIO (long_horizon), PRODUCER_MODE (fixed | depth-target),
PRODUCER_PACING (adapter | harness), PRODUCER_RATE, PRODUCER_BATCH_MAX,
PRODUCER_BATCH_MS, TARGET_DEPTH, WORKER_COUNT, JOB_PAYLOAD_BYTES,
JOB_WORK_MS, SAMPLE_EVERY_S, BENCH_INSTANCE_ID, PRODUCER_RATE_CONTROL_FILE;
and QUEUE_RS_SCHEMA (default queue_rs), QUEUE_RS_POOL (default 20).
See docs/benchmarks.md and bench/portable/queue-bench/README.md.";

/// Runs the adapter; `args` are the arguments after `portable`.
pub(crate) async fn main(args: &[String]) -> ExitCode {
    match args {
        [] => {}
        [flag] if flag == "--help" || flag == "-h" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!(
                "queue-bench portable: takes no arguments (it reads its environment; see --help)"
            );
            return ExitCode::from(2);
        }
    }
    let config = match Config::from_lookup(|name| std::env::var(name).ok()) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("queue-bench portable: {error}");
            return ExitCode::from(2);
        }
    };
    match run(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("queue-bench portable: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(config: Config) -> Result<(), String> {
    let started_at = wall_clock();
    let recorder = CompletionRecorder::default();
    metrics::set_global_recorder(recorder.clone())
        .map_err(|e| format!("cannot count completions: {e}"))?;
    let mut stop_signal = Box::pin(shutdown_signal()?);

    let storage = tokio::select! {
        storage = open(&config) => storage?,
        () = &mut stop_signal => return Ok(()),
    };
    let schema_version = queue_postgres::MIGRATIONS
        .last()
        .map_or(0, |migration| migration.version);
    let event_tables = output::event_tables(&config.schema);
    let event_indexes = event_indexes(&storage, &event_tables).await?;
    emit(
        &Descriptor {
            instance_id: config.instance_id,
            db_name: &config.db_name,
            event_tables: &event_tables,
            event_indexes: &event_indexes,
            schema_version,
            started_at,
        }
        .record(),
    );

    let queue = QueueName::new(QUEUE).map_err(|e| e.to_string())?;
    let shared = Arc::new(Shared {
        enqueued: AtomicU64::new(0),
        depth: Mutex::new(DepthRead::default()),
        target_rate: AtomicU64::new(config.producer_rate.to_bits()),
        latency: Mutex::new(LatencyWindow::new(LATENCY_WINDOW_S)),
    });
    let work = config.work;
    let seen = Arc::clone(&shared);
    let worker = WorkerBuilder::new(storage.clone())
        .queue(
            QUEUE,
            QueueOptions::with_concurrency(config.worker_count),
            move |ctx: JobContext| {
                record_pickup(&seen, ctx.payload());
                async move {
                    if !work.is_zero() {
                        tokio::time::sleep(work).await;
                    }
                    Ok(None)
                }
            },
        )
        .and_then(WorkerBuilder::start)
        .map_err(|e| format!("cannot start the worker: {e}"))?;

    let (stop_tx, stop_rx) = watch::channel(false);
    let mut producer = tokio::spawn(
        Producer::new(
            storage.clone(),
            queue.clone(),
            Arc::clone(&shared),
            config.clone(),
            stop_rx.clone(),
        )
        .run(),
    );
    let depth_every = match config.producer_mode {
        config::ProducerMode::Fixed => DEPTH_EVERY,
        config::ProducerMode::DepthTarget => DEPTH_EVERY_TARGET,
    };
    let depth = tokio::spawn(poll_depth(
        storage.clone(),
        queue,
        Arc::clone(&shared),
        depth_every,
        stop_rx.clone(),
    ));
    let mut sampler = tokio::spawn(sample_every(
        config.clone(),
        Arc::clone(&shared),
        recorder,
        stop_rx,
    ));

    // The producer and the sampler run until told to stop: one that ends
    // before (a panic) fails the run rather than leave a silent process.
    let early = tokio::select! {
        () = stop_signal => None,
        ended = &mut sampler => Some(format!("the sampler stopped: {ended:?}")),
        ended = &mut producer => Some(format!("the producer stopped: {ended:?}")),
    };
    if let Some(error) = early {
        let _ = stop_tx.send(true);
        let _ =
            tokio::time::timeout(SHUTDOWN_BUDGET, worker.shutdown(Duration::from_secs(1))).await;
        return Err(error);
    }
    eprintln!("queue-bench portable: stopping");
    let deadline = tokio::time::Instant::now() + SHUTDOWN_BUDGET;
    let _ = stop_tx.send(true);
    // The sampler stops at once (its lines are already flushed); the
    // producer after the insert in flight, if any; then the worker lets its
    // running jobs finish, hands back what it holds and sends its acks.
    let _ = tokio::time::timeout_at(deadline, async {
        let _ = sampler.await;
        let _ = depth.await;
        let _ = tokio::time::timeout(Duration::from_secs(1), producer).await;
        let report = worker.shutdown(Duration::from_millis(1_500)).await;
        eprintln!("queue-bench portable: worker stopped: {report:?}");
    })
    .await;
    Ok(())
}

/// Creates the database if missing, connects and migrates, retrying while
/// the server is unreachable (a replica restarted during an outage).
async fn open(config: &Config) -> Result<PgStorage, String> {
    let give_up = Instant::now() + STARTUP_PATIENCE;
    loop {
        match try_open(config).await {
            Ok(storage) => return Ok(storage),
            Err(error) if Instant::now() < give_up => {
                eprintln!("queue-bench portable: startup failed, retrying: {error}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(error) => return Err(error),
        }
    }
}

async fn try_open(config: &Config) -> Result<PgStorage, String> {
    queue_postgres::create_database_if_missing(&config.database_url)
        .await
        .map_err(|e| e.to_string())?;
    let pool = queue_postgres::pool_options()
        .max_connections(config.pool)
        .acquire_timeout(Duration::from_secs(5))
        .connect(&config.database_url)
        .await
        .map_err(|e| queue_postgres::interpret_error(e).to_string())?;
    let storage = PgStorage::from_pool(pool)
        .with_schema(&config.schema)
        .map_err(|e| e.to_string())?;
    storage.migrate().await.map_err(|e| e.to_string())?;
    Ok(storage)
}

/// The indexes of `tables` as they are in the database after migrating.
async fn event_indexes(storage: &PgStorage, tables: &[String]) -> Result<Vec<String>, String> {
    let names: Vec<&str> = tables
        .iter()
        .filter_map(|t| t.split_once('.').map(|(_, name)| name))
        .collect();
    sqlx::query_scalar(
        "SELECT schemaname || '.' || indexname FROM pg_indexes \
         WHERE schemaname = $1 AND tablename = ANY($2) ORDER BY tablename, indexname",
    )
    .bind(storage.schema())
    .bind(&names)
    .fetch_all(storage.pool())
    .await
    .map_err(|e| format!("cannot list the indexes: {e}"))
}

/// Records a job's pickup latency: the handler's start less the enqueue
/// time its payload carries (both this machine's wall clock).
fn record_pickup(shared: &Shared, payload: &serde_json::Value) {
    let Some(enq_us) = payload.get("enq_us").and_then(serde_json::Value::as_u64) else {
        return;
    };
    let now = wall_clock();
    let now_us = u64::try_from(now.as_micros()).unwrap_or(u64::MAX);
    shared
        .latency
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .record(now.as_secs(), now_us.saturating_sub(enq_us));
}

/// Reads the queue's pending count every `every`; a failed read (the
/// server away) leaves the last value.
async fn poll_depth(
    storage: PgStorage,
    queue: QueueName,
    shared: Arc<Shared>,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut failing = false;
    while !stopped(&stop) {
        let enqueued_before = shared.enqueued.load(Ordering::Relaxed);
        let read = tokio::time::timeout(DEPTH_EVERY * 2, storage.stats_capped(DEPTH_CAP)).await;
        match read {
            Ok(Ok(stats)) => {
                let pending = stats
                    .iter()
                    .find(|s| s.queue == queue)
                    .map_or(0, |s| s.pending);
                *shared.depth.lock().unwrap_or_else(PoisonError::into_inner) = DepthRead {
                    pending,
                    enqueued_before,
                };
                failing = false;
            }
            Ok(Err(error)) if !failing => {
                eprintln!("queue-bench portable: depth read failed: {error}");
                failing = true;
            }
            Err(_) if !failing => {
                eprintln!("queue-bench portable: depth read timed out");
                failing = true;
            }
            _ => {}
        }
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Prints the metrics at every wall-clock multiple of `SAMPLE_EVERY_S`.
/// Rates are over the real time since the previous tick (in ms), which
/// is their `window_s`. The latency
/// percentiles are left out of a tick when no job started in the last
/// 30 s, rather than reported as some made-up number.
async fn sample_every(
    config: Config,
    shared: Arc<Shared>,
    recorder: CompletionRecorder,
    mut stop: watch::Receiver<bool>,
) {
    let every = config.sample_every_s;
    let id = config.instance_id;
    let mut last_enqueued = shared.enqueued.load(Ordering::Relaxed);
    let mut last_completed = recorder.completed();
    let mut last = Instant::now();
    loop {
        let boundary = next_boundary(wall_clock(), every);
        let wait = boundary.saturating_sub(wall_clock());
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(last).as_secs_f64().max(0.001);
        let elapsed = (elapsed * 1_000.0).round().max(1.0) / 1_000.0;
        last = now;
        let enqueued = shared.enqueued.load(Ordering::Relaxed);
        let completed = recorder.completed();
        let enqueue_rate = enqueued.saturating_sub(last_enqueued) as f64 / elapsed;
        let completion_rate = completed.saturating_sub(last_completed) as f64 / elapsed;
        (last_enqueued, last_completed) = (enqueued, completed);
        let latency = shared
            .latency
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .percentiles(boundary.as_secs());
        let t = iso_millis(boundary);
        let window = LATENCY_WINDOW_S as f64;
        if let Some(p) = latency {
            for (metric, value) in [
                ("claim_p50_ms", p.p50_ms),
                ("claim_p95_ms", p.p95_ms),
                ("claim_p99_ms", p.p99_ms),
                ("subscriber_p50_ms", p.p50_ms),
                ("subscriber_p95_ms", p.p95_ms),
                ("subscriber_p99_ms", p.p99_ms),
            ] {
                emit(&sample(&t, id, metric, value, window));
            }
        }
        // The rates' window is the time they were counted over: the
        // harness integrates rate × window_s into job counts (jobs lost in
        // a chaos cell), exact only with the real interval. That is
        // SAMPLE_EVERY_S give or take a few ms, except at the first tick,
        // which counts from the start, part of a period.
        emit(&sample(&t, id, "enqueue_rate", enqueue_rate, elapsed));
        emit(&sample(&t, id, "completion_rate", completion_rate, elapsed));
        let depth = shared.depth().pending as f64;
        emit(&sample(&t, id, "queue_depth", depth, 0.0));
        let target = match config.producer_mode {
            config::ProducerMode::Fixed => load_rate(&shared.target_rate),
            config::ProducerMode::DepthTarget => 0.0,
        };
        emit(&sample(&t, id, "producer_target_rate", target, 0.0));
    }
}

/// Completes at SIGTERM or SIGINT.
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()>, String> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM: {e}"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| format!("SIGINT: {e}"))?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}
