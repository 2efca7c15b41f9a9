//! How a worker and each of its queues behave.

use std::time::Duration;

use queue_core::{Backoff, QueueError, Result};

/// The settings of one queue a worker serves.
#[derive(Debug, Clone)]
pub struct QueueOptions {
    /// Jobs of this queue run at the same time, at most.
    pub concurrency: usize,
    /// How long each claim's lease lasts; heartbeats extend it. The queue's
    /// `queue_config` lease, where set, takes its place.
    pub lease: Duration,
    /// Delays between attempts after a failure. The queue's `queue_config`
    /// backoff, where set, takes its place.
    pub backoff: Backoff,
    /// A run longer than this fails its attempt and has its token fired.
    pub timeout: Option<Duration>,
    /// Jobs claimed ahead of free slots, held (leased and heartbeated) until
    /// a slot frees. Larger claims mean fewer round trips per job; the cost
    /// is that held jobs are not available to other workers. Default 0.
    pub prefetch: usize,
}

impl Default for QueueOptions {
    fn default() -> Self {
        Self {
            concurrency: 10,
            lease: Duration::from_secs(30),
            backoff: Backoff::default(),
            timeout: None,
            prefetch: 0,
        }
    }
}

impl QueueOptions {
    /// Options with `concurrency` slots and defaults otherwise.
    pub fn with_concurrency(concurrency: usize) -> Self {
        Self {
            concurrency,
            ..Self::default()
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.concurrency == 0 {
            return Err(QueueError::invalid("concurrency", "must be at least 1"));
        }
        queue_core::validate_lease("lease", self.lease)?;
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return Err(QueueError::invalid("timeout", "must be greater than zero"));
        }
        Ok(())
    }
}

/// Worker-wide timings.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The longest wait between two looks for jobs when nothing wakes the worker.
    pub poll_interval: Duration,
    /// Heartbeats run every `lease / heartbeat_divisor` (default 3).
    pub heartbeat_divisor: u32,
    /// Acks are sent in batches of at most this many…
    pub completion_batch: usize,
    /// …or after this delay, whichever comes first.
    pub completion_delay: Duration,
    /// How often stalled leases are reclaimed.
    pub reclaim_interval: Duration,
    /// How often history is pruned. A round deletes at most 10 batches of
    /// [`queue_core::MAX_BATCH`] rows per status; when it leaves rows past
    /// their retention, the next round follows a second later instead.
    pub prune_interval: Duration,
    /// Completed jobs stay in history this long.
    pub completed_retention: Duration,
    /// Dead letters and discarded jobs stay in history this long.
    pub dead_letter_retention: Duration,
    /// How often each queue's lease and backoff are read again from its
    /// `queue_config` row (where set there, they override
    /// [`QueueOptions::lease`] and [`QueueOptions::backoff`]).
    pub config_interval: Duration,
    /// Subscribe to the storage's wake-ups ([`queue_core::Storage::subscribe`])
    /// at start, so jobs start as soon as they are committed. Default true;
    /// off, or on a storage without wake-ups, the worker polls.
    pub subscribe: bool,
    /// How often the worker records the start lags of the jobs it claimed
    /// and, once a minute, its queues' depths, for the dashboard's charts
    /// ([`queue_core::Storage::record_samples`]), on a storage that
    /// declares [`queue_core::Capability::Samples`]. Default 15 s; `None`
    /// records nothing.
    pub sample_interval: Option<Duration>,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(1),
            heartbeat_divisor: 3,
            completion_batch: 64,
            completion_delay: Duration::from_millis(5),
            reclaim_interval: Duration::from_secs(15),
            prune_interval: Duration::from_secs(3600),
            completed_retention: Duration::from_secs(7 * 24 * 3600),
            dead_letter_retention: Duration::from_secs(30 * 24 * 3600),
            config_interval: Duration::from_secs(1),
            subscribe: true,
            sample_interval: Some(Duration::from_secs(15)),
        }
    }
}

impl WorkerOptions {
    pub(crate) fn validate(&self) -> Result<()> {
        if self.poll_interval.is_zero() {
            return Err(QueueError::invalid(
                "poll_interval",
                "must be greater than zero",
            ));
        }
        if self.heartbeat_divisor < 2 {
            return Err(QueueError::invalid(
                "heartbeat_divisor",
                "must be at least 2, so a lease is extended before it ends",
            ));
        }
        if self.completion_batch == 0 {
            return Err(QueueError::invalid(
                "completion_batch",
                "must be at least 1",
            ));
        }
        for (field, value) in [
            ("reclaim_interval", self.reclaim_interval),
            ("prune_interval", self.prune_interval),
            ("config_interval", self.config_interval),
            (
                "sample_interval",
                self.sample_interval.unwrap_or(Duration::MAX),
            ),
        ] {
            if value.is_zero() {
                return Err(QueueError::invalid(field, "must be greater than zero"));
            }
        }
        Ok(())
    }
}
