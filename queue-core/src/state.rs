//! Job state is derived from columns and the clock, never stored.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::Job;

/// Where a live job stands. Exactly one state holds for any job at any time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Ready: unleased, available, attempts left.
    Pending,
    /// Waiting for its `available_at` (delayed, or backing off after a failure).
    Scheduled,
    /// Leased and the lease has not expired.
    Running,
    /// Leased but the lease expired: the holder is presumed dead, and reclaim
    /// will return the job to pending or dead-letter it.
    Stalled,
    /// Unleased with no attempts left: a dead-letter candidate.
    Exhausted,
    /// Waiting for its dependencies to finish ([`crate::NewJob::depends_on`]):
    /// no claim takes it until the last one has.
    Waiting,
}

impl JobState {
    /// Every state, in the order of the design table.
    pub const ALL: [JobState; 6] = [
        JobState::Pending,
        JobState::Scheduled,
        JobState::Running,
        JobState::Stalled,
        JobState::Exhausted,
        JobState::Waiting,
    ];

    /// The state's lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Scheduled => "scheduled",
            Self::Running => "running",
            Self::Stalled => "stalled",
            Self::Exhausted => "exhausted",
            Self::Waiting => "waiting",
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// Derives a job's state at `now` (the storage's clock).
///
/// | state | condition |
/// |---|---|
/// | running | `lease_until > now` |
/// | stalled | `lease_until <= now` |
/// | waiting | no lease and `available_at` at [`crate::waiting_at`] |
/// | exhausted | no lease and `attempts >= max_attempts` |
/// | pending | no lease, attempts left, `available_at <= now` |
/// | scheduled | no lease, attempts left, `available_at > now` |
pub fn derive_state(job: &Job, now: DateTime<Utc>) -> JobState {
    state_of(
        job.available_at,
        job.lease_until,
        i64::from(job.attempts),
        i64::from(job.max_attempts),
        now,
    )
}

/// [`derive_state`] from the columns it reads, for a backend that reads
/// them without the rest of the job.
pub fn state_of(
    available_at: DateTime<Utc>,
    lease_until: Option<DateTime<Utc>>,
    attempts: i64,
    max_attempts: i64,
    now: DateTime<Utc>,
) -> JobState {
    match lease_until {
        Some(until) if until > now => JobState::Running,
        Some(_) => JobState::Stalled,
        None if crate::is_waiting(available_at) => JobState::Waiting,
        None if attempts >= max_attempts => JobState::Exhausted,
        None if available_at <= now => JobState::Pending,
        None => JobState::Scheduled,
    }
}
