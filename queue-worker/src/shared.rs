//! State shared by the worker's tasks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use std::time::Duration;

use queue_core::{Backoff, JobId, Lease, QueueName, Retry, Storage, WorkerId};
use serde_json::Value;
use tokio::sync::{Notify, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use crate::config::{QueueOptions, WorkerOptions};
use crate::handler::Handler;

/// One queue the worker serves.
pub(crate) struct QueueSlot {
    pub(crate) name: QueueName,
    pub(crate) options: QueueOptions,
    pub(crate) handler: Arc<dyn Handler>,
    /// One permit per free slot.
    pub(crate) slots: Arc<Semaphore>,
    /// Prefetched jobs: claimed, waiting for a free slot.
    pub(crate) waiting: Arc<std::sync::atomic::AtomicUsize>,
}

/// A job being run.
pub(crate) struct InFlight {
    pub(crate) lease: Lease,
    pub(crate) queue: usize,
    pub(crate) cancel: CancellationToken,
    /// Set when the lease is gone (lost, or released at shutdown): the run's
    /// result must not be applied.
    pub(crate) abandoned: Arc<AtomicBool>,
    /// Stops the handler's task; used only past the shutdown deadline.
    pub(crate) abort: Arc<Mutex<Option<tokio::task::AbortHandle>>>,
}

pub(crate) struct Shared<S> {
    pub(crate) storage: Arc<S>,
    pub(crate) worker_id: WorkerId,
    pub(crate) options: WorkerOptions,
    pub(crate) queues: Vec<QueueSlot>,
    pub(crate) in_flight: Mutex<HashMap<JobId, InFlight>>,
    /// Wakes the dispatcher: an enqueue, a freed slot, a notification.
    pub(crate) wake: Notify,
    /// Fired to stop fetching new jobs.
    pub(crate) stop_fetching: CancellationToken,
    /// Fired to stop the heartbeat, completion and maintenance tasks.
    pub(crate) stop_all: CancellationToken,
    /// Fired once the start-up reclaim round has ended, which the first
    /// claim waits for.
    pub(crate) reclaimed: CancellationToken,
    pub(crate) completions: mpsc::UnboundedSender<Completion>,
    /// Per queue (by index), refreshed from `queue_config`.
    pub(crate) effective: Mutex<Vec<Effective>>,
    /// Start lags and depths not yet recorded.
    pub(crate) sampler: crate::samples::Sampler,
}

impl<S: Storage> Shared<S> {
    pub(crate) fn in_flight(&self) -> MutexGuard<'_, HashMap<JobId, InFlight>> {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Queue `index`'s lease and backoff in force.
    pub(crate) fn effective(&self, index: usize) -> Effective {
        self.effective
            .lock()
            .unwrap_or_else(PoisonError::into_inner)[index]
    }

    /// Whether any of the worker's queues has a concurrency limit (as last
    /// read from `queue_config`).
    pub(crate) fn any_concurrency_limited(&self) -> bool {
        self.effective
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|e| e.concurrency_limited)
    }

    /// Aborts the handler task of a run (after its token fired), if any.
    pub(crate) fn abort(&self, id: JobId) {
        let in_flight = self.in_flight();
        if let Some(run) = in_flight.get(&id)
            && let Some(handle) = run
                .abort
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
        {
            handle.abort();
        }
    }

    /// Marks a run's lease as gone and fires its token; true if it was running.
    pub(crate) fn abandon(&self, id: JobId) -> Option<Lease> {
        let in_flight = self.in_flight();
        let run = in_flight.get(&id)?;
        run.abandoned.store(true, Ordering::SeqCst);
        run.cancel.cancel();
        Some(run.lease.clone())
    }
}

/// What a finished run asks for.
#[derive(Debug)]
pub(crate) enum Completion {
    Ack {
        lease: Lease,
        result: Option<Value>,
    },
    Nack {
        lease: Lease,
        error: Value,
        retry: Retry,
    },
    Snooze {
        lease: Lease,
        delay: Duration,
    },
}

/// A queue's lease and backoff in force: its `queue_config` row's where
/// set, else the worker's [`QueueOptions`]; and whether that row sets a
/// concurrency limit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Effective {
    pub(crate) lease: Duration,
    pub(crate) backoff: Backoff,
    pub(crate) concurrency_limited: bool,
}
