//! Periodic fires: each fire time of a schedule enqueues one job, however
//! many workers try, through the `queue_schedule` row of the schedule.

use chrono::{DateTime, Utc};
use queue_core::backend::stored;
use queue_core::{EnqueueOutcome, PeriodicFire, Result, ScheduleName, ScheduleRecord};
use sqlx::Row;

use crate::error::{Failure, retrying};
use crate::{PgStorage, interpret_error};

impl PgStorage {
    /// One transaction: record the fire (`ENQUEUE_PERIODIC`: only when no fire
    /// at or after its time is recorded), and enqueue its job only if it
    /// was recorded.
    pub(crate) async fn enqueue_periodic_pooled(
        &self,
        fire: &PeriodicFire,
    ) -> Result<Option<EnqueueOutcome>> {
        let valid = fire.validate()?;
        retrying(false, || async {
            let mut tx = self.pool.begin().await?;
            let recorded = self
                .on(&mut tx)
                .fetch_optional(
                    sqlx::query(self.sql.enqueue_periodic.clone())
                        .bind(self.now_override())
                        .bind(valid.schedule.as_str())
                        .bind(valid.fire_at)
                        .bind(valid.next_fire_at),
                )
                .await?;
            if recorded.is_none() {
                tx.rollback().await?;
                return Ok::<_, Failure>(None);
            }
            let outcome = self
                .enqueue_in(&mut tx, fire.job.clone())
                .await
                .map_err(Failure::Queue)?;
            tx.commit().await?;
            Ok(Some(outcome))
        })
        .await
    }

    pub(crate) async fn schedules_pooled(&self) -> Result<Vec<ScheduleRecord>> {
        let rows = retrying(true, || {
            self.db().fetch_all(sqlx::query(self.sql.schedules.clone()))
        })
        .await?;
        let mut records = rows
            .iter()
            .map(|row| {
                let name: String = row.try_get("schedule_name").map_err(interpret_error)?;
                Ok(ScheduleRecord {
                    schedule: stored("schedule_name", name, ScheduleName::new)?,
                    last_fire_at: row
                        .try_get::<DateTime<Utc>, _>("last_fire_at")
                        .map_err(interpret_error)?,
                    next_fire_at: row.try_get("next_fire_at").map_err(interpret_error)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        records.sort_by(|a, b| a.schedule.cmp(&b.schedule));
        Ok(records)
    }
}
