//! Reading: stats, one job, history listings, the next due time.

use std::time::Duration;

use queue_core::backend::{stored, stored_count, stored_instant};
use queue_core::time::duration_micros;
use queue_core::{
    HistoryFilter, HistoryPage, HistoryRecord, Job, JobFilter, JobId, JobPage, JobState, QueueName,
    QueueStats, Result, Throughput, validate_window,
};
use sqlx::Row;

use crate::{SqliteStorage, interpret_error, listing, rows, sql};

impl SqliteStorage {
    /// Pending and scheduled counted up to `cap`, the leased and
    /// exhausted jobs exactly (they are few) and then capped: see
    /// [`sql::STATS`].
    pub(crate) async fn stats_pooled(&self, cap: u64) -> Result<Vec<QueueStats>> {
        queue_core::validate_count_cap(cap)?;
        let now = self.now_micros();
        let found = sqlx::query(sql::STATS)
            .bind(now)
            .bind(i64::try_from(cap).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await
            .map_err(interpret_error)?;
        found
            .iter()
            .map(|row| {
                let get = |column: &str| -> Result<u64> {
                    let value: Option<i64> = row.try_get(column).map_err(interpret_error)?;
                    Ok(u64::try_from(value.unwrap_or(0)).unwrap_or(0))
                };
                let name: String = row.try_get("queue_name").map_err(interpret_error)?;
                let oldest: Option<i64> = row.try_get("oldest_pending").map_err(interpret_error)?;
                let mut stats = QueueStats::empty(QueueName::new(name)?);
                stats.paused = get("paused")? != 0;
                stats.pending = get("pending")?;
                stats.scheduled = get("scheduled")?;
                stats.running = get("running")?;
                stats.stalled = get("stalled")?;
                stats.exhausted = get("exhausted")?;
                stats.waiting = get("waiting")?;
                stats.oldest_pending_age = oldest.map(|at| micros_duration(now - at));
                Ok(stats.capped_at(cap))
            })
            .collect()
    }

    pub(crate) async fn job_links_pooled(&self, id: JobId) -> Result<queue_core::JobLinks> {
        let now = self.now_micros();
        let now = queue_core::backend::stored_instant("time", now)?;
        let mut conn = self.pool.acquire().await.map_err(interpret_error)?;
        crate::workflow::links(&mut conn, now, id).await
    }

    pub(crate) async fn get_job_pooled(&self, id: JobId) -> Result<Option<Job>> {
        let found = sqlx::query(sql::GET_JOB)
            .bind(id.get())
            .fetch_optional(&self.pool)
            .await
            .map_err(interpret_error)?;
        found.as_ref().map(rows::job).transpose()
    }

    pub(crate) async fn get_history_pooled(&self, id: JobId) -> Result<Option<HistoryRecord>> {
        let found = sqlx::query(sql::GET_HISTORY)
            .bind(id.get())
            .fetch_optional(&self.pool)
            .await
            .map_err(interpret_error)?;
        found.as_ref().map(rows::record).transpose()
    }

    pub(crate) async fn list_history_pooled(&self, filter: &HistoryFilter) -> Result<HistoryPage> {
        filter.validate()?;
        let statement = listing::list_history(filter);
        let found = bind_history_filter(sqlx::query(sqlx::AssertSqlSafe(statement)), filter)
            .fetch_all(&self.pool)
            .await
            .map_err(interpret_error)?;
        let records = found.iter().map(rows::record).collect::<Result<Vec<_>>>()?;
        Ok(HistoryPage::from_overfetch(records, filter.limit))
    }

    pub(crate) async fn next_due_pooled(&self, queues: &[QueueName]) -> Result<Option<Duration>> {
        let now = self.now_micros();
        let mut earliest: Option<i64> = None;
        for queue in queues {
            let due: Option<i64> = sqlx::query_scalar(sql::NEXT_DUE)
                .bind(now)
                .bind(queue.as_str())
                .fetch_one(&self.pool)
                .await
                .map_err(interpret_error)?;
            earliest = match (earliest, due) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        Ok(earliest.map(|at| micros_duration(at - now)))
    }

    pub(crate) async fn list_jobs_pooled(&self, filter: &JobFilter) -> Result<JobPage> {
        filter.validate()?;
        let now = self.now_micros();
        let statement = self.list_jobs_statement(now, filter).await?;
        let found = bind_job_filter(
            sqlx::query(sqlx::AssertSqlSafe(statement)),
            now,
            filter,
            filter.limit + 1,
        )
        .fetch_all(&self.pool)
        .await
        .map_err(interpret_error)?;
        let jobs = found.iter().map(rows::job).collect::<Result<Vec<_>>>()?;
        Ok(JobPage::from_overfetch(jobs, filter.limit))
    }

    /// The statement `list_jobs` runs for `filter` at `now`: scheduled
    /// jobs (of no id or unique key) sorted when at most
    /// [`listing::SCHEDULED_SORTED`], which one count of their index
    /// range tells; every other filter's from [`listing::list_jobs`].
    /// Both statements are right whatever the count: it only chooses the
    /// faster.
    pub(crate) async fn list_jobs_statement(&self, now: i64, filter: &JobFilter) -> Result<String> {
        let by_due = filter.id.is_none() && filter.unique_key.is_none();
        if by_due && filter.state == Some(JobState::Waiting) {
            return Ok(listing::scheduled_sorted(filter));
        }
        if !(by_due && filter.state == Some(JobState::Scheduled)) {
            return Ok(listing::list_jobs(filter));
        }
        let count: i64 = bind_job_filter(
            sqlx::query(sqlx::AssertSqlSafe(listing::scheduled_count(filter))),
            now,
            filter,
            filter.limit + 1,
        )
        .bind(listing::SCHEDULED_SORTED + 1)
        .fetch_one(&self.pool)
        .await
        .map_err(interpret_error)?
        .try_get(0)
        .map_err(interpret_error)?;
        Ok(if count <= listing::SCHEDULED_SORTED {
            listing::scheduled_sorted(filter)
        } else {
            listing::list_jobs(filter)
        })
    }

    pub(crate) async fn throughput_pooled(&self, window: Duration) -> Result<Vec<Throughput>> {
        validate_window(window)?;
        let now = self.now_micros();
        let found = sqlx::query(sql::THROUGHPUT)
            .bind(now.saturating_sub(duration_micros(window)))
            .bind(now)
            .fetch_all(&self.pool)
            .await
            .map_err(interpret_error)?;
        let mut series = Vec::with_capacity(found.len());
        for row in &found {
            let name: String = row.try_get("queue_name").map_err(interpret_error)?;
            let count = |column: &str| -> Result<u64> {
                let value: i64 = row.try_get(column).map_err(interpret_error)?;
                Ok(stored_count(column, value)?.into())
            };
            series.push(Throughput {
                queue: stored("queue_name", name, QueueName::new)?,
                minute: stored_instant("time", row.try_get("minute").map_err(interpret_error)?)?,
                completed: count("completed")?,
                failed: count("failed")?,
            });
        }
        // Byte order of the names, as on every backend.
        series.sort_by(|a, b| (&a.queue, a.minute).cmp(&(&b.queue, b.minute)));
        Ok(series)
    }
}

fn micros_duration(micros: i64) -> Duration {
    Duration::from_micros(u64::try_from(micros).unwrap_or(0))
}

/// Binds a [`HistoryFilter`] as `listing.rs`'s history parameters: ?1
/// queue, ?2 status, ?3 below this id, ?4 one page plus one row.
pub(crate) fn bind_history_filter<'q>(
    query: sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>,
    filter: &'q HistoryFilter,
) -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments> {
    query
        .bind(filter.queue.as_ref().map(QueueName::as_str))
        .bind(filter.status.map(|s| s.as_str()))
        .bind(filter.before.map(JobId::get))
        .bind(i64::from(filter.limit) + 1)
}

/// Binds a [`JobFilter`] as `sql.rs`'s `job_filter!` (and `listing.rs`'s
/// statements) parameters ?1-?6 and `limit` as ?7.
pub(crate) fn bind_job_filter<'q>(
    query: sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>,
    now: i64,
    filter: &'q JobFilter,
    limit: u32,
) -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments> {
    query
        .bind(now)
        .bind(filter.queue.as_ref().map(QueueName::as_str))
        .bind(filter.state.map(|s| s.as_str()))
        .bind(filter.id.map(JobId::get))
        .bind(filter.unique_key.as_ref().map(|k| k.as_str()))
        .bind(filter.before.map(JobId::get))
        .bind(i64::from(limit))
}
