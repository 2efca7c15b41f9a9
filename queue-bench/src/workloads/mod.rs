//! The workloads, and what they share: filling a queue, counting handler
//! starts, the worker's settings.

mod backlog;
mod drain;
mod enqueue;
mod fairness;
pub(crate) mod hosts;
mod inspect;
mod latency;
mod ops;
mod pressure;
mod scheduled;
mod server_settings;
mod soak;
mod workflow;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use queue_core::{JobId, NewJob};
use queue_worker::{QueueOptions, WorkerOptions};
use serde_json::json;
use tokio::sync::Notify;

use crate::BenchError;
use crate::args::{
    Autovacuum, BacklogArgs, DrainArgs, EnqueueArgs, FairnessArgs, InspectArgs, LatencyArgs,
    OpsArgs, ScheduledArgs, SoakArgs, WorkflowArgs, Workload,
};
use crate::report::Report;
use crate::target::{Setup, Target};

/// The queue every workload measures.
pub(crate) const QUEUE: &str = "bench";

/// Runs `workload`, pushing its rows to `report`.
pub(crate) async fn run<T: Target>(
    workload: &Workload,
    setup: &Setup,
    report: &mut Report,
) -> Result<(), BenchError> {
    match workload {
        Workload::Enqueue(args) => enqueue::run::<T>(args, setup, report).await,
        Workload::Drain(args) => drain::run::<T>(args, setup, report).await,
        Workload::Latency(args) => latency::run::<T>(args, setup, report).await,
        Workload::Scheduled(args) => scheduled::run::<T>(args, setup, report).await,
        Workload::Backlog(args) => backlog::run::<T>(args, setup, report).await,
        Workload::Ops(args) => ops::run::<T>(args, setup, report).await,
        Workload::Inspect(args) => inspect::run::<T>(args, setup, report).await,
        Workload::Soak(args) => soak::run::<T>(args, setup, report).await,
        Workload::Fairness(args) => fairness::run::<T>(args, setup, report).await,
        Workload::Hosts(args) => hosts::run::<T>(args, setup, report).await,
        Workload::Workflow(args) => workflow::run::<T>(args, setup, report).await,
        Workload::Smoke => smoke::<T>(setup, report).await,
    }
}

/// Every workload at a size that runs in seconds.
async fn smoke<T: Target>(setup: &Setup, report: &mut Report) -> Result<(), BenchError> {
    let enqueue_args = EnqueueArgs {
        n: 500,
        batch: 100,
        single_n: 100,
        producers: 4,
    };
    enqueue::run::<T>(&enqueue_args, setup, report).await?;
    let drain_args = DrainArgs {
        n: 300,
        concurrency: vec![1, 8],
        queue_limit: Some(64),
        // Where the backend can write history in bulk: rows past the
        // retention, so the worker prunes during the drain.
        history: if T::NAME == "postgres" { 1_000 } else { 0 },
        history_age_days: 8,
    };
    drain::run::<T>(&drain_args, setup, report).await?;
    let latency_args = LatencyArgs {
        count: 20,
        interval_ms: 2,
    };
    latency::run::<T>(&latency_args, setup, report).await?;
    let scheduled_args = ScheduledArgs {
        count: 20,
        spread_ms: 200,
        backlog: 2_000,
        idle_claims: 5,
    };
    scheduled::run::<T>(&scheduled_args, setup, report).await?;
    let backlog_args = BacklogArgs {
        n: 200,
        backlog: 2_000,
        concurrency: 4,
    };
    backlog::run::<T>(&backlog_args, setup, report).await?;
    ops::run::<T>(&OpsArgs { n: 20 }, setup, report).await?;
    let inspect_args = InspectArgs {
        live: 400,
        history: 200,
        rounds: 2,
    };
    inspect::run::<T>(&inspect_args, setup, report).await?;
    // A few seconds, a sample a second; the shared server's autovacuum
    // setting is left alone.
    let soak_args = SoakArgs {
        rate: Some(200),
        duration: Duration::from_secs(3),
        sample: Duration::from_secs(1),
        concurrency: 4,
        retention: Duration::from_secs(1),
        prune_interval: Duration::from_secs(1),
        autovacuum: Autovacuum::Keep,
        autovacuum_naptime: None,
        queue_table_options: None,
        history_table_options: None,
        idle_in_tx: None,
        readers: 0,
        readers_window: None,
    };
    soak::run::<T>(&soak_args, setup, report).await?;
    let groups = T::fresh(setup)
        .await?
        .capabilities()
        .supports(queue_core::Capability::GroupLimits);
    if groups {
        let fairness_args = FairnessArgs {
            n: 400,
            keys: 20,
            group_concurrency: 1,
            concurrency: 8,
            backlog: 500,
            probes: 10,
            interval_ms: 5,
        };
        fairness::run::<T>(&fairness_args, setup, report).await?;
    }
    let dependencies = T::fresh(setup)
        .await?
        .capabilities()
        .supports(queue_core::Capability::Dependencies);
    if dependencies {
        let workflow_args = WorkflowArgs {
            n: 200,
            concurrency: 8,
            rounds: 1,
        };
        workflow::run::<T>(&workflow_args, setup, report).await?;
    }
    Ok(())
}

/// The worker's settings in every workload: the library's defaults.
pub(crate) fn worker_options(setup: &Setup) -> WorkerOptions {
    let defaults = WorkerOptions::default();
    WorkerOptions {
        subscribe: setup.notify,
        completion_batch: setup.completion_batch.unwrap_or(defaults.completion_batch),
        sample_interval: defaults.sample_interval.filter(|_| setup.samples),
        ..defaults
    }
}

