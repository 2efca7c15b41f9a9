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
        if !job.dependencies.is_empty() || job.joins.is_some() {
            // A fire is enqueued on its own: there is no batch to point
            // into, and a schedule's every fire waiting on the same jobs
            // would be a workflow no schedule means.
            return Err(crate::QueueError::invalid(
                "job",
                "a periodic job can neither depend on jobs nor join a batch",
            ));
        }
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

#[cfg(test)]
mod workflow_tests {
    use super::*;
    use crate::{JobId, NewJob};

    #[test]
    fn a_fire_that_depends_or_joins_is_refused() {
        for job in [
            NewJob::new("q", serde_json::json!(1)).depends_on(JobId(1)),
            NewJob::new("q", serde_json::json!(1)).joins(JobId(1)),
        ] {
            let fire = PeriodicFire {
                schedule: ScheduleName::new("s").unwrap(),
                fire_at: chrono::Utc::now(),
                next_fire_at: None,
                job,
            };
            match fire.validate() {
                Err(crate::QueueError::InvalidInput { field, .. }) => assert_eq!(field, "job"),
                other => panic!("expected InvalidInput(job), got {other:?}"),
            }
        }
    }
}
