//! The plans SQLite makes of the listings and of stats (`EXPLAIN QUERY
//! PLAN`), for tests and for operators checking which index each reads.

use queue_core::{HistoryFilter, JobFilter, Result};
use sqlx::Row;
use sqlx::sqlite::SqliteArguments;

use crate::inspect::{bind_history_filter, bind_job_filter};
use crate::{SqliteStorage, interpret_error, listing, sql};

impl SqliteStorage {
    /// The plan of the statement [`queue_core::Storage::list_jobs`] runs
    /// for `filter` now, one step per line as `EXPLAIN QUERY PLAN` words
    /// it (`SEARCH job_queue USING INDEX job_queue_queue (queue_name=? AND
    /// rowid<?)`, `SCAN job_queue`, ...): for checking that a listing reads
    /// its queue's and state's index range, not every live job.
    ///
    /// # Errors
    /// [`queue_core::QueueError::InvalidInput`] for a filter `list_jobs`
    /// refuses; otherwise as any query.
    pub async fn explain_list_jobs(&self, filter: &JobFilter) -> Result<Vec<String>> {
        filter.validate()?;
        let now = self.now_micros();
        let statement = self.list_jobs_statement(now, filter).await?;
        let query = sqlx::query(sqlx::AssertSqlSafe(format!(
            "EXPLAIN QUERY PLAN {statement}"
        )));
        self.plan(bind_job_filter(query, now, filter, filter.limit + 1))
            .await
    }

    /// The plan of the statement [`queue_core::Storage::list_history`]
    /// runs for `filter`, as [`SqliteStorage::explain_list_jobs`] gives it.
    ///
    /// # Errors
    /// [`queue_core::QueueError::InvalidInput`] for a filter
    /// `list_history` refuses; otherwise as any query.
    pub async fn explain_list_history(&self, filter: &HistoryFilter) -> Result<Vec<String>> {
        filter.validate()?;
        let statement = format!("EXPLAIN QUERY PLAN {}", listing::list_history(filter));
        self.plan(bind_history_filter(
            sqlx::query(sqlx::AssertSqlSafe(statement)),
            filter,
        ))
        .await
    }

    /// The plan of [`queue_core::Storage::stats`]' statement, as
    /// [`SqliteStorage::explain_list_jobs`] gives it.
    ///
    /// # Errors
    /// As any query.
    pub async fn explain_stats(&self) -> Result<Vec<String>> {
        let statement = format!("EXPLAIN QUERY PLAN {}", sql::STATS);
        let query = sqlx::query(sqlx::AssertSqlSafe(statement))
            .bind(self.now_micros())
            .bind(i64::try_from(queue_core::DEFAULT_COUNT_CAP).unwrap_or(i64::MAX));
        self.plan(query).await
    }

    /// The plans of the statements a fair claim of `queue` reads each
    /// group with (the skip scan listing its groups, the walk over a
    /// group's levels, the read of a level's due jobs), for group `group`
    /// (`None`: the jobs without a group key), in that order: for checking
    /// that each is a range of `job_queue_fair`, never a read of a group's
    /// whole backlog.
    ///
    /// # Errors
    /// As any query.
    pub async fn explain_fair_claim(
        &self,
        queue: &queue_core::QueueName,
        group: Option<&queue_core::GroupKey>,
    ) -> Result<Vec<Vec<String>>> {
        let explain = |statement: &str| {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "EXPLAIN QUERY PLAN {statement}"
            )))
        };
        let name = group.map(queue_core::GroupKey::as_str);
        let groups = explain(sql::FAIR_NEXT_GROUP).bind(queue.as_str()).bind("");
        let levels = explain(sql::FAIR_GROUP_LEVEL)
            .bind(queue.as_str())
            .bind(name)
            .bind(i64::from(i32::MAX) + 1);
        let jobs = explain(sql::FAIR_LEVEL_PICK)
            .bind(queue.as_str())
            .bind(name)
            .bind(0)
            .bind(self.now_micros())
            .bind(i64::MIN)
            .bind(i64::MIN)
            .bind(16);
        Ok(vec![
            self.plan(groups).await?,
            self.plan(levels).await?,
            self.plan(jobs).await?,
        ])
    }

    /// The `detail` column of an `EXPLAIN QUERY PLAN`'s rows.
    async fn plan(
        &self,
        query: sqlx::query::Query<'_, sqlx::Sqlite, SqliteArguments>,
    ) -> Result<Vec<String>> {
        let rows = query.fetch_all(&self.pool).await.map_err(interpret_error)?;
        rows.iter()
            .map(|row| row.try_get::<String, _>("detail").map_err(interpret_error))
            .collect()
    }
}
