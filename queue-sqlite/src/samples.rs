//! The charts' samples: `job_sample_lag` and `job_sample_depth`
//! (migration 0009).

use std::time::Duration;

use queue_core::backend::{
    DepthRow, SampleRows, corrupt, sample_rows, samples_expire_before, stored, stored_instant,
};
use queue_core::time::duration_micros;
use queue_core::{QueueName, QueueSample, Result, validate_window};
use sqlx::Row;

use crate::{SqliteStorage, interpret_error, sql};

impl SqliteStorage {
    /// The batch's rows and the prune of minutes past 7 days in one write
    /// transaction: recorded whole or not at all.
    pub(crate) async fn record_samples_pooled(&self, samples: &[QueueSample]) -> Result<()> {
        let rows = sample_rows(samples)?;
        if rows.lags.is_empty() && rows.depths.is_empty() {
            return Ok(());
        }
        write_tx!(self, |conn, now| async {
            for row in &rows.lags {
                sqlx::query(sql::RECORD_LAG)
                    .bind(row.minute.timestamp_micros())
                    .bind(row.queue.as_str())
                    .bind(i64::from(row.bucket))
                    .bind(row.jobs)
                    .execute(&mut *conn)
                    .await?;
            }
            for row in &rows.depths {
                sqlx::query(sql::RECORD_DEPTH)
                    .bind(row.minute.timestamp_micros())
                    .bind(row.queue.as_str())
                    .bind(row.pending)
                    .bind(row.scheduled)
                    .bind(row.running)
                    .execute(&mut *conn)
                    .await?;
            }
            let expired = chrono::DateTime::from_timestamp_micros(now).map_or(i64::MIN, |now| {
                samples_expire_before(now).timestamp_micros()
            });
            for prune in [sql::PRUNE_LAG_SAMPLES, sql::PRUNE_DEPTH_SAMPLES] {
                sqlx::query(prune).bind(expired).execute(&mut *conn).await?;
            }
            Ok::<_, sqlx::Error>(())
        })
    }

    /// `SAMPLES`: the window's rows, merged into samples.
    pub(crate) async fn samples_pooled(&self, window: Duration) -> Result<Vec<QueueSample>> {
        validate_window(window)?;
        let now = self.now_micros();
        let found = sqlx::query(sql::SAMPLES)
            .bind(now.saturating_sub(duration_micros(window)))
            .bind(now)
            .fetch_all(&self.pool)
            .await
            .map_err(interpret_error)?;
        let mut read = SampleRows::default();
        for row in &found {
            let get = |column: &str| {
                row.try_get::<Option<i64>, _>(column)
                    .map_err(interpret_error)
            };
            let name: String = row.try_get("queue_name").map_err(interpret_error)?;
            let queue = stored("queue_name", name, QueueName::new)?;
            let minute = stored_instant("minute", row.try_get("minute").map_err(interpret_error)?)?;
            let lags: Option<String> = row.try_get("lags").map_err(interpret_error)?;
            match lags {
                Some(text) => read
                    .push_lag_text(&queue, minute, &text)
                    .ok_or_else(|| corrupt("job_sample_lag", text))?,
                None => read.depths.push(DepthRow {
                    queue,
                    minute,
                    pending: get("pending")?.unwrap_or_default(),
                    scheduled: get("scheduled")?.unwrap_or_default(),
                    running: get("running")?.unwrap_or_default(),
                }),
            }
        }
        Ok(read.into_samples())
    }
}
