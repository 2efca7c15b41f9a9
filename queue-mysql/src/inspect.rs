//! Stats, single lookups and history listings.

use chrono::NaiveDateTime;
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Datetime, Nullable, Text};
use diesel_async::RunQueryDsl;
use queue_core::backend::{stored, stored_count};
use queue_core::time::to_time_delta;
use queue_core::{
    FinalStatus, HistoryFilter, HistoryPage, HistoryRecord, Job, JobFilter, JobId, JobPage,
    QueueName, QueueStats, Result, Throughput, minute_of, validate_count_cap, validate_window,
};

use crate::MySqlStorage;
use crate::bind::{Param, cached, job_filter, query};
use crate::rows::{HistoryRow, JobRow, NowRow, utc};
use crate::sql::{
    self, NEXT_DUE_STEP, NOW, STATS_EXHAUSTED, STATS_LEASED, STATS_LEVEL, STATS_PAUSED,
    STATS_QUEUES, THROUGHPUT,
};

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

/// An id.
#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

#[derive(QueryableByName)]
struct NameRow {
    #[diesel(sql_type = Text)]
    queue_name: String,
}

#[derive(QueryableByName)]
struct LeasedRow {
    #[diesel(sql_type = Text)]
    queue_name: String,
    #[diesel(sql_type = Nullable<BigInt>)]
    running: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    stalled: Option<i64>,
}

#[derive(QueryableByName)]
struct ExhaustedRow {
    #[diesel(sql_type = Text)]
    queue_name: String,
    #[diesel(sql_type = BigInt)]
    total: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    due: Option<i64>,
}

#[derive(QueryableByName)]
struct LevelRow {
    #[diesel(sql_type = Nullable<diesel::sql_types::Integer>)]
    next_priority: Option<i32>,
    #[diesel(sql_type = BigInt)]
    due: i64,
    #[diesel(sql_type = BigInt)]
    later: i64,
    #[diesel(sql_type = BigInt)]
    waiting: i64,
    #[diesel(sql_type = Nullable<Datetime>)]
    oldest: Option<NaiveDateTime>,
}

fn count(value: Option<i64>) -> u64 {
    u64::try_from(value.unwrap_or(0)).unwrap_or_default()
}

/// The unleased jobs of one queue: due, not yet due, and waiting for
/// dependencies, each counted up to its limit, and the earliest
/// `available_at` of an unexhausted job, walking the priority levels
/// ([`STATS_LEVEL`]).
struct Unleased {
    due: u64,
    later: u64,
    waiting: u64,
    oldest: Option<NaiveDateTime>,
}

async fn unleased_in_queue(
    conn: &mut crate::AsyncMysqlConnection,
    queue: &str,
    now: NaiveDateTime,
    due_limit: u64,
    later_limit: u64,
    waiting_limit: u64,
) -> diesel::QueryResult<Unleased> {
    let mut found = Unleased {
        due: 0,
        later: 0,
        waiting: 0,
        oldest: None,
    };
    let mut bound = i64::from(i32::MAX) + 1;
    let mut previous: Option<i64> = None;
    loop {
        let name = || Param::Text(queue.to_owned());
        let limit = |n: u64| Param::Int(i64::try_from(n).unwrap_or(i64::MAX));
        let params = vec![
            name(),
            Param::Int(bound),
            name(),
            Param::OptInt(previous),
            Param::Time(now),
            limit(due_limit - found.due),
            name(),
            Param::OptInt(previous),
            Param::Time(now),
            limit(later_limit - found.later),
            name(),
            Param::OptInt(previous),
            limit(waiting_limit - found.waiting),
            name(),
            Param::OptInt(previous),
        ];
        let step = cached(STATS_LEVEL, params)
            .get_result::<LevelRow>(conn)
            .await?;
        found.due += count(Some(step.due));
        found.later += count(Some(step.later));
        found.waiting += count(Some(step.waiting));
        if let Some(at) = step.oldest {
            found.oldest = Some(found.oldest.map_or(at, |o| o.min(at)));
        }
        match step.next_priority {
            Some(priority) => {
                previous = Some(i64::from(priority));
                bound = i64::from(priority);
            }
            None => return Ok(found),
        }
    }
}

/// One queue's stats as read, before its name is validated.
struct RawStats {
    name: String,
    paused: bool,
    /// pending, scheduled, running, stalled, exhausted, waiting; each at
    /// most the cap.
    counts: [u64; 6],
    oldest_pending: Option<NaiveDateTime>,
}

