//! Stats, single lookups and history listings.

use chrono::{DateTime, Utc};
use queue_core::backend::stored;
use queue_core::time::duration_micros;
use queue_core::{
    HistoryFilter, HistoryPage, HistoryRecord, Job, JobFilter, JobId, JobPage, QueueName,
    QueueStats, Result, Throughput, validate_count_cap, validate_window,
};
use sqlx::Row;
use sqlx::postgres::PgRow;
use sqlx::postgres::{PgArguments, Postgres};
use sqlx::query::Query;

use crate::error::{Failure, interpret_failure, retrying};
use crate::{PgStorage, rows};

/// A stats count cap, validated, as the statement's `$2`.
pub(crate) fn stats_limit(cap: u64) -> Result<i64> {
    validate_count_cap(cap)?;
    Ok(i64::try_from(cap).unwrap_or(i64::MAX / 2).min(i64::MAX / 2))
}

fn stats_row(row: &PgRow, cap: u64) -> Result<QueueStats, Failure> {
    let count = |column: &str| -> Result<u64, Failure> {
        Ok(u64::try_from(row.try_get::<i64, _>(column)?).unwrap_or_default())
    };
    let name: String = row.try_get("queue_name")?;
    let queue = stored("queue_name", name, QueueName::new)?;
    let now: DateTime<Utc> = row.try_get("now")?;
    let oldest: Option<DateTime<Utc>> = row.try_get("oldest_pending")?;
    Ok(QueueStats {
        queue,
        paused: row.try_get("paused")?,
        pending: count("pending")?,
        scheduled: count("scheduled")?,
        running: count("running")?,
        stalled: count("stalled")?,
        exhausted: count("exhausted")?,
        waiting: count("waiting")?,
        oldest_pending_age: oldest.map(|at| (now - at).to_std().unwrap_or_default()),
        cap: Some(cap),
    })
}

impl PgStorage {
    pub(crate) async fn now_pooled(&self) -> Result<DateTime<Utc>> {
        let row = retrying(true, || {
            self.db()
                .fetch_one(sqlx::query(self.sql.now.clone()).bind(self.now_override()))
        })
        .await?;
        row.try_get(0).map_err(crate::interpret_error)
    }

    pub(crate) async fn next_due_pooled(
        &self,
        queues: &[queue_core::QueueName],
    ) -> Result<Option<std::time::Duration>> {
        let names: Vec<&str> = queues.iter().map(|q| q.as_str()).collect();
        let row = retrying(true, || {
            self.db().fetch_one(
                sqlx::query(self.sql.next_due.clone())
                    .bind(self.now_override())
                    .bind(&names),
            )
        })
        .await?;
        let micros: Option<i64> = row.try_get(0).map_err(crate::interpret_error)?;
        Ok(micros.map(|m| std::time::Duration::from_micros(u64::try_from(m).unwrap_or(0))))
    }

