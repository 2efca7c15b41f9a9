//! The charts' samples: `job_sample_lag` and `job_sample_depth`
//! (migration 0019).

use std::time::Duration;

use queue_core::backend::{DepthRow, LagRow, SampleRows, corrupt, sample_rows, stored};
use queue_core::time::duration_micros;
use queue_core::{QueueName, QueueSample, Result, validate_window};
use sqlx::Row;
use sqlx::postgres::PgRow;

use crate::error::retrying;
use crate::{PgStorage, interpret_error};

impl PgStorage {
    /// `RECORD_SAMPLES`: every row of the batch in one statement, so a
    /// batch is recorded whole or not at all.
    pub(crate) async fn record_samples_pooled(&self, samples: &[QueueSample]) -> Result<()> {
        let rows = sample_rows(samples)?;
        if rows.lags.is_empty() && rows.depths.is_empty() {
            return Ok(());
        }
        let lag_minutes: Vec<_> = rows.lags.iter().map(|r| r.minute).collect();
        let lag_queues: Vec<&str> = rows.lags.iter().map(|r| r.queue.as_str()).collect();
        let buckets: Vec<i16> = rows.lags.iter().map(|r| i16::from(r.bucket)).collect();
        let jobs: Vec<i64> = rows.lags.iter().map(|r| r.jobs).collect();
        let depth_minutes: Vec<_> = rows.depths.iter().map(|r| r.minute).collect();
        let depth_queues: Vec<&str> = rows.depths.iter().map(|r| r.queue.as_str()).collect();
        let pending: Vec<i64> = rows.depths.iter().map(|r| r.pending).collect();
        let scheduled: Vec<i64> = rows.depths.iter().map(|r| r.scheduled).collect();
        let running: Vec<i64> = rows.depths.iter().map(|r| r.running).collect();
        // Not idempotent (lags add up): retried only where the statement
        // surely did not commit.
        retrying(false, || {
            self.db().execute(
                sqlx::query(self.sql.record_samples.clone())
                    .bind(&lag_minutes)
                    .bind(&lag_queues)
                    .bind(&buckets)
                    .bind(&jobs)
                    .bind(&depth_minutes)
                    .bind(&depth_queues)
                    .bind(&pending)
                    .bind(&scheduled)
                    .bind(&running)
                    .bind(self.now_override()),
            )
        })
        .await?;
        Ok(())
    }

    /// `SAMPLES`: the window's rows, merged into samples.
    pub(crate) async fn samples_pooled(&self, window: Duration) -> Result<Vec<QueueSample>> {
        validate_window(window)?;
        let rows = retrying(true, || {
            self.read_db().fetch_all(
                sqlx::query(self.sql.samples.clone())
                    .bind(self.now_override())
                    .bind(duration_micros(window)),
            )
        })
        .await?;
        let mut read = SampleRows::default();
        for row in &rows {
            sample_row(row, &mut read)?;
        }
        Ok(read.into_samples())
    }
}

/// One row of `SAMPLES`: a sample's lags when `buckets` is set, else its
/// depth.
fn sample_row(row: &PgRow, into: &mut SampleRows) -> Result<()> {
    let name: String = row.try_get("queue_name").map_err(interpret_error)?;
    let queue = stored("queue_name", name, QueueName::new)?;
    let minute = row.try_get("minute").map_err(interpret_error)?;
    let count = |column: &str| row.try_get::<i64, _>(column).map_err(interpret_error);
    match row
        .try_get::<Option<Vec<i16>>, _>("buckets")
        .map_err(interpret_error)?
    {
        Some(buckets) => {
            let jobs: Vec<i64> = row.try_get("jobs").map_err(interpret_error)?;
            if jobs.len() != buckets.len() {
                return Err(corrupt("job_sample_lag", format!("{buckets:?} {jobs:?}")));
            }
            for (bucket, jobs) in buckets.into_iter().zip(jobs) {
                into.lags.push(LagRow {
                    queue: queue.clone(),
                    minute,
                    bucket: u8::try_from(bucket).map_err(|_| corrupt("bucket", bucket))?,
                    jobs,
                });
            }
        }
        None => into.depths.push(DepthRow {
            queue,
            minute,
            pending: count("pending")?,
            scheduled: count("scheduled")?,
            running: count("running")?,
        }),
    }
    Ok(())
}
