//! What a handler receives and returns.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use queue_core::{Job, Lease};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Everything a handler knows about the job it runs.
#[derive(Debug, Clone)]
pub struct JobContext {
    job: Job,
    lease: Lease,
    cancel: CancellationToken,
    completed: Arc<AtomicBool>,
}

impl JobContext {
    pub(crate) fn new(job: Job, lease: Lease, cancel: CancellationToken) -> Self {
        Self {
            job,
            lease,
            cancel,
            completed: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The job as claimed (attempts already counts this run).
    pub fn job(&self) -> &Job {
        &self.job
    }

    /// The job's payload.
    pub fn payload(&self) -> &Value {
        &self.job.payload
    }

    /// This run's attempt number, from 1.
    pub fn attempt(&self) -> u32 {
        self.lease.attempt
    }

    /// The lease this run holds: pass it to a backend's `ack_in` / `nack_in`
    /// to complete the job in your own transaction.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// Fired when the run must stop: its lease was lost, its timeout
    /// passed, or the worker is shutting down past its deadline. Whatever
    /// the handler returns afterwards is not applied.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// True once [`JobContext::cancellation`] has fired.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Tells the worker that the handler completed the job itself (with a
    /// backend's `ack_in` / `nack_in`, committed): the worker will not ack
    /// or nack it again.
    pub fn mark_completed(&self) {
        self.completed.store(true, Ordering::SeqCst);
    }

    pub(crate) fn was_completed(&self) -> bool {
        self.completed.load(Ordering::SeqCst)
    }
}

/// Why a run failed, and whether to try again.
#[derive(Debug, Clone, PartialEq)]
pub struct JobError {
    /// Stored as the job's `last_error`.
    pub error: Value,
    /// False for errors that no retry can fix: the job is dead-lettered at once.
    pub retry: bool,
    /// Set by [`JobError::snooze`]: not a failure, but "run me again after
    /// this long", without counting the attempt.
    pub snooze: Option<Duration>,
}

impl JobError {
    /// A failure worth retrying (with the queue's backoff).
    pub fn retry(message: impl std::fmt::Display) -> Self {
        Self {
            error: json!({ "message": message.to_string() }),
            retry: true,
            snooze: None,
        }
    }

    /// A failure no retry can fix: the job goes to the dead letters now.
    pub fn discard(message: impl std::fmt::Display) -> Self {
        Self {
            error: json!({ "message": message.to_string(), "discarded": true }),
            retry: false,
            snooze: None,
        }
    }

    /// Not now: the job runs again after `delay`, its attempt given back and
    /// its snooze count raised ([`queue_core::Storage::snooze`]); nothing is
    /// recorded as an error. For waiting on something outside (a rate limit
    /// of an API, a resource not ready yet).
    pub fn snooze(delay: Duration) -> Self {
        Self {
            error: serde_json::Value::Null,
            retry: true,
            snooze: Some(delay),
        }
    }
}

impl<E: std::error::Error> From<E> for JobError {
    fn from(error: E) -> Self {
        Self::retry(error)
    }
}

/// What a handler returns: a result to store in history, or an error.
pub type HandlerResult = Result<Option<Value>, JobError>;

/// Runs the jobs of a queue.
#[async_trait]
pub trait Handler: Send + Sync + 'static {
    /// Runs one job. Returning `Ok` acks it, `Err` nacks it; a panic is a
    /// failed attempt carrying the panic message.
    async fn handle(&self, ctx: JobContext) -> HandlerResult;
}

#[async_trait]
impl<F, Fut> Handler for F
where
    F: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HandlerResult> + Send + 'static,
{
    async fn handle(&self, ctx: JobContext) -> HandlerResult {
        self(ctx).await
    }
}