/// Stats on one connection at one now: see `sql.rs`'s `STATS_*`.
async fn stats_on(
    conn: &mut crate::AsyncMysqlConnection,
    now: NaiveDateTime,
    cap: u64,
) -> diesel::QueryResult<Vec<RawStats>> {
    let mut names: Vec<String> = query(STATS_QUEUES, vec![])
        .load::<NameRow>(conn)
        .await?
        .into_iter()
        .map(|r| r.queue_name)
        .collect();
    let paused: Vec<String> = query(STATS_PAUSED, vec![])
        .load::<NameRow>(conn)
        .await?
        .into_iter()
        .map(|r| r.queue_name)
        .collect();
    let leased = query(STATS_LEASED, vec![Param::Time(now), Param::Time(now)])
        .load::<LeasedRow>(conn)
        .await?;
    let exhausted = query(STATS_EXHAUSTED, vec![Param::Time(now)])
        .load::<ExhaustedRow>(conn)
        .await?;
    names.extend(paused.iter().cloned());
    names.sort();
    names.dedup();
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let (running, stalled) = leased
            .iter()
            .find(|r| r.queue_name == name)
            .map_or((0, 0), |r| (count(r.running), count(r.stalled)));
        let (ex_total, ex_due) = exhausted
            .iter()
            .find(|r| r.queue_name == name)
            .map_or((0, 0), |r| (count(Some(r.total)), count(r.due)));
        let ex_later = ex_total.saturating_sub(ex_due);
        let unleased = unleased_in_queue(
            conn,
            &name,
            now,
            cap.saturating_add(ex_due),
            cap.saturating_add(ex_later),
            cap,
        )
        .await?;
        let counts = [
            unleased.due.saturating_sub(ex_due).min(cap),
            unleased.later.saturating_sub(ex_later).min(cap),
            running.min(cap),
            stalled.min(cap),
            ex_total.min(cap),
            unleased.waiting.min(cap),
        ];
        out.push(RawStats {
            paused: paused.contains(&name),
            name,
            counts,
            oldest_pending: unleased.oldest.filter(|at| *at <= now),
        });
    }
    Ok(out)
}

