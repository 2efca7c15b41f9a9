//! A row of a backend's `job_links` read as a [`JobLink`]: the other job's
//! live columns, or its history row's, or neither (pruned).

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::{FinalStatus, JobId, JobLink, LinkStatus, QueueName, Result, state_of};

use super::{corrupt, stored};

/// The columns of a linked job's live row that its state derives from.
#[derive(Debug, Clone)]
pub struct LiveLink {
    /// `queue_name`.
    pub queue: String,
    /// `available_at`.
    pub available_at: DateTime<Utc>,
    /// `lease_until`.
    pub lease_until: Option<DateTime<Utc>>,
    /// `attempts`.
    pub attempts: i64,
    /// `max_attempts`.
    pub max_attempts: i64,
}

/// The columns of a linked job's history row.
#[derive(Debug, Clone)]
pub struct FinishedLink {
    /// `queue_name`.
    pub queue: String,
    /// `status_final`, as stored.
    pub status: String,
    /// `result`.
    pub result: Option<Value>,
}

/// The link to job `id` from what a backend read of it at `now`: its live
/// row if it has one, else its history row, else [`LinkStatus::Gone`].
///
/// # Errors
/// [`corrupt`] for a queue name or status the queue never writes.
pub fn job_link(
    id: JobId,
    live: Option<LiveLink>,
    finished: Option<FinishedLink>,
    now: DateTime<Utc>,
) -> Result<JobLink> {
    if let Some(live) = live {
        return Ok(JobLink {
            id,
            queue: Some(stored("queue_name", live.queue, QueueName::new)?),
            status: LinkStatus::Live(state_of(
                live.available_at,
                live.lease_until,
                live.attempts,
                live.max_attempts,
                now,
            )),
            result: None,
        });
    }
    if let Some(finished) = finished {
        let status: FinalStatus = finished
            .status
            .parse()
            .map_err(|e| corrupt("status_final", e))?;
        return Ok(JobLink {
            id,
            queue: Some(stored("queue_name", finished.queue, QueueName::new)?),
            status: LinkStatus::Finished(status),
            result: finished.result,
        });
    }
    Ok(JobLink {
        id,
        queue: None,
        status: LinkStatus::Gone,
        result: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::JobState;

    #[test]
    fn a_live_row_wins_then_history_then_gone() {
        let now = Utc::now();
        let live = LiveLink {
            queue: "q".into(),
            available_at: crate::waiting_at(),
            lease_until: None,
            attempts: 0,
            max_attempts: 3,
        };
        let done = FinishedLink {
            queue: "q".into(),
            status: "completed".into(),
            result: Some(serde_json::json!(1)),
        };
        let link = job_link(JobId(1), Some(live), Some(done.clone()), now).unwrap();
        assert_eq!(link.status, LinkStatus::Live(JobState::Waiting));
        let link = job_link(JobId(1), None, Some(done), now).unwrap();
        assert_eq!(link.status, LinkStatus::Finished(FinalStatus::Completed));
        assert_eq!(link.result, Some(serde_json::json!(1)));
        let link = job_link(JobId(1), None, None, now).unwrap();
        assert_eq!((link.status, link.queue), (LinkStatus::Gone, None));
        let bad = FinishedLink {
            queue: "q".into(),
            status: "lost".into(),
            result: None,
        };
        assert!(job_link(JobId(1), None, Some(bad), now).is_err());
    }
}
