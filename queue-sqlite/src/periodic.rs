//! Periodic fires: a schedule's fire recorded in `queue_schedule` and its
//! job enqueued in one write transaction, only when no fire at or after
//! it was recorded; and the listing of schedules.

use queue_core::backend::stored;
use queue_core::backend::stored_instant;
use queue_core::{EnqueueOutcome, PeriodicFire, Result, ScheduleName, ScheduleRecord};
use sqlx::Row;

use crate::enqueue::insert_all;
use crate::{SqliteStorage, interpret_error, sql};

impl SqliteStorage {
    pub(crate) async fn enqueue_periodic_pooled(
        &self,
        fire: &PeriodicFire,
    ) -> Result<Option<EnqueueOutcome>> {
        let fire = fire.validate()?;
        let jobs = [fire.job];
        let outcome = write_tx!(self, |conn, now| async {
            let recorded = sqlx::query(sql::ENQUEUE_PERIODIC)
                .bind(fire.schedule.as_str())
                .bind(fire.fire_at.timestamp_micros())
                .bind(fire.next_fire_at.map(|at| at.timestamp_micros()))
                .execute(&mut *conn)
                .await?;
            if recorded.rows_affected() == 0 {
                return Ok::<_, sqlx::Error>(None);
            }
            Ok(insert_all(conn, now, &jobs).await?.pop())
        })?;
        if outcome.as_ref().is_some_and(|o| !o.existed) {
            self.signal(&jobs[0].queue);
        }
        Ok(outcome)
    }

    pub(crate) async fn schedules_pooled(&self) -> Result<Vec<ScheduleRecord>> {
        let rows = sqlx::query(sql::SCHEDULES)
            .fetch_all(&self.pool)
            .await
            .map_err(interpret_error)?;
        rows.iter()
            .map(|row| {
                let name: String = row.try_get("schedule_name").map_err(interpret_error)?;
                let last: i64 = row.try_get("last_fire_at").map_err(interpret_error)?;
                let next: Option<i64> = row.try_get("next_fire_at").map_err(interpret_error)?;
                Ok(ScheduleRecord {
                    schedule: stored("schedule_name", name, ScheduleName::new)?,
                    last_fire_at: stored_instant("time", last)?,
                    next_fire_at: next
                        .map(|micros| stored_instant("time", micros))
                        .transpose()?,
                })
            })
            .collect()
    }
}
