//! `NewJob`: the builder a caller fills in to enqueue a job, and its
//! validated form that backends write.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::time::{truncate_to_micros, validate_duration, validate_instant};
use crate::{
    Dependency, DependencyFailure, GroupKey, JobId, QueueError, QueueName, Result, TraceContext,
    UniqueKey,
};

/// Attempts a job gets when the caller does not say: the first run plus 19 retries.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 20;

/// The largest `max_attempts`: it must fit the databases' 32-bit signed column.
pub const MAX_MAX_ATTEMPTS: u32 = i32::MAX as u32;

/// When a new job first becomes available.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Schedule {
    /// At once (the database's now).
    #[default]
    Now,
    /// After a delay from the database's now.
    After(Duration),
    /// At a fixed instant.
    At(DateTime<Utc>),
}

/// A job to enqueue, built fluently and checked when enqueued.
///
/// ```
/// use std::time::Duration;
/// use queue_core::NewJob;
///
/// let job = NewJob::new("emails", serde_json::json!({"to": "ada@example.com"}))
///     .priority(10)
///     .unique_key("welcome-ada")
///     .max_attempts(5)
///     .delay(Duration::from_secs(30));
/// assert!(job.validate().is_ok());
/// ```
#[derive(Debug, Clone)]
pub struct NewJob {
    queue: String,
    payload: std::result::Result<Value, String>,
    priority: i32,
    unique_key: Option<String>,
    group_key: Option<String>,
    max_attempts: u32,
    schedule: Schedule,
    trace_context: Option<TraceContext>,
    dependencies: Vec<Dependency>,
    on_dependency_failure: DependencyFailure,
    joins: Option<JobId>,
}

impl NewJob {
    /// A job for `queue` carrying `payload` (anything `Serialize`, including a
    /// `serde_json::Value`). A payload that fails to serialise is reported
    /// when the job is validated or enqueued, as an invalid `payload`.
    pub fn new(queue: impl Into<String>, payload: impl Serialize) -> Self {
        Self {
            queue: queue.into(),
            payload: serde_json::to_value(payload).map_err(|e| e.to_string()),
            priority: 0,
            unique_key: None,
            group_key: None,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            schedule: Schedule::Now,
            trace_context: None,
            dependencies: Vec::new(),
            on_dependency_failure: DependencyFailure::Cancel,
            joins: None,
        }
    }

