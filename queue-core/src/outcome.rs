//! What enqueue, nack, ack and reclaim report back.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::time::validate_duration;
use crate::{JobId, Lease, Result};

/// The result of enqueueing one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EnqueueOutcome {
    /// The new job's id, or the live job's id when the unique key existed.
    pub id: JobId,
    /// True when a live job with the same unique key in the same queue was
    /// found and nothing was written.
    pub existed: bool,
}

/// What a failed attempt asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Retry after this delay from the storage's now, if attempts remain;
    /// usually [`crate::Backoff::delay`] of the lease's attempt.
    After(Duration),
    /// Do not retry: dead-letter the job now, whatever attempts remain.
    Never,
}

impl Retry {
    /// Rejects a delay above 100 years.
    pub fn validate(&self) -> Result<()> {
        match self {
            Self::After(delay) => validate_duration("retry_delay", *delay, true),
            Self::Never => Ok(()),
        }
    }
}

/// The result of a nack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NackOutcome {
    /// The job was released and becomes available again at `at`.
    Retrying {
        /// When the next attempt may start.
        at: DateTime<Utc>,
    },
    /// The job was moved to history as a dead letter.
    DeadLettered,
}

/// One completion in a batched ack.
#[derive(Debug, Clone, PartialEq)]
pub struct Ack {
    /// The lease being completed.
    pub lease: Lease,
    /// The handler's result, stored in history.
    pub result: Option<Value>,
}

/// What one reclaim pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ReclaimOutcome {
    /// Stalled jobs with attempts left, returned to pending.
    pub requeued: u64,
    /// Stalled or exhausted jobs with no attempts left, moved to dead letters.
    pub dead_lettered: u64,
}

impl ReclaimOutcome {
    /// Jobs touched in total.
    pub fn total(&self) -> u64 {
        self.requeued + self.dead_lettered
    }
}