impl MySqlStorage {
    pub(crate) async fn now_pooled(&self) -> Result<chrono::DateTime<chrono::Utc>> {
        let row = self
            .retrying(true, || async {
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
        let earliest = self
            .retrying(true, || async {
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

    pub(crate) async fn stats_pooled(&self, cap: u64) -> Result<Vec<QueueStats>> {
        validate_count_cap(cap)?;
        let rows = self
            .retrying(true, || async {
                let mut conn = self.connection().await?;
                let now = self.resolve_now(&mut conn).await?;
                let rows = stats_on(&mut conn, now, cap).await?;
                Ok((now, rows))
            })
            .await?;
        let (now, rows) = rows;
        let mut stats = rows
            .into_iter()
            .map(|raw| {
                let [pending, scheduled, running, stalled, exhausted, waiting] = raw.counts;
                Ok(QueueStats {
                    queue: stored("queue_name", raw.name, QueueName::new)?,
                    paused: raw.paused,
                    pending,
                    scheduled,
                    running,
                    stalled,
                    exhausted,
                    waiting,
                    oldest_pending_age: raw
                        .oldest_pending
                        .map(|at| (utc(now) - utc(at)).to_std().unwrap_or_default()),
                    cap: Some(cap),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        // Byte order of the names, as on every backend.
        stats.sort_by(|a, b| a.queue.cmp(&b.queue));
        Ok(stats)
    }

    pub(crate) async fn get_job_pooled(&self, id: JobId) -> Result<Option<Job>> {
        let sql = sql::get_job();
        let rows = self
            .retrying(true, || async {
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
        let rows = self
            .retrying(true, || async {
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
        let rows = self
            .retrying(true, || async {
                let mut conn = self.connection().await?;
                list_history_on(&mut conn, filter).await
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
        let rows = self
            .retrying(true, || async {
                let mut conn = self.connection().await?;
                self.list_jobs_on(&mut conn, filter).await
            })
            .await?;
        let jobs = rows
            .into_iter()
            .map(JobRow::into_job)
            .collect::<Result<Vec<_>>>()?;
        Ok(JobPage::from_overfetch(jobs, filter.limit))
    }

    /// The rows of a page of `filter` (one more than its limit), on `conn`.
    pub(crate) async fn list_jobs_on(
        &self,
        conn: &mut crate::AsyncMysqlConnection,
        filter: &JobFilter,
    ) -> Result<Vec<JobRow>, crate::error::Failure> {
        let now = self.resolve_now(conn).await?;
        let wanted = filter.limit as usize + 1;
        if let Some(ids) = self.few_scheduled(conn, filter, now).await? {
            // The rows of the newest candidates, a page's worth at a time,
            // until a page is full: a candidate may have been claimed,
            // deleted or found exhausted since it was read.
            let mut rows = Vec::with_capacity(wanted);
            for chunk in ids.chunks(wanted) {
                let mut params = job_filter(filter, now);
                params.extend(chunk.iter().map(|&id| Param::Int(id)));
                let statement = sql::list_jobs_among(filter, chunk.len());
                rows.extend(query(&statement, params).load::<JobRow>(conn).await?);
                if rows.len() >= wanted {
                    rows.truncate(wanted);
                    break;
                }
            }
            return Ok(rows);
        }
        let mut params = job_filter(filter, now);
        params.push(Param::Int(wanted as i64));
        Ok(query(&sql::list_jobs(filter), params)
            .load::<JobRow>(conn)
            .await?)
    }

    /// When `filter` lists scheduled (or waiting) jobs and its queue (or
    /// every queue) has at most [`sql::SCHEDULED_SORTED`] candidates (jobs written due
    /// later and not due yet, below `before`), their ids newest first:
    /// read from `job_queue_scheduled` alone and sorted here, which beats
    /// reading newest first when they sit behind a pending backlog.
    async fn few_scheduled(
        &self,
        conn: &mut crate::AsyncMysqlConnection,
        filter: &JobFilter,
        now: chrono::NaiveDateTime,
    ) -> diesel::QueryResult<Option<Vec<i64>>> {
        if !matches!(
            filter.state,
            Some(queue_core::JobState::Scheduled | queue_core::JobState::Waiting)
        ) || filter.id.is_some()
            || filter.unique_key.is_some()
        {
            return Ok(None);
        }
        let mut params = vec![Param::Time(now)];
        if let Some(queue) = &filter.queue {
            params.push(Param::Text(queue.as_str().to_owned()));
        }
        if let Some(before) = filter.before {
            params.push(Param::Int(before.get()));
        }
        let found = query(&sql::scheduled_ids(filter), params)
            .load::<IdRow>(conn)
            .await?;
        if found.len() as i64 > sql::SCHEDULED_SORTED {
            return Ok(None);
        }
        let mut ids: Vec<i64> = found.into_iter().map(|row| row.id).collect();
        ids.sort_unstable_by(|a, b| b.cmp(a));
        Ok(Some(ids))
    }

    pub(crate) async fn throughput_pooled(
        &self,
        window: std::time::Duration,
    ) -> Result<Vec<Throughput>> {
        validate_window(window)?;
        let rows = self
            .retrying(true, || async {
                let mut conn = self.connection().await?;
                let now = self.resolve_now(&mut conn).await?;
                let since = now - to_time_delta(window);
                let first = minute_of(utc(since)).naive_utc();
                let last = minute_of(utc(now)).naive_utc();
                let params = vec![
                    Param::Time(first),
                    Param::Time(last),
                    Param::Time(since),
                    Param::Time(first + chrono::TimeDelta::minutes(1)),
                ];
                Ok(query(THROUGHPUT, params)
                    .load::<ThroughputRow>(&mut conn)
                    .await?)
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

/// The rows of a history page for `filter` (validated), plus one.
pub(crate) async fn list_history_on(
    conn: &mut crate::AsyncMysqlConnection,
    filter: &HistoryFilter,
) -> Result<Vec<HistoryRow>, crate::error::Failure> {
    let sql = sql::list_history(
        filter.queue.is_some(),
        filter.status.is_some(),
        filter.before.is_some(),
        u64::from(filter.limit) + 1,
    );
    // The queue alone is read once per final status (`sql::list_history`).
    let branches = if filter.queue.is_some() && filter.status.is_none() {
        FinalStatus::ALL.len()
    } else {
        1
    };
    let mut params = Vec::new();
    for _ in 0..branches {
        if let Some(queue) = &filter.queue {
            params.push(Param::Text(queue.as_str().to_owned()));
        }
        if let Some(status) = filter.status {
            params.push(Param::Text(status.as_str().to_owned()));
        }
        if let Some(before) = filter.before {
            params.push(Param::Int(before.get()));
        }
    }
    Ok(query(&sql, params).load::<HistoryRow>(conn).await?)
}