    /// The stats statement (or an `EXPLAIN` of it) with its parameters
    /// bound: the clock, and the count cap as `limit` ([`stats_limit`]).
    pub(crate) fn bind_stats<'q>(
        &self,
        statement: impl sqlx::SqlSafeStr,
        limit: i64,
    ) -> Query<'q, Postgres, PgArguments> {
        sqlx::query(statement).bind(self.now_override()).bind(limit)
    }

    pub(crate) async fn stats_pooled(&self, cap: u64) -> Result<Vec<QueueStats>> {
        let limit = stats_limit(cap)?;
        let rows = retrying(true, || async {
            let mut tx = self
                .read_pool
                .as_ref()
                .unwrap_or(&self.pool)
                .begin()
                .await?;
            self.on(&mut tx)
                .execute(sqlx::raw_sql(crate::sql::STATS_SETTINGS))
                .await?;
            let rows = self
                .on(&mut tx)
                .fetch_all(self.bind_stats(self.sql.stats.clone(), limit))
                .await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(rows)
        })
        .await?;
        let mut stats = rows
            .iter()
            .map(|row| stats_row(row, cap))
            .collect::<Result<Vec<_>, _>>()
            .map_err(interpret_failure)?;
        // Byte order of the names, whatever the database's collation.
        stats.sort_by(|a, b| a.queue.cmp(&b.queue));
        Ok(stats)
    }

    pub(crate) async fn get_job_pooled(&self, id: JobId) -> Result<Option<Job>> {
        let row = retrying(true, || {
            self.read_db()
                .fetch_optional(sqlx::query(self.sql.get_job.clone()).bind(id.get()))
        })
        .await?;
        row.as_ref().map(rows::job).transpose()
    }

    pub(crate) async fn get_history_pooled(&self, id: JobId) -> Result<Option<HistoryRecord>> {
        let row = retrying(true, || {
            self.read_db()
                .fetch_optional(sqlx::query(self.sql.get_history.clone()).bind(id.get()))
        })
        .await?;
        row.as_ref().map(rows::record).transpose()
    }

    pub(crate) async fn list_history_pooled(&self, filter: &HistoryFilter) -> Result<HistoryPage> {
        filter.validate()?;
        let rows = retrying(true, || {
            self.read_db().fetch_all(
                sqlx::query(self.sql.list_history_for(filter).clone())
                    .bind(filter.queue.as_ref().map(|q| q.as_str()))
                    .bind(filter.status.map(|s| s.as_str()))
                    .bind(filter.before.map(JobId::get))
                    .bind(i64::from(filter.limit) + 1),
            )
        })
        .await?;
        let records = rows.iter().map(rows::record).collect::<Result<Vec<_>>>()?;
        Ok(HistoryPage::from_overfetch(records, filter.limit))
    }

    pub(crate) async fn list_jobs_pooled(&self, filter: &JobFilter) -> Result<JobPage> {
        filter.validate()?;
        let statement = self.sql.list_jobs_for(filter);
        let rows = retrying(true, || {
            let query = sqlx::query(statement.clone());
            self.read_db().fetch_all(bind_job_filter(
                query,
                self.now_override(),
                filter,
                filter.limit + 1,
            ))
        })
        .await?;
        let jobs = rows.iter().map(rows::job).collect::<Result<Vec<_>>>()?;
        Ok(JobPage::from_overfetch(jobs, filter.limit))
    }

    pub(crate) async fn throughput_pooled(
        &self,
        window: std::time::Duration,
    ) -> Result<Vec<Throughput>> {
        validate_window(window)?;
        let rows = retrying(true, || {
            self.read_db().fetch_all(
                sqlx::query(self.sql.throughput.clone())
                    .bind(self.now_override())
                    .bind(duration_micros(window)),
            )
        })
        .await?;
        let mut series = rows
            .iter()
            .map(throughput_row)
            .collect::<Result<Vec<_>, Failure>>()
            .map_err(interpret_failure)?;
        // Byte order of the names, whatever the database's collation.
        series.sort_by(|a, b| (&a.queue, a.minute).cmp(&(&b.queue, b.minute)));
        Ok(series)
    }
}

/// Binds a [`JobFilter`] as the statements' `$1`-`$7` (see `sql.rs`'s
/// `JOB_FILTER`), with `limit` rows at most.
pub(crate) fn bind_job_filter<'q>(
    query: Query<'q, Postgres, PgArguments>,
    now: Option<DateTime<Utc>>,
    filter: &'q JobFilter,
    limit: u32,
) -> Query<'q, Postgres, PgArguments> {
    query
        .bind(now)
        .bind(filter.queue.as_ref().map(|q| q.as_str()))
        .bind(filter.state.map(|s| s.as_str()))
        .bind(filter.id.map(JobId::get))
        .bind(filter.unique_key.as_ref().map(|k| k.as_str()))
        .bind(filter.before.map(JobId::get))
        .bind(i64::from(limit))
}

fn throughput_row(row: &PgRow) -> Result<Throughput, Failure> {
    let name: String = row.try_get("queue_name")?;
    let count = |column: &str| -> Result<u64, Failure> {
        Ok(u64::try_from(row.try_get::<i64, _>(column)?).unwrap_or_default())
    };
    Ok(Throughput {
        queue: stored("queue_name", name, QueueName::new)?,
        minute: row.try_get("minute")?,
        completed: count("completed")?,
        failed: count("failed")?,
    })
}
