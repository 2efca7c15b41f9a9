//! Live jobs as operators see them: filtered listings, bulk actions on
//! what a filter selects, and the throughput series of history.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::history::{MAX_PAGE_SIZE, validate_limit};
use crate::{Job, JobId, JobState, QueueError, QueueName, Result, UniqueKey};

/// Which live jobs a listing or a bulk action selects: every filter that
/// is set must hold. Listings run newest (highest id) first, keyset-paged
/// by `before`; bulk actions take at most `limit` jobs per call, so that a
/// caller repeats them until they report 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFilter {
    /// Only this queue.
    pub queue: Option<QueueName>,
    /// Only jobs in this state at the storage's now.
    pub state: Option<JobState>,
    /// Only this job.
    pub id: Option<JobId>,
    /// Only the job holding this unique key (in any queue, unless `queue` is set).
    pub unique_key: Option<UniqueKey>,
    /// Only ids strictly below this one: the `next` of the previous page.
    pub before: Option<JobId>,
    /// Jobs per page or per bulk call, `1..=MAX_PAGE_SIZE`.
    pub limit: u32,
}

impl Default for JobFilter {
    fn default() -> Self {
        Self {
            queue: None,
            state: None,
            id: None,
            unique_key: None,
            before: None,
            limit: 100,
        }
    }
}

impl JobFilter {
    /// The filter selecting job `id` alone.
    pub fn id(id: JobId) -> Self {
        Self {
            id: Some(id),
            ..Self::default()
        }
    }

    /// Rejects a limit of 0 or above [`MAX_PAGE_SIZE`].
    pub fn validate(&self) -> Result<()> {
        validate_limit("limit", self.limit, MAX_PAGE_SIZE)
    }

    /// The filter `run_now` acts on: this one narrowed to scheduled jobs,
    /// or `None` when it selects another state (then nothing moves).
    pub fn scheduled_only(&self) -> Option<Self> {
        match self.state {
            None | Some(JobState::Scheduled) => Some(Self {
                state: Some(JobState::Scheduled),
                ..self.clone()
            }),
            Some(_) => None,
        }
    }

    /// Whether `job`, in state `state` at the storage's now, is selected
    /// (the limit aside): for storages that filter in memory.
    pub fn matches(&self, job: &Job, state: JobState) -> bool {
        self.queue.as_ref().is_none_or(|q| *q == job.queue)
            && self.state.is_none_or(|s| s == state)
            && self.id.is_none_or(|id| id == job.id)
            && self
                .unique_key
                .as_ref()
                .is_none_or(|k| job.unique_key.as_ref() == Some(k))
            && self.before.is_none_or(|before| job.id < before)
    }
}

/// One page of live jobs.
#[derive(Debug, Clone, PartialEq)]
pub struct JobPage {
    /// Jobs, highest id first.
    pub jobs: Vec<Job>,
    /// Pass as `before` to get the next page; `None` on the last page.
    pub next: Option<JobId>,
}

impl JobPage {
    /// A page from `jobs` fetched with one row more than `limit`: the
    /// extra row, if present, only tells that another page follows.
    pub fn from_overfetch(mut jobs: Vec<Job>, limit: u32) -> Self {
        let limit = limit as usize;
        let next = if jobs.len() > limit {
            jobs.truncate(limit);
            jobs.last().map(|j| j.id)
        } else {
            None
        };
        Self { jobs, next }
    }
}

/// The longest window a throughput series covers: 7 days.
pub const MAX_THROUGHPUT_WINDOW: Duration = Duration::from_secs(7 * 24 * 3600);

/// Validates a throughput window: at least a minute, at most
/// [`MAX_THROUGHPUT_WINDOW`].
pub fn validate_window(window: Duration) -> Result<()> {
    if window < Duration::from_secs(60) || window > MAX_THROUGHPUT_WINDOW {
        return Err(QueueError::invalid(
            "window",
            format!("is {window:?}, it must be between 1 minute and 7 days"),
        ));
    }
    Ok(())
}

/// Jobs of one queue that left the live table in one minute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Throughput {
    /// The queue.
    pub queue: QueueName,
    /// The start of the minute (UTC, seconds and below zero).
    pub minute: DateTime<Utc>,
    /// Jobs archived as `completed` in that minute.
    pub completed: u64,
    /// Jobs archived as `dead_letter` in that minute.
    pub failed: u64,
}

/// The start of the minute holding `at`.
pub fn minute_of(at: DateTime<Utc>) -> DateTime<Utc> {
    let seconds = at.timestamp().div_euclid(60) * 60;
    DateTime::from_timestamp(seconds, 0).unwrap_or(at)
}