/// A queue's settings: `concurrency` slots, the run's prefetch, defaults
/// otherwise.
pub(crate) fn queue_options(setup: &Setup, concurrency: usize) -> QueueOptions {
    QueueOptions {
        prefetch: setup.prefetch,
        ..QueueOptions::with_concurrency(concurrency)
    }
}

/// The settings printed before the results.
pub(crate) fn settings<T: Target>(setup: &Setup) -> Vec<(&'static str, String)> {
    let options = worker_options(setup);
    let mut settings = vec![
        ("pool", setup.pool.to_string()),
        ("prefetch", setup.prefetch.to_string()),
        (
            "notify",
            if T::notifies(setup) { "on" } else { "off" }.to_owned(),
        ),
        (
            "poll_interval_ms",
            options.poll_interval.as_millis().to_string(),
        ),
        ("completion_batch", options.completion_batch.to_string()),
        (
            "samples",
            if options.sample_interval.is_some() {
                "on"
            } else {
                "off"
            }
            .to_owned(),
        ),
        (
            "completion_delay_ms",
            options.completion_delay.as_millis().to_string(),
        ),
        (
            "build",
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            }
            .to_owned(),
        ),
    ];
    if !setup.keyless_indexed {
        settings.push(("keyless_jobs", "unindexed".to_owned()));
    }
    if setup.async_claims {
        settings.push(("claims", "async".to_owned()));
    }
    if setup.transaction_pooling {
        settings.push(("pooling", "transaction".to_owned()));
    }
    if setup.listen_url.is_some() {
        settings.push(("listen", "direct".to_owned()));
    }
    settings
}

/// Enqueues `n` no-op jobs into `queue` at `priority`, in batches of
/// `batch` from `producers` concurrent tasks.
pub(crate) async fn fill<T: Target>(
    storage: &T,
    queue: &str,
    n: usize,
    priority: i32,
    batch: usize,
    producers: usize,
) -> Result<(), BenchError> {
    fill_with(storage, queue, n, priority, None, batch, producers).await
}

/// [`fill`], the jobs due `delay` after their batch is enqueued when given.
pub(crate) async fn fill_with<T: Target>(
    storage: &T,
    queue: &str,
    n: usize,
    priority: i32,
    delay: Option<Duration>,
    batch: usize,
    producers: usize,
) -> Result<(), BenchError> {
    let batch = batch.max(1);
    let chunks: Vec<(usize, usize)> = (0..n)
        .step_by(batch)
        .map(|start| (start, (start + batch).min(n)))
        .collect();
    let next = Arc::new(AtomicUsize::new(0));
    let chunks = Arc::new(chunks);
    let mut tasks = Vec::new();
    for _ in 0..producers.max(1) {
        let (storage, next, chunks, queue) = (
            storage.clone(),
            Arc::clone(&next),
            Arc::clone(&chunks),
            queue.to_owned(),
        );
        tasks.push(tokio::spawn(async move {
            while let Some(&(start, end)) = chunks.get(next.fetch_add(1, Ordering::Relaxed)) {
                let jobs = (start..end)
                    .map(|i| {
                        let job = NewJob::new(queue.as_str(), json!({ "i": i })).priority(priority);
                        match delay {
                            Some(delay) => job.delay(delay),
                            None => job,
                        }
                    })
                    .collect();
                storage.enqueue_batch(jobs).await?;
            }
            Ok::<(), BenchError>(())
        }));
    }
    for task in tasks {
        task.await.map_err(|e| BenchError::from(e.to_string()))??;
    }
    Ok(())
}

/// Counts the first start of each measured job, and when the last one came.
#[derive(Debug)]
pub(crate) struct Progress {
    expected: usize,
    state: Mutex<ProgressState>,
    done: Notify,
}

#[derive(Debug, Default)]
struct ProgressState {
    first_start: Option<Instant>,
    seen: HashSet<JobId>,
    runs: usize,
}

impl Progress {
    pub(crate) fn new(expected: usize) -> Arc<Self> {
        Arc::new(Self {
            expected,
            state: Mutex::new(ProgressState::default()),
            done: Notify::new(),
        })
    }

    /// A handler started job `id`.
    pub(crate) fn started(&self, id: JobId) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.first_start.get_or_insert_with(Instant::now);
        state.runs += 1;
        state.seen.insert(id);
        if state.seen.len() == self.expected {
            self.done.notify_one();
        }
    }

    /// Waits until every expected job started once, for at most `limit`.
    pub(crate) async fn all_started(&self, limit: Duration) -> Result<Instant, BenchError> {
        let deadline = Instant::now() + limit;
        loop {
            let notified = self.done.notified();
            {
                let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                if state.seen.len() >= self.expected {
                    return state.first_start.ok_or_else(|| "no job started".into());
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || tokio::time::timeout(left, notified).await.is_err() {
                let started = self.distinct();
                return Err(format!(
                    "only {started} of {} jobs started within {limit:?}",
                    self.expected
                )
                .into());
            }
        }
    }

    /// Distinct jobs started.
    pub(crate) fn distinct(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .seen
            .len()
    }

    /// Handler runs, repeats included.
    pub(crate) fn runs(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .runs
    }
}

/// A generous limit for `n` jobs at no less than `floor_per_s` jobs/s.
pub(crate) fn time_limit(n: usize, floor_per_s: usize) -> Duration {
    Duration::from_secs(30 + (n / floor_per_s.max(1)) as u64)
}
