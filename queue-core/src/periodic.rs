//! Periodic jobs: a fire of a schedule, enqueued at most once per fire
//! time across every process that tries.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::time::{truncate_to_micros, validate_instant};
use crate::{NewJob, Result, ScheduleName, ValidJob};

/// One fire of a schedule: the job to enqueue for it, and the schedule's
/// next fire time (for listings).
#[derive(Debug, Clone)]
pub struct PeriodicFire {
    /// The schedule that fired.
    pub schedule: ScheduleName,
    /// The fire time; it identifies the fire (microsecond-exact).
    pub fire_at: DateTime<Utc>,
    /// The fire after this one, if the schedule has one.
    pub next_fire_at: Option<DateTime<Utc>>,
    /// The job the fire enqueues.
    pub job: NewJob,
}

impl PeriodicFire {
    /// Checks every field and returns the form backends write.
    ///
    /// # Errors
    /// [`crate::QueueError::InvalidInput`]: the job's own fields (see
    /// [`NewJob::validate`]), or `fire_at` / `next_fire_at` outside
    /// 1970 ..= 9999.
    pub fn validate(&self) -> Result<ValidFire> {
        let job = self.job.validate()?;
        validate_instant("fire_at", self.fire_at)?;
        if let Some(next) = self.next_fire_at {
            validate_instant("next_fire_at", next)?;
        }
        Ok(ValidFire {
            schedule: self.schedule.clone(),
            fire_at: truncate_to_micros(self.fire_at),
            next_fire_at: self.next_fire_at.map(truncate_to_micros),
            job,
        })
    }
}

/// A [`PeriodicFire`] whose every field passed validation.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidFire {
    /// The schedule that fired.
    pub schedule: ScheduleName,
    /// The fire time, microsecond-exact.
    pub fire_at: DateTime<Utc>,
    /// The next fire time, microsecond-exact.
    pub next_fire_at: Option<DateTime<Utc>>,
    /// The job to enqueue.
    pub job: ValidJob,
}

/// What a storage records of a schedule: its latest fire and the next one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleRecord {
    /// The schedule.
    pub schedule: ScheduleName,
    /// The latest fire time that enqueued a job.
    pub last_fire_at: DateTime<Utc>,
    /// The next fire time, as the latest fire reported it.
    pub next_fire_at: Option<DateTime<Utc>>,
}
