//! A live job as stored in `job_queue`, and the lease that proves who holds it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    GroupKey, JobId, JobState, QueueName, TraceContext, UniqueKey, WorkerId, derive_state,
};

/// One row of `job_queue`: a job that has not finished yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// The job's identity.
    pub id: JobId,
    /// The queue it belongs to.
    pub queue: QueueName,
    /// Higher runs first.
    pub priority: i32,
    /// Idempotency key within the queue, if any.
    pub unique_key: Option<UniqueKey>,
    /// The group whose concurrency limit the job counts against, if any
    /// ([`crate::NewJob::group_key`]).
    #[serde(default)]
    pub group_key: Option<GroupKey>,
    /// The caller's payload.
    pub payload: Value,
    /// Claims so far, including a running one.
    pub attempts: u32,
    /// Claims allowed before the job becomes a dead letter.
    pub max_attempts: u32,
    /// Times a handler snoozed it ([`crate::Storage::snooze`]): each one
    /// gave its claim back, so it is not counted in `attempts`.
    #[serde(default)]
    pub snoozes: u32,
    /// The earliest time the job may be claimed.
    pub available_at: DateTime<Utc>,
    /// When the current lease ends; `None` when nobody holds the job.
    pub lease_until: Option<DateTime<Utc>>,
    /// The worker holding the current lease.
    pub locked_by: Option<WorkerId>,
    /// When the job was first claimed (`started_at` in history).
    pub first_locked_at: Option<DateTime<Utc>>,
    /// The error of the last failed attempt.
    pub last_error: Option<Value>,
    /// When the job was enqueued.
    pub created_at: DateTime<Utc>,
    /// When the row last changed.
    pub updated_at: DateTime<Utc>,
    /// The trace context of the code that enqueued it, if it gave one
    /// ([`crate::NewJob::trace_context`]).
    #[serde(default)]
    pub trace_context: Option<TraceContext>,
}

impl Job {
    /// The job's state at `now` (see [`derive_state`]).
    pub fn state(&self, now: DateTime<Utc>) -> JobState {
        derive_state(self, now)
    }

    /// The lease the current holder must present, if the job is held.
    pub fn lease(&self) -> Option<Lease> {
        match (&self.lease_until, &self.locked_by) {
            (Some(_), Some(worker_id)) => Some(Lease {
                job_id: self.id,
                worker_id: worker_id.clone(),
                attempt: self.attempts,
            }),
            _ => None,
        }
    }
}

/// Proof of holding a job: ack, nack, heartbeat and release succeed only
/// while all three parts still match the live row.
///
/// The attempt number makes a lease unique even when the same worker id
/// claims the same job twice (after its first lease expired).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Lease {
    /// The job held.
    pub job_id: JobId,
    /// The holder.
    pub worker_id: WorkerId,
    /// The attempt this lease was granted for (1 for the first claim).
    pub attempt: u32,
}