    /// Sets the priority: higher runs first; the default is 0.
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// Makes the enqueue idempotent: while a job with this key is live in the
    /// same queue, enqueueing again returns that job.
    pub fn unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique_key = Some(key.into());
        self
    }

    /// Puts the job in a group (a tenant, a customer): the queue's group
    /// concurrency limit ([`crate::QueueLimits::group_concurrency`], or the
    /// group's own [`crate::GroupLimit`]) caps how many jobs of one group
    /// run at once. Only a storage that declares
    /// [`crate::Capability::GroupLimits`] takes such a job; the others
    /// refuse it with [`QueueError::NotSupported`] and write nothing.
    pub fn group_key(mut self, key: impl Into<String>) -> Self {
        self.group_key = Some(key.into());
        self
    }

    /// How many attempts the job gets before it becomes a dead letter (>= 1).
    pub fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// Makes the job available `delay` after the database's now.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.schedule = Schedule::After(delay);
        self
    }

    /// Makes the job available at `at`.
    pub fn run_at(mut self, at: DateTime<Utc>) -> Self {
        self.schedule = Schedule::At(at);
        self
    }

    /// Stores the enqueuer's trace context with the job: the worker makes
    /// the handler's span its child. `queue-worker`'s feature
    /// `opentelemetry` fills it from the current span.
    pub fn trace_context(mut self, trace_context: TraceContext) -> Self {
        self.trace_context = Some(trace_context);
        self
    }

    /// Makes the job wait for `dependency` (a job enqueued before, or an
    /// earlier job of the same batch) to finish: until every dependency
    /// has, the job is [`crate::JobState::Waiting`] and no claim takes it
    /// (see [`crate::Storage::enqueue_batch`]). Only a storage that declares
    /// [`crate::Capability::Dependencies`] takes such a job; the others
    /// refuse it with [`QueueError::NotSupported`] and write nothing.
    pub fn depends_on(mut self, dependency: impl Into<Dependency>) -> Self {
        self.dependencies.push(dependency.into());
        self
    }

    /// [`NewJob::depends_on`] for each of `dependencies`.
    pub fn depends_on_all<D: Into<Dependency>>(
        mut self,
        dependencies: impl IntoIterator<Item = D>,
    ) -> Self {
        self.dependencies
            .extend(dependencies.into_iter().map(Into::into));
        self
    }

    /// What the job does when a dependency finishes without completing;
    /// the default is [`DependencyFailure::Cancel`].
    pub fn on_dependency_failure(mut self, on_failure: DependencyFailure) -> Self {
        self.on_dependency_failure = on_failure;
        self
    }

    /// The dependencies set so far.
    pub fn current_dependencies(&self) -> &[Dependency] {
        &self.dependencies
    }

    /// Adds the job to the open batch whose callback is `callback` (see
    /// [`crate::batch`]): the callback, waiting for the batch's jobs,
    /// waits for this one too, from the enqueue's transaction on. A batch
    /// whose callback no longer waits (every job finished, or it was
    /// discarded) is closed: the enqueue is refused
    /// ([`crate::batch_closed`]) and writes nothing. Only a storage that
    /// declares [`crate::Capability::Batches`] takes such a job.
    pub fn joins(mut self, callback: JobId) -> Self {
        self.joins = Some(callback);
        self
    }

    /// The batch it joins, if set ([`NewJob::joins`]).
    pub fn current_joins(&self) -> Option<JobId> {
        self.joins
    }

    /// The group key set so far, if any (unchecked until validation).
    pub fn current_group_key(&self) -> Option<&str> {
        self.group_key.as_deref()
    }

    /// The trace context set so far, if any.
    pub fn current_trace_context(&self) -> Option<&TraceContext> {
        self.trace_context.as_ref()
    }

    /// Checks every field and returns the form backends write.
    ///
    /// # Errors
    /// [`QueueError::InvalidInput`] naming the first bad field: `queue`,
    /// `unique_key`, `group_key` (see [`GroupKey`]), `payload` (not serialisable, or holding a NUL
    /// character in a string or key), `max_attempts` (0 or above
    /// [`MAX_MAX_ATTEMPTS`]), `delay` (above 100 years) or `run_at` (outside
    /// 1970 ..= 9999).
    pub fn validate(&self) -> Result<ValidJob> {
        let queue = QueueName::new(self.queue.clone())?;
        let unique_key = self.unique_key.clone().map(UniqueKey::new).transpose()?;
        let group_key = self.group_key.clone().map(GroupKey::new).transpose()?;
        let payload = self.payload.clone().map_err(|e| {
            QueueError::invalid("payload", format!("is not JSON-serialisable: {e}"))
        })?;
        if contains_nul(&payload) {
            // PostgreSQL's jsonb cannot store U+0000; refusing it everywhere
            // keeps every backend accepting the same payloads.
            return Err(QueueError::invalid(
                "payload",
                "contains the NUL character (U+0000), which PostgreSQL cannot store",
            ));
        }
        if !(1..=MAX_MAX_ATTEMPTS).contains(&self.max_attempts) {
            return Err(QueueError::invalid(
                "max_attempts",
                format!(
                    "is {}, it must be between 1 and {MAX_MAX_ATTEMPTS}",
                    self.max_attempts
                ),
            ));
        }
        let schedule = match self.schedule {
            Schedule::Now => Schedule::Now,
            Schedule::After(delay) => {
                validate_duration("delay", delay, true)?;
                Schedule::After(delay)
            }
            Schedule::At(at) => {
                validate_instant("run_at", at)?;
                Schedule::At(truncate_to_micros(at))
            }
        };
        Ok(ValidJob {
            queue,
            payload,
            priority: self.priority,
            unique_key,
            group_key,
            max_attempts: self.max_attempts,
            schedule,
            trace_context: self.trace_context.clone(),
            dependencies: distinct(&self.dependencies),
            on_dependency_failure: self.on_dependency_failure,
            joins: self.joins,
        })
    }
}

/// A [`NewJob`] whose every field passed validation.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidJob {
    /// The queue to enqueue into.
    pub queue: QueueName,
    /// The JSON payload.
    pub payload: Value,
    /// Higher runs first.
    pub priority: i32,
    /// Idempotency key within the queue.
    pub unique_key: Option<UniqueKey>,
    /// The group whose concurrency limit the job counts against, if any.
    pub group_key: Option<GroupKey>,
    /// Attempts before dead-lettering, in `1..=MAX_MAX_ATTEMPTS`.
    pub max_attempts: u32,
    /// When the job first becomes available; instants are microsecond-exact.
    pub schedule: Schedule,
    /// The enqueuer's trace context (checked when it was built).
    pub trace_context: Option<TraceContext>,
    /// The jobs it waits for, each once, in the order first named
    /// (checked against the batch by [`crate::check_batch_dependencies`]).
    pub dependencies: Vec<Dependency>,
    /// What a dependency that fails does to it.
    pub on_dependency_failure: DependencyFailure,
    /// The callback of the open batch it joins ([`NewJob::joins`]).
    pub joins: Option<JobId>,
}

impl ValidJob {
    /// The instant the job becomes available, given the storage's now.
    pub fn available_at(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        match self.schedule {
            Schedule::Now => now,
            Schedule::After(delay) => truncate_to_micros(now + crate::time::to_time_delta(delay)),
            Schedule::At(at) => at,
        }
    }
}

/// Each dependency once, in the order first named.
fn distinct(dependencies: &[Dependency]) -> Vec<Dependency> {
    let mut seen = std::collections::HashSet::with_capacity(dependencies.len());
    dependencies
        .iter()
        .copied()
        .filter(|dependency| seen.insert(*dependency))
        .collect()
}

/// True when any string or object key in `value` holds U+0000.
fn contains_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(contains_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || contains_nul(v)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}
