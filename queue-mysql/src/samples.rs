//! The charts' samples: `job_sample_lag` and `job_sample_depth`
//! (migration 0012).

use std::time::Duration;

use chrono::NaiveDateTime;
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Datetime, Nullable, Text};
use diesel_async::{AsyncConnection, RunQueryDsl, SimpleAsyncConnection};
use queue_core::backend::{
    DepthRow, LagRow, SampleRows, corrupt, sample_rows, samples_expire_before, stored,
};
use queue_core::time::to_time_delta;
use queue_core::{QueueName, QueueSample, Result, validate_window};

use crate::MySqlStorage;
use crate::bind::{Param, naive, query};
use crate::rows::utc;
use crate::sql::{
    PRUNE_DEPTH_SAMPLES, PRUNE_LAG_SAMPLES, SAMPLES, SAMPLES_SESSION, record_depths, record_lags,
};

/// Rows per INSERT: 1,000 lag rows are 4,000 placeholders, far below the
/// 65,535 a prepared statement takes.
const ROWS_PER_INSERT: usize = 1_000;

#[derive(QueryableByName)]
struct SampleRow {
    #[diesel(sql_type = Text)]
    queue_name: String,
    #[diesel(sql_type = Datetime)]
    minute: NaiveDateTime,
    #[diesel(sql_type = Nullable<Text>)]
    lags: Option<String>,
    #[diesel(sql_type = Nullable<BigInt>)]
    pending: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    scheduled: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    running: Option<i64>,
}

impl MySqlStorage {
    /// The batch's rows in one transaction (recorded whole or not at all),
    /// then, committed on its own, the prune of minutes past 7 days.
    pub(crate) async fn record_samples_pooled(&self, samples: &[QueueSample]) -> Result<()> {
        let rows = sample_rows(samples)?;
        if rows.lags.is_empty() && rows.depths.is_empty() {
            return Ok(());
        }
        let lags: Vec<&[LagRow]> = rows.lags.chunks(ROWS_PER_INSERT).collect();
        let depths: Vec<&[DepthRow]> = rows.depths.chunks(ROWS_PER_INSERT).collect();
        // Not idempotent (lags add up): retried only where the transaction
        // surely did not commit.
        self.retrying(false, || async {
            let mut conn = self.connection().await?;
            let guard = self.guard(&mut conn).await?;
            let outcome = conn
                .transaction(async |conn| {
                    guard.open(conn).await?;
                    for chunk in &lags {
                        let params = chunk.iter().flat_map(|row| {
                            [
                                Param::Time(naive(row.minute)),
                                Param::Text(row.queue.as_str().to_owned()),
                                Param::Int(i64::from(row.bucket)),
                                Param::Int(row.jobs),
                            ]
                        });
                        query(&record_lags(chunk.len()), params.collect())
                            .execute(conn)
                            .await?;
                    }
                    for chunk in &depths {
                        let params = chunk.iter().flat_map(|row| {
                            [
                                Param::Time(naive(row.minute)),
                                Param::Text(row.queue.as_str().to_owned()),
                                Param::Int(row.pending),
                                Param::Int(row.scheduled),
                                Param::Int(row.running),
                            ]
                        });
                        query(&record_depths(chunk.len()), params.collect())
                            .execute(conn)
                            .await?;
                    }
                    guard.close(conn).await
                })
                .await;
            guard.finish(conn, outcome).await
        })
        .await?;
        self.retrying(true, || async {
            let mut conn = self.connection().await?;
            let now = utc(self.resolve_now(&mut conn).await?);
            let expired = vec![Param::Time(naive(samples_expire_before(now)))];
            query(PRUNE_LAG_SAMPLES, expired.clone())
                .execute(&mut conn)
                .await?;
            query(PRUNE_DEPTH_SAMPLES, expired)
                .execute(&mut conn)
                .await?;
            Ok(())
        })
        .await
    }

    /// `SAMPLES`: the window's rows, merged into samples.
    pub(crate) async fn samples_pooled(&self, window: Duration) -> Result<Vec<QueueSample>> {
        validate_window(window)?;
        let rows = self
            .retrying(true, || async {
                let mut conn = self.connection().await?;
                let now = self.resolve_now(&mut conn).await?;
                let since = now - to_time_delta(window);
                let bounds = [Param::Time(since), Param::Time(now)];
                let params = bounds.iter().chain(&bounds).cloned().collect();
                conn.batch_execute(SAMPLES_SESSION).await?;
                Ok(query(SAMPLES, params).load::<SampleRow>(&mut conn).await?)
            })
            .await?;
        let mut read = SampleRows::default();
        for row in rows {
            let queue = stored("queue_name", row.queue_name, QueueName::new)?;
            let minute = utc(row.minute);
            let count = |n: Option<i64>| n.unwrap_or_default();
            match row.lags {
                Some(text) => read
                    .push_lag_text(&queue, minute, &text)
                    .ok_or_else(|| corrupt("job_sample_lag", text))?,
                None => read.depths.push(DepthRow {
                    queue,
                    minute,
                    pending: count(row.pending),
                    scheduled: count(row.scheduled),
                    running: count(row.running),
                }),
            }
        }
        Ok(read.into_samples())
    }
}
