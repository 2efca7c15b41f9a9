//! Per-queue counts for operators and dashboards.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{JobState, QueueError, QueueName, Result};

/// The cap [`crate::Storage::stats`] counts each state up to: a count that
/// reaches it is shown as "10,000+". Counting stops there, so that stats
/// answer in milliseconds however many jobs wait (see docs/benchmarks-journal.md,
/// "Operator reads at size").
pub const DEFAULT_COUNT_CAP: u64 = 10_000;

/// Rejects a count cap of 0.
pub fn validate_count_cap(cap: u64) -> Result<()> {
    if cap == 0 {
        return Err(QueueError::invalid("cap", "is 0, it must be at least 1"));
    }
    Ok(())
}

/// Live-job counts of one queue, by derived state, at the storage's now.
///
/// Each count is `min(true count, cap)`: a count equal to [`QueueStats::cap`]
/// means "at least that many" ([`QueueStats::is_capped`], [`QueueStats::shown`]).
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
    /// Waiting for their dependencies ([`crate::JobState::Waiting`]).
    #[serde(default)]
    pub waiting: u64,
    /// How long the oldest pending job has been available; `None` when none is pending.
    pub oldest_pending_age: Option<Duration>,
    /// The cap the counts were counted up to; `None` when they are exact.
    #[serde(default)]
    pub cap: Option<u64>,
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
            waiting: 0,
            oldest_pending_age: None,
            cap: None,
        }
    }

    /// Caps every count at `cap` and records it: what a storage that
    /// counted exactly returns from [`crate::Storage::stats_capped`].
    pub fn capped_at(mut self, cap: u64) -> Self {
        for slot in [
            &mut self.pending,
            &mut self.scheduled,
            &mut self.running,
            &mut self.stalled,
            &mut self.exhausted,
            &mut self.waiting,
        ] {
            *slot = (*slot).min(cap);
        }
        self.cap = Some(cap);
        self
    }

    /// Whether the count of `state` reached the cap, so that it is a lower bound.
    pub fn is_capped(&self, state: JobState) -> bool {
        self.cap.is_some_and(|cap| self.count(state) >= cap)
    }

    /// The count of `state` for people: the number, or the cap with
    /// thousands separators and a `+` ("10,000+") when it reached the cap.
    pub fn shown(&self, state: JobState) -> String {
        let count = self.count(state);
        if self.is_capped(state) {
            format!("{}+", thousands(count))
        } else {
            count.to_string()
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
            JobState::Waiting => self.waiting,
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
            JobState::Waiting => &mut self.waiting,
        };
        *slot += 1;
    }

    /// All live jobs of the queue (a lower bound when a count is capped).
    pub fn live(&self) -> u64 {
        JobState::ALL.iter().map(|s| self.count(*s)).sum()
    }
}

/// `n` with a comma every three digits.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(pending: u64, cap: Option<u64>) -> QueueStats {
        QueueStats {
            pending,
            cap,
            ..QueueStats::empty(QueueName::new("q").expect("name"))
        }
    }

    #[test]
    fn a_count_at_the_cap_is_shown_as_a_lower_bound() {
        assert_eq!(
            stats(100_000, Some(100_000)).shown(JobState::Pending),
            "100,000+"
        );
        assert_eq!(stats(1_000, Some(1_000)).shown(JobState::Pending), "1,000+");
        assert_eq!(stats(7, Some(7)).shown(JobState::Pending), "7+");
        assert_eq!(
            stats(99_999, Some(100_000)).shown(JobState::Pending),
            "99999"
        );
        assert_eq!(stats(100_000, None).shown(JobState::Pending), "100000");
        assert!(!stats(0, Some(100)).is_capped(JobState::Running));
    }

    #[test]
    fn capped_at_caps_every_count() {
        let mut s = stats(10, None);
        s.running = 2;
        let capped = s.capped_at(3);
        assert_eq!(
            (capped.pending, capped.running, capped.cap),
            (3, 2, Some(3))
        );
        assert!(capped.is_capped(JobState::Pending) && !capped.is_capped(JobState::Running));
    }

    #[test]
    fn a_cap_of_zero_is_rejected() {
        assert!(validate_count_cap(0).is_err());
        assert!(validate_count_cap(1).is_ok());
    }
}
