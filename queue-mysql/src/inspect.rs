//! Stats, single lookups and history listings.

use chrono::NaiveDateTime;
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Datetime, Nullable, Text};
use diesel_async::RunQueryDsl;
use queue_core::backend::{stored, stored_count};
use queue_core::time::to_time_delta;
use queue_core::{
    HistoryFilter, HistoryPage, HistoryRecord, Job, JobFilter, JobId, JobPage, QueueName,
    QueueStats, Result, Throughput, validate_window,
};

use crate::MySqlStorage;
use crate::bind::{Param, cached, job_filter, query};
use crate::error::retrying;
use crate::rows::{HistoryRow, JobRow, NowRow, utc};
use crate::sql::{self, NEXT_DUE_STEP, NOW, STATS, THROUGHPUT};

#[derive(QueryableByName)]
struct DueStep {
    #[diesel(sql_type = Nullable<diesel::sql_types::Integer>)]
    next_priority: Option<i32>,
    #[diesel(sql_type = Nullable<BigInt>)]
    due_in_us: Option<i64>,
}

/// Microseconds until the earliest unleased, not yet due job of `queue`:
/// one [`NEXT_DUE_STEP`] per distinct priority, plus one.
pub(crate) async fn next_due_in_queue(
    conn: &mut crate::AsyncMysqlConnection,
    queue: &QueueName,
    now: Option<NaiveDateTime>,
) -> diesel::QueryResult<Option<i64>> {
    let mut bound = i64::from(i32::MAX) + 1;
    let mut previous: Option<i32> = None;
    let mut earliest: Option<i64> = None;
    loop {
        let name = || Param::Text(queue.as_str().to_owned());
        let params = vec![
            name(),
            Param::Int(bound),
            Param::OptTime(now),
            name(),
            Param::OptInt(previous.map(i64::from)),
            Param::OptTime(now),
        ];
        let step = cached(NEXT_DUE_STEP, params)
            .get_result::<DueStep>(conn)
            .await?;
        if let Some(due) = step.due_in_us {
            earliest = Some(earliest.map_or(due, |e| e.min(due)));
        }
        match step.next_priority {
            Some(priority) => {
                previous = Some(priority);
                bound = i64::from(priority);
            }
            None => return Ok(earliest),
        }
    }
}

#[derive(QueryableByName)]
struct StatsRow {
    #[diesel(sql_type = Text)]
    queue_name: String,
    #[diesel(sql_type = BigInt)]
    paused: i64,
    #[diesel(sql_type = BigInt)]
    pending: i64,
    #[diesel(sql_type = BigInt)]
    scheduled: i64,
    #[diesel(sql_type = BigInt)]
    running: i64,
    #[diesel(sql_type = BigInt)]
    stalled: i64,
    #[diesel(sql_type = BigInt)]
    exhausted: i64,
    #[diesel(sql_type = Nullable<Datetime>)]
    oldest_pending: Option<NaiveDateTime>,
    #[diesel(sql_type = Datetime)]
    now_ts: NaiveDateTime,
}

fn count(value: i64) -> u64 {
    u64::try_from(value).unwrap_or_default()
}

impl StatsRow {
    fn into_stats(self) -> Result<QueueStats> {
        Ok(QueueStats {
            queue: QueueName::new(self.queue_name)?,
            paused: self.paused != 0,
            pending: count(self.pending),
            scheduled: count(self.scheduled),
            running: count(self.running),
            stalled: count(self.stalled),
            exhausted: count(self.exhausted),
            oldest_pending_age: self
                .oldest_pending
                .map(|at| (utc(self.now_ts) - utc(at)).to_std().unwrap_or_default()),
        })
    }
}

impl MySqlStorage {
    pub(crate) async fn now_pooled(&self) -> Result<chrono::DateTime<chrono::Utc>> {
        let row = retrying(true, || async {
            let mut conn = self.connection().await?;
            Ok(query(NOW, vec![Param::OptTime(self.now_override())])
                .get_result::<NowRow>(&mut conn)
                .await?)
        })
        .await?;
        Ok(utc(row.now_ts))
    }

    /// One skip-scan per queue (there are few), on one connection.
    pub(crate) async fn next_due_pooled(
        &self,
        queues: &[QueueName],
    ) -> Result<Option<std::time::Duration>> {
        let now = self.now_override();
        let earliest = retrying(true, || async {
            let mut conn = self.connection().await?;
            let mut earliest: Option<i64> = None;
            for queue in queues {
                if let Some(due) = next_due_in_queue(&mut conn, queue, now).await? {
                    earliest = Some(earliest.map_or(due, |e| e.min(due)));
                }
            }
            Ok(earliest)
        })
        .await?;
        Ok(earliest.map(|us| std::time::Duration::from_micros(u64::try_from(us).unwrap_or(0))))
    }

