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
/// leased for `lease`, optionally at most a given number from each queue.
/// Built only through [`DequeueRequest::new`] or
/// [`DequeueRequest::with_queue_limits`], so every value a backend sees is
/// valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DequeueRequest {
    queues: Vec<QueueName>,
    /// Per queue, aligned with `queues`; each at most `limit`.
    queue_limits: Vec<u32>,
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
            queue_limits: vec![limit; queues.len()],
            queues,
            limit,
            lease,
            worker_id,
        })
    }

    /// A request taking at most the given number of jobs from each queue
    /// (a worker's free slots per queue), in one claim: the limit in all is
    /// their sum, capped at [`MAX_DEQUEUE_LIMIT`].
    ///
    /// # Errors
    /// No queue, a queue named twice, a per-queue limit outside
    /// `1..=MAX_DEQUEUE_LIMIT` (field `queue_limits`), or an invalid lease.
    pub fn with_queue_limits(
        queue_limits: Vec<(QueueName, u32)>,
        lease: Duration,
        worker_id: WorkerId,
    ) -> Result<Self> {
        if queue_limits.is_empty() {
            return Err(QueueError::invalid("queues", "name at least one queue"));
        }
        let mut queue_limits = queue_limits;
        queue_limits.sort_by(|a, b| a.0.cmp(&b.0));
        if queue_limits.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(QueueError::invalid("queues", "a queue is named twice"));
        }
        for (_, limit) in &queue_limits {
            validate_limit("queue_limits", *limit, MAX_DEQUEUE_LIMIT)?;
        }
        validate_lease("lease", lease)?;
        let total = queue_limits
            .iter()
            .map(|(_, l)| u64::from(*l))
            .sum::<u64>()
            .min(u64::from(MAX_DEQUEUE_LIMIT));
        let limit = u32::try_from(total).unwrap_or(MAX_DEQUEUE_LIMIT);
        let (queues, queue_limits) = queue_limits.into_iter().unzip();
        Ok(Self {
            queues,
            queue_limits,
            limit,
            lease,
            worker_id,
        })
    }

    /// The queues to claim from, sorted and without duplicates.
    pub fn queues(&self) -> &[QueueName] {
        &self.queues
    }

    /// The most jobs to claim in all.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// The most jobs to claim from each queue, aligned with
    /// [`DequeueRequest::queues`] (each is [`DequeueRequest::limit`] unless
    /// built with [`DequeueRequest::with_queue_limits`]).
    pub fn queue_limits(&self) -> &[u32] {
        &self.queue_limits
    }

    /// The most jobs to claim from `queue` (0 for a queue not named).
    pub fn queue_limit(&self, queue: &QueueName) -> u32 {
        self.queues
            .binary_search(queue)
            .map_or(0, |i| self.queue_limits[i])
    }

    /// Whether the request names several queues whose caps add up to
    /// more than its limit: a claim then picks the best jobs among every
    /// queue's candidates, and must lock only those it takes (locking a
    /// queue's candidates while scanning it would hold jobs the claim does
    /// not take, and a racing claimer would skip them for worse ones).
    pub fn over_subscribed(&self) -> bool {
        let caps: u64 = self.queue_limits.iter().map(|c| u64::from(*c)).sum();
        self.queues.len() > 1 && caps > u64::from(self.limit)
    }

    /// This request with each queue's cap lowered to its allowance (queues
    /// absent from `allowances` keep theirs), the total kept: what a
    /// backend claims once flow limits are known. `None` when no queue may
    /// give a job.
    pub fn narrowed(&self, allowances: &[(QueueName, u32)]) -> Option<Self> {
        let mut queues = Vec::with_capacity(self.queues.len());
        let mut queue_limits = Vec::with_capacity(self.queues.len());
        for (queue, cap) in self.queues.iter().zip(&self.queue_limits) {
            let allowed = allowances
                .iter()
                .find(|(q, _)| q == queue)
                .map_or(*cap, |(_, allowed)| (*allowed).min(*cap));
            if allowed > 0 {
                queues.push(queue.clone());
                queue_limits.push(allowed);
            }
        }
        let total: u64 = queue_limits.iter().map(|l| u64::from(*l)).sum();
        let limit = u32::try_from(total.min(u64::from(self.limit))).unwrap_or(self.limit);
        (limit > 0).then(|| Self {
            queues,
            queue_limits,
            limit,
            lease: self.lease,
            worker_id: self.worker_id.clone(),
        })
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
