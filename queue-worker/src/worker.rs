//! Building, starting and stopping a worker.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queue_core::{
    Capability, EnqueueOutcome, NewJob, QueueError, QueueName, Result, Storage, WorkerId,
};
use tokio::sync::{Notify, Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::{QueueOptions, WorkerOptions};
use crate::handler::Handler;
use crate::periodic::{Periodic, ScheduleInfo};
use crate::shared::{QueueSlot, Shared};
use crate::{complete, dispatch, heartbeat, maintenance, periodic, registry, settings, wakeups};

/// Configures a worker over any `Storage`.
pub struct WorkerBuilder<S> {
    storage: Arc<S>,
    worker_id: Option<WorkerId>,
    options: WorkerOptions,
    queues: Vec<QueueSlot>,
    schedules: Vec<Periodic>,
}

impl<S: Storage> WorkerBuilder<S> {
    /// A worker over `storage` with default options and no queues yet.
    pub fn new(storage: S) -> Self {
        Self::from_arc(Arc::new(storage))
    }

    /// As [`WorkerBuilder::new`], sharing a storage the caller keeps using.
    pub fn from_arc(storage: Arc<S>) -> Self {
        Self {
            storage,
            worker_id: None,
            options: WorkerOptions::default(),
            queues: Vec::new(),
            schedules: Vec::new(),
        }
    }

    /// The id this worker's leases carry (default: host, pid and a random suffix).
    pub fn worker_id(mut self, id: WorkerId) -> Self {
        self.worker_id = Some(id);
        self
    }

    /// Worker-wide timings.
    pub fn options(mut self, options: WorkerOptions) -> Self {
        self.options = options;
        self
    }

    /// Serves `queue` with `handler`.
    ///
    /// # Errors
    /// An invalid queue name or option, or a queue named twice.
    pub fn queue(
        mut self,
        queue: &str,
        options: QueueOptions,
        handler: impl Handler,
    ) -> Result<Self> {
        let name = QueueName::new(queue)?;
        options.validate()?;
        if self.queues.iter().any(|q| q.name == name) {
            return Err(QueueError::invalid(
                "queue",
                format!("{name} is served twice"),
            ));
        }
        self.queues.push(QueueSlot {
            name,
            slots: Arc::new(Semaphore::new(options.concurrency)),
            waiting: Arc::default(),
            options,
            handler: Arc::new(handler),
        });
        Ok(self)
    }

    /// Runs `periodic`'s fires: this worker offers each fire time to the
    /// storage, which enqueues it once whichever worker offers it first.
    /// Declare the same schedule on as many workers as you like.
    ///
    /// # Errors
    /// A schedule named twice.
    pub fn periodic(mut self, periodic: Periodic) -> Result<Self> {
        if self.schedules.iter().any(|p| p.name() == periodic.name()) {
            return Err(QueueError::invalid(
                "schedule",
                format!("{} is declared twice", periodic.name()),
            ));
        }
        self.schedules.push(periodic);
        Ok(self)
    }

    /// Starts the worker's tasks on the current tokio runtime.
    ///
    /// What the storage does not declare ([`Storage::capabilities`]) the
    /// worker does without: no queue settings are read without
    /// [`Capability::FlowLimits`] (each queue runs with its options), no
    /// subscription without [`Capability::Wakeups`] (it polls), no pruning
    /// without [`Capability::PruneHistory`] (history is kept; a warning
    /// says so), a handler's snooze becomes a retry after the same delay
    /// without [`Capability::Snooze`], and no entry in the worker registry
    /// without [`Capability::Workers`]. With it, the worker registers
    /// itself (id, host, process id, version, queues and their
    /// concurrency, start time) as it starts, again every
    /// `reclaim_interval` as its heartbeat, and deregisters at the end of
    /// [`Worker::shutdown`].
    ///
    /// # Errors
    /// No queue configured, invalid worker options, or periodic schedules
    /// on a storage without [`Capability::Periodic`]
    /// ([`QueueError::NotSupported`]).
    pub fn start(self) -> Result<Worker<S>> {
        if self.queues.is_empty() {
            return Err(QueueError::invalid("queues", "serve at least one queue"));
        }
        self.options.validate()?;
        let declared = self.storage.capabilities();
        if !self.schedules.is_empty() {
            declared.require(Capability::Periodic, "enqueue_periodic")?;
        }
        if !declared.supports(Capability::PruneHistory) {
            warn!("this storage does not support pruning history: the worker keeps all of it");
        }
        let worker_id = match self.worker_id {
            Some(id) => id,
            None => default_worker_id()?,
        };
        let sample_interval = self
            .options
            .sample_interval
            .filter(|_| declared.supports(Capability::Samples));
        let (completions, inbox) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            storage: self.storage,
            worker_id,
            options: self.options,
            effective: Mutex::new(settings::defaults(&self.queues)),
            queues: self.queues,
            in_flight: Mutex::new(HashMap::new()),
            wake: Notify::new(),
            stop_fetching: CancellationToken::new(),
            stop_all: CancellationToken::new(),
            reclaimed: CancellationToken::new(),
            completions,
            sampler: crate::samples::Sampler::new(sample_interval.is_some()),
        });
        info!(worker_id = %shared.worker_id, queues = shared.queues.len(), "worker started");
        let mut tasks = vec![
            tokio::spawn(complete::run(Arc::clone(&shared), inbox)),
            tokio::spawn(heartbeat::run(Arc::clone(&shared))),
            tokio::spawn(maintenance::run(Arc::clone(&shared))),
        ];
        if declared.supports(Capability::FlowLimits) {
            tasks.push(tokio::spawn(settings::run(Arc::clone(&shared))));
        }
        if shared.options.subscribe && declared.supports(Capability::Wakeups) {
            tasks.push(tokio::spawn(wakeups::run(Arc::clone(&shared))));
        }
        if declared.supports(Capability::Workers) {
            let info = registry::info(&shared, chrono::Utc::now());
            tasks.push(tokio::spawn(registry::run(Arc::clone(&shared), info)));
        }
        if let Some(interval) = sample_interval {
            tasks.push(tokio::spawn(crate::samples::run(
                Arc::clone(&shared),
                interval,
            )));
        }
        if !self.schedules.is_empty() {
            let schedules = self.schedules.clone();
            tasks.push(tokio::spawn(periodic::run(Arc::clone(&shared), schedules)));
        }
        let dispatcher = tokio::spawn(dispatch::run(Arc::clone(&shared)));
        Ok(Worker {
            shared,
            dispatcher,
            tasks,
            schedules: self.schedules,
        })
    }
}