    pub(crate) async fn stats_pooled(&self) -> Result<Vec<QueueStats>> {
        let now = self.now_override();
        let rows = retrying(true, || async {
            let mut conn = self.connection().await?;
            Ok(query(STATS, vec![Param::OptTime(now), Param::OptTime(now)])
                .load::<StatsRow>(&mut conn)
                .await?)
        })
        .await?;
        let mut stats = rows
            .into_iter()
            .map(StatsRow::into_stats)
            .collect::<Result<Vec<_>>>()?;
        // Byte order of the names, as on every backend.
        stats.sort_by(|a, b| a.queue.cmp(&b.queue));
        Ok(stats)
    }

    pub(crate) async fn get_job_pooled(&self, id: JobId) -> Result<Option<Job>> {
        let sql = sql::get_job();
        let rows = retrying(true, || async {
            let mut conn = self.connection().await?;
            Ok(query(&sql, vec![Param::Int(id.get())])
                .load::<JobRow>(&mut conn)
                .await?)
        })
        .await?;
        rows.into_iter().next().map(JobRow::into_job).transpose()
    }

    pub(crate) async fn get_history_pooled(&self, id: JobId) -> Result<Option<HistoryRecord>> {
        let sql = sql::get_history();
        let rows = retrying(true, || async {
            let mut conn = self.connection().await?;
            Ok(query(&sql, vec![Param::Int(id.get())])
                .load::<HistoryRow>(&mut conn)
                .await?)
        })
        .await?;
        rows.into_iter()
            .next()
            .map(HistoryRow::into_record)
            .transpose()
    }

    pub(crate) async fn list_history_pooled(&self, filter: &HistoryFilter) -> Result<HistoryPage> {
        filter.validate()?;
        let sql = sql::list_history();
        let queue = filter.queue.as_ref().map(|q| q.as_str().to_owned());
        let status = filter.status.map(|s| s.as_str().to_owned());
        let before = filter.before.map(JobId::get);
        let rows = retrying(true, || async {
            let mut conn = self.connection().await?;
            let params = vec![
                Param::OptText(queue.clone()),
                Param::OptText(queue.clone()),
                Param::OptText(status.clone()),
                Param::OptText(status.clone()),
                Param::OptText(before.map(|b| b.to_string())),
                Param::Int(before.unwrap_or(i64::MAX)),
                Param::Int(i64::from(filter.limit) + 1),
            ];
            Ok(query(&sql, params).load::<HistoryRow>(&mut conn).await?)
        })
        .await?;
        let records = rows
            .into_iter()
            .map(HistoryRow::into_record)
            .collect::<Result<Vec<_>>>()?;
        Ok(HistoryPage::from_overfetch(records, filter.limit))
    }

    pub(crate) async fn list_jobs_pooled(&self, filter: &JobFilter) -> Result<JobPage> {
        filter.validate()?;
        let rows = retrying(true, || async {
            let mut conn = self.connection().await?;
            let now = self.resolve_now(&mut conn).await?;
            let mut params = job_filter(filter, now);
            params.push(Param::Int(i64::from(filter.limit) + 1));
            Ok(query(&sql::list_jobs(), params)
                .load::<JobRow>(&mut conn)
                .await?)
        })
        .await?;
        let jobs = rows
            .into_iter()
            .map(JobRow::into_job)
            .collect::<Result<Vec<_>>>()?;
        Ok(JobPage::from_overfetch(jobs, filter.limit))
    }

    pub(crate) async fn throughput_pooled(
        &self,
        window: std::time::Duration,
    ) -> Result<Vec<Throughput>> {
        validate_window(window)?;
        let rows = retrying(true, || async {
            let mut conn = self.connection().await?;
            let now = self.resolve_now(&mut conn).await?;
            let since = now - to_time_delta(window);
            Ok(
                query(THROUGHPUT, vec![Param::Time(since), Param::Time(now)])
                    .load::<ThroughputRow>(&mut conn)
                    .await?,
            )
        })
        .await?;
        let mut series = rows
            .into_iter()
            .map(|row| {
                Ok(Throughput {
                    queue: stored("queue_name", row.queue_name, QueueName::new)?,
                    minute: utc(row.minute),
                    completed: stored_count("completed", row.completed)?.into(),
                    failed: stored_count("failed", row.failed)?.into(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        // Byte order of the names, whatever the database's collation.
        series.sort_by(|a, b| (&a.queue, a.minute).cmp(&(&b.queue, b.minute)));
        Ok(series)
    }
}

#[derive(QueryableByName)]
struct ThroughputRow {
    #[diesel(sql_type = Text)]
    queue_name: String,
    #[diesel(sql_type = Datetime)]
    minute: NaiveDateTime,
    #[diesel(sql_type = BigInt)]
    completed: i64,
    #[diesel(sql_type = BigInt)]
    failed: i64,
}
