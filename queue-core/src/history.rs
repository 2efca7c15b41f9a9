//! The archive of finished jobs (`job_history`) and how to page through it.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::time::validate_duration;
use crate::{GroupKey, JobId, QueueError, QueueName, Result, TraceContext, UniqueKey, WorkerId};

/// How a job left the live table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinalStatus {
    /// Acked by its handler.
    Completed,
    /// Failed its last attempt, or was refused a retry.
    DeadLetter,
    /// Removed by an operator before it finished.
    Discarded,
    /// Cancelled by id before it finished ([`crate::Storage::cancel`]); a
    /// running holder's cancellation token fires.
    Cancelled,
}

impl FinalStatus {
    /// Every final status, in declaration order.
    pub const ALL: [FinalStatus; 4] = [
        FinalStatus::Completed,
        FinalStatus::DeadLetter,
        FinalStatus::Discarded,
        FinalStatus::Cancelled,
    ];

    /// The value stored in `status_final`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::DeadLetter => "dead_letter",
            Self::Discarded => "discarded",
            Self::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for FinalStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for FinalStatus {
    type Err = QueueError;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "completed" => Ok(Self::Completed),
            "dead_letter" => Ok(Self::DeadLetter),
            "discarded" => Ok(Self::Discarded),
            "cancelled" => Ok(Self::Cancelled),
            other => Err(QueueError::invalid(
                "status_final",
                format!("unknown status {other:?}"),
            )),
        }
    }
}

/// One row of `job_history`: a finished job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryRecord {
    /// The id the job had while live.
    pub id: JobId,
    /// Its queue.
    pub queue: QueueName,
    /// Its priority.
    pub priority: i32,
    /// Its unique key, now free for a new job.
    pub unique_key: Option<UniqueKey>,
    /// Its group ([`crate::NewJob::group_key`]), kept so that a dead letter
    /// sent back to its queue stays in its group.
    #[serde(default)]
    pub group_key: Option<GroupKey>,
    /// Its payload.
    pub payload: Value,
    /// How it finished.
    pub status: FinalStatus,
    /// The handler's result (completed jobs).
    pub result: Option<Value>,
    /// The last error (dead letters, and completed jobs that failed before).
    pub last_error: Option<Value>,
    /// Attempts used.
    pub attempts: u32,
    /// Times a handler snoozed it ([`crate::Storage::snooze`]).
    #[serde(default)]
    pub snoozes: u32,
    /// Attempts it was allowed; 0 when the row was archived by a
    /// hand-written statement that did not record it (docs/sql-interop.md).
    pub max_attempts: u32,
    /// The worker that finished it; `None` when discarded or never claimed.
    pub processed_by: Option<WorkerId>,
    /// When it was enqueued.
    pub created_at: DateTime<Utc>,
    /// When it was first claimed.
    pub started_at: Option<DateTime<Utc>>,
    /// When it was archived.
    pub finished_at: DateTime<Utc>,
    /// The trace context of the code that enqueued it, if it gave one.
    #[serde(default)]
    pub trace_context: Option<TraceContext>,
}

/// The largest page a listing returns.
pub const MAX_PAGE_SIZE: u32 = 1_000;

/// Which history rows to list, newest (highest id) first, keyset-paged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryFilter {
    /// Only this queue.
    pub queue: Option<QueueName>,
    /// Only this final status.
    pub status: Option<FinalStatus>,
    /// Only ids strictly below this one: the `next` of the previous page.
    pub before: Option<JobId>,
    /// Rows per page, `1..=MAX_PAGE_SIZE`.
    pub limit: u32,
}

impl Default for HistoryFilter {
    fn default() -> Self {
        Self {
            queue: None,
            status: None,
            before: None,
            limit: 100,
        }
    }
}

impl HistoryFilter {
    /// Rejects a limit of 0 or above [`MAX_PAGE_SIZE`].
    pub fn validate(&self) -> Result<()> {
        validate_limit("limit", self.limit, MAX_PAGE_SIZE)
    }
}

/// One page of history.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPage {
    /// Rows, highest id first.
    pub records: Vec<HistoryRecord>,
    /// Pass as `before` to get the next page; `None` on the last page.
    pub next: Option<JobId>,
}

impl HistoryPage {
    /// A page from `records` fetched with one row more than `limit`: the
    /// extra row, if present, only tells that another page follows.
    pub fn from_overfetch(mut records: Vec<HistoryRecord>, limit: u32) -> Self {
        let limit = limit as usize;
        let next = if records.len() > limit {
            records.truncate(limit);
            records.last().map(|r| r.id)
        } else {
            None
        };
        Self { records, next }
    }
}

/// The largest number of rows one prune or reclaim call touches.
pub const MAX_BATCH: u32 = 10_000;

/// Which finished jobs to delete from history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneRequest {
    /// Delete rows whose `finished_at` is older than now minus this.
    pub older_than: Duration,
    /// Only rows with this status; all statuses when `None`.
    pub status: Option<FinalStatus>,
    /// At most this many rows in one call, `1..=MAX_BATCH`.
    pub limit: u32,
}

impl PruneRequest {
    /// Rejects a retention above 100 years or a bad limit.
    pub fn validate(&self) -> Result<()> {
        validate_duration("older_than", self.older_than, true)?;
        validate_limit("limit", self.limit, MAX_BATCH)
    }
}

/// Rejects `value` outside `1..=max`.
pub fn validate_limit(field: &'static str, value: u32, max: u32) -> Result<()> {
    if !(1..=max).contains(&value) {
        return Err(QueueError::invalid(
            field,
            format!("is {value}, it must be between 1 and {max}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::FinalStatus;

    #[test]
    fn every_final_status_is_listed_once_and_reads_back() {
        for status in FinalStatus::ALL {
            // Exhaustive: a new status stops this compiling until it is
            // given its place here and in `ALL`.
            let position = match status {
                FinalStatus::Completed => 0,
                FinalStatus::DeadLetter => 1,
                FinalStatus::Discarded => 2,
                FinalStatus::Cancelled => 3,
            };
            assert_eq!(FinalStatus::ALL[position], status);
            assert_eq!(status.as_str().parse::<FinalStatus>().ok(), Some(status));
        }
    }
}
