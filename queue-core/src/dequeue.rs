//! The request to claim jobs.

use std::time::Duration;

use crate::history::validate_limit;
use crate::{QueueError, QueueName, Result, WorkerId};

/// The most jobs one dequeue may claim.
pub const MAX_DEQUEUE_LIMIT: u32 = 1_000;

/// The longest lease one claim or heartbeat may grant: one day. Longer work
/// keeps its lease alive with heartbeats.
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 60 * 60);

/// Claim up to `limit` pending jobs from `queues` for `worker_id`, each
/// leased for `lease`. Built only through [`DequeueRequest::new`], so every
/// value a backend sees is valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DequeueRequest {
    queues: Vec<QueueName>,
    limit: u32,
    lease: Duration,
    worker_id: WorkerId,
}

impl DequeueRequest {
    /// Validates and builds a request.
    ///
    /// # Errors
    /// `queues` empty; `limit` outside `1..=MAX_DEQUEUE_LIMIT`; `lease`
    /// zero, below a millisecond or above [`MAX_LEASE`].
    pub fn new(
        queues: Vec<QueueName>,
        limit: u32,
        lease: Duration,
        worker_id: WorkerId,
    ) -> Result<Self> {
        if queues.is_empty() {
            return Err(QueueError::invalid("queues", "name at least one queue"));
        }
        validate_limit("limit", limit, MAX_DEQUEUE_LIMIT)?;
        validate_lease("lease", lease)?;
        let mut queues = queues;
        queues.sort();
        queues.dedup();
        Ok(Self {
            queues,
            limit,
            lease,
            worker_id,
        })
    }

    /// The queues to claim from, sorted and without duplicates.
    pub fn queues(&self) -> &[QueueName] {
        &self.queues
    }

    /// The most jobs to claim.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// How long each claimed lease lasts.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Who claims.
    pub fn worker_id(&self) -> &WorkerId {
        &self.worker_id
    }
}

/// Rejects a lease duration below one millisecond or above [`MAX_LEASE`].
pub fn validate_lease(field: &'static str, lease: Duration) -> Result<()> {
    if lease < Duration::from_millis(1) {
        return Err(QueueError::invalid(field, "must be at least 1ms"));
    }
    if lease > MAX_LEASE {
        return Err(QueueError::invalid(
            field,
            format!(
                "is {}s, at most {}s (one day) is allowed",
                lease.as_secs(),
                MAX_LEASE.as_secs()
            ),
        ));
    }
    Ok(())
}