/// `host-pid-xxxx`, cleaned to what a `WorkerId` accepts.
fn default_worker_id() -> Result<WorkerId> {
    let host: String = gethostname::gethostname()
        .to_string_lossy()
        .chars()
        .filter(|c| !c.is_control() && !c.is_whitespace())
        .take(120)
        .collect();
    let host = if host.is_empty() {
        "worker".to_owned()
    } else {
        host
    };
    WorkerId::new(format!(
        "{host}-{}-{:04x}",
        std::process::id(),
        rand::random::<u16>()
    ))
}

/// A running worker.
pub struct Worker<S> {
    shared: Arc<Shared<S>>,
    dispatcher: JoinHandle<()>,
    tasks: Vec<JoinHandle<()>>,
    schedules: Vec<Periodic>,
}

/// Wakes a worker's dispatcher from outside (the storage's own wake-ups
/// need none: the worker subscribes to them by itself).
#[derive(Clone)]
pub struct Waker(Arc<dyn Fn() + Send + Sync>);

impl Waker {
    /// Makes the worker look for jobs now.
    pub fn wake(&self) {
        (self.0)();
    }
}

impl std::fmt::Debug for Waker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Waker")
    }
}

/// What a shutdown did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShutdownReport {
    /// Runs still going at the deadline, whose tokens were fired.
    pub cancelled: usize,
    /// Of those, the leases given back without counting the attempt.
    pub released: usize,
}

impl<S: Storage> Worker<S> {
    /// The id this worker's leases carry.
    pub fn worker_id(&self) -> &WorkerId {
        &self.shared.worker_id
    }

    /// Jobs running now.
    pub fn running(&self) -> usize {
        self.shared.in_flight().len()
    }

    /// The periodic schedules this worker offers, with their next fire
    /// times after `now` (the storage's clock: [`Storage::now`]).
    pub fn schedules(&self, now: chrono::DateTime<chrono::Utc>) -> Vec<ScheduleInfo> {
        self.schedules
            .iter()
            .map(|p| ScheduleInfo::of(p, now))
            .collect()
    }

    /// A handle that wakes the dispatcher.
    pub fn waker(&self) -> Waker {
        let shared = Arc::clone(&self.shared);
        Waker(Arc::new(move || shared.wake.notify_one()))
    }

    /// Enqueues through this worker's storage and wakes it at once. With
    /// the feature `opentelemetry`, a job without a trace context gets the
    /// current span's ([`crate::NewJobTraceExt::with_current_trace`]).
    ///
    /// # Errors
    /// As [`Storage::enqueue`].
    pub async fn enqueue(&self, job: NewJob) -> Result<EnqueueOutcome> {
        #[cfg(feature = "opentelemetry")]
        let job = match job.current_trace_context() {
            Some(_) => job,
            None => crate::NewJobTraceExt::with_current_trace(job),
        };
        let outcome = self.shared.storage.enqueue(job).await?;
        metrics::counter!("queue_jobs_enqueued_total").increment(1);
        self.shared.wake.notify_one();
        Ok(outcome)
    }

    /// Stops fetching, lets running jobs finish for up to `deadline`, then
    /// fires the tokens of those still running, releases their leases
    /// without counting the attempt and aborts their tasks (dropping, and
    /// so rolling back, whatever they held); flushes completions, stops,
    /// and removes the worker from the registry when the storage has one
    /// ([`Capability::Workers`]).
    pub async fn shutdown(self, deadline: Duration) -> ShutdownReport {
        let shared = &self.shared;
        shared.stop_fetching.cancel();
        let _ = self.dispatcher.await;
        let until = Instant::now() + deadline;
        while !shared.in_flight().is_empty() && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let remaining: Vec<_> = shared.in_flight().keys().copied().collect();
        let mut report = ShutdownReport::default();
        for id in remaining {
            if let Some(lease) = shared.abandon(id) {
                report.cancelled += 1;
                if matches!(shared.storage.release(&lease).await, Ok(true)) {
                    report.released += 1;
                }
                shared.abort(id);
            }
        }
        shared.stop_all.cancel();
        for task in self.tasks {
            let _ = task.await;
        }
        if shared.storage.capabilities().supports(Capability::Workers) {
            registry::deregister(shared).await;
        }
        info!(worker_id = %shared.worker_id, ?report, "worker stopped");
        report
    }

    /// Runs until `signal` completes (e.g. `tokio::signal::ctrl_c()`), then
    /// shuts down with `deadline`.
    pub async fn run_until<F: Future>(self, signal: F, deadline: Duration) -> ShutdownReport {
        signal.await;
        self.shutdown(deadline).await
    }
}
