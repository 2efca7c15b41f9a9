//! Per-queue counts for operators and dashboards.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{JobState, QueueName};

/// Live-job counts of one queue, by derived state, at the storage's now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueStats {
    /// The queue.
    pub queue: QueueName,
    /// Whether dequeue skips this queue.
    pub paused: bool,
    /// Ready to run.
    pub pending: u64,
    /// Waiting for their time.
    pub scheduled: u64,
    /// Leased.
    pub running: u64,
    /// Lease expired, awaiting reclaim.
    pub stalled: u64,
    /// Out of attempts, awaiting reclaim into dead letters.
    pub exhausted: u64,
    /// How long the oldest pending job has been available; `None` when none is pending.
    pub oldest_pending_age: Option<Duration>,
}

impl QueueStats {
    /// Empty counts for `queue`.
    pub fn empty(queue: QueueName) -> Self {
        Self {
            queue,
            paused: false,
            pending: 0,
            scheduled: 0,
            running: 0,
            stalled: 0,
            exhausted: 0,
            oldest_pending_age: None,
        }
    }

    /// The count for one state.
    pub fn count(&self, state: JobState) -> u64 {
        match state {
            JobState::Pending => self.pending,
            JobState::Scheduled => self.scheduled,
            JobState::Running => self.running,
            JobState::Stalled => self.stalled,
            JobState::Exhausted => self.exhausted,
        }
    }

    /// Adds one job in `state` to the counts.
    pub fn add(&mut self, state: JobState) {
        let slot = match state {
            JobState::Pending => &mut self.pending,
            JobState::Scheduled => &mut self.scheduled,
            JobState::Running => &mut self.running,
            JobState::Stalled => &mut self.stalled,
            JobState::Exhausted => &mut self.exhausted,
        };
        *slot += 1;
    }

    /// All live jobs of the queue.
    pub fn live(&self) -> u64 {
        JobState::ALL.iter().map(|s| self.count(*s)).sum()
    }
}
