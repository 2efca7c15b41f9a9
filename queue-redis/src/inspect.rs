//! Reading: stats, one job, the listings of live jobs and of history
//! (merged over queues by id), and the throughput series.

use std::time::Duration;

use futures_util::future::try_join_all;
use queue_core::backend::stored_instant;
use queue_core::time::duration_micros;
use queue_core::{
    HistoryFilter, HistoryPage, HistoryRecord, Job, JobFilter, JobId, JobPage, JobState,
    QueueError, QueueName, QueueStats, Result, Throughput, validate_window,
};

use crate::keys::token;
use crate::rows::{self, integer};
use crate::{RedisStorage, scripts};

impl RedisStorage {
    pub(crate) async fn stats_scripted(&self) -> Result<Vec<QueueStats>> {
        let queues = self.all_queues().await?;
        let now = [self.now_arg()];
        let calls = queues.iter().map(|queue| {
            let now = &now;
            async move {
                self.invoke::<Vec<String>>(&scripts::STATS, &self.keys.queue(queue.as_str()), now)
                    .await
            }
        });
        let answers = try_join_all(calls).await?;
        let mut all = Vec::new();
        for (queue, answer) in queues.into_iter().zip(answers) {
            let [
                now,
                paused,
                pending,
                scheduled,
                running,
                stalled,
                oldest,
                waiting,
            ] = answer.as_slice()
            else {
                return Err(QueueError::backend("the stats script answered badly"));
            };
            let count = |field: &str, raw: &str| -> Result<u64> {
                let n = integer(field, raw)?;
                u64::try_from(n).map_err(|_| queue_core::backend::corrupt(field, n))
            };
            let mut stats = QueueStats::empty(queue);
            stats.paused = paused == "1";
            stats.pending = count("pending", pending)?;
            stats.scheduled = count("scheduled", scheduled)?;
            stats.running = count("running", running)?;
            stats.stalled = count("stalled", stalled)?;
            stats.waiting = count("waiting", waiting)?;
            if !oldest.is_empty() {
                let age = integer("now", now)?.saturating_sub(integer("available_at", oldest)?);
                stats.oldest_pending_age =
                    Some(Duration::from_micros(u64::try_from(age).unwrap_or(0)));
            }
            if stats.paused || stats.live() > 0 {
                all.push(stats);
            }
        }
        Ok(all)
    }

    /// The live jobs and completed history rows of `queue` whose priority
    /// is at least `min_priority`, as `(live, completed)`. One script that
    /// walks every job of the queue: for tests and benchmarks that verify a
    /// run, not for a busy production queue (use `stats`).
    ///
    /// # Errors
    /// As any command.
    pub async fn count_at_priority(
        &self,
        queue: &QueueName,
        min_priority: i32,
    ) -> Result<(u64, u64)> {
        let args = [self.now_arg(), min_priority.to_string()];
        let answer: Vec<u64> = self
            .invoke(&scripts::COUNT, &self.keys.queue(queue.as_str()), &args)
            .await?;
        match answer.as_slice() {
            [live, completed] => Ok((*live, *completed)),
            _ => Err(QueueError::backend("the count script answered badly")),
        }
    }

    pub(crate) async fn get_job_scripted(&self, id: JobId) -> Result<Option<Job>> {
        let Some(queue) = self.queue_of(id).await? else {
            return Ok(None);
        };
        let key = format!("{}:job:{}", self.keys.queue(queue.as_str()), token(id));
        let mut row: Vec<String> = self.command(redis::cmd("HGETALL").arg(key)).await?;
        if row.is_empty() {
            return Ok(None);
        }
        row.insert(0, id.get().to_string());
        rows::job(&queue, &row).map(Some)
    }

    pub(crate) async fn get_history_scripted(&self, id: JobId) -> Result<Option<HistoryRecord>> {
        let Some(queue) = self.queue_of(id).await? else {
            return Ok(None);
        };
        let key = format!("{}:hist:{}", self.keys.queue(queue.as_str()), token(id));
        let mut row: Vec<String> = self.command(redis::cmd("HGETALL").arg(key)).await?;
        if row.is_empty() {
            return Ok(None);
        }
        row.insert(0, id.get().to_string());
        rows::record(&queue, &row).map(Some)
    }

    pub(crate) async fn list_history_scripted(
        &self,
        filter: &HistoryFilter,
    ) -> Result<HistoryPage> {
        filter.validate()?;
        if filter.before.is_some_and(|before| before.get() <= 0) {
            return Ok(HistoryPage::from_overfetch(Vec::new(), filter.limit));
        }
        let queues = match &filter.queue {
            Some(queue) => vec![queue.clone()],
            None => self.all_queues().await?,
        };
        let args = [
            filter
                .status
                .map(|s| s.as_str())
                .unwrap_or_default()
                .to_owned(),
            filter.before.map(token).unwrap_or_default(),
            (u64::from(filter.limit) + 1).to_string(),
        ];
        let calls = queues.iter().map(|queue| {
            let args = &args;
            async move {
                let found: Vec<Vec<String>> = self
                    .invoke(
                        &scripts::LIST_HISTORY,
                        &self.keys.queue(queue.as_str()),
                        args,
                    )
                    .await?;
                found
                    .iter()
                    .map(|row| rows::record(queue, row))
                    .collect::<Result<Vec<_>>>()
            }
        });
        let mut records: Vec<HistoryRecord> =
            try_join_all(calls).await?.into_iter().flatten().collect();
        records.sort_by_key(|r| std::cmp::Reverse(r.id));
        records.truncate(filter.limit as usize + 1);
        Ok(HistoryPage::from_overfetch(records, filter.limit))
    }

    pub(crate) async fn list_jobs_scripted(&self, filter: &JobFilter) -> Result<JobPage> {
        filter.validate()?;
        let queues = match (&filter.queue, filter.id) {
            (wanted, Some(id)) => match self.queue_of(id).await? {
                Some(queue) if wanted.as_ref().is_none_or(|w| *w == queue) => vec![queue],
                _ => Vec::new(),
            },
            (Some(queue), None) => vec![queue.clone()],
            (None, None) => self.all_queues().await?,
        };
        let args = [
            self.now_arg(),
            filter
                .state
                .map(JobState::as_str)
                .unwrap_or_default()
                .to_owned(),
            filter.before.map(token).unwrap_or_default(),
            (u64::from(filter.limit) + 1).to_string(),
            filter.id.map(token).unwrap_or_default(),
            filter
                .unique_key
                .as_ref()
                .map(|k| k.as_str().to_owned())
                .unwrap_or_default(),
        ];
        let calls = queues.iter().map(|queue| {
            let args = &args;
            async move {
                let found: Vec<Vec<String>> = self
                    .invoke(&scripts::LIST_JOBS, &self.keys.queue(queue.as_str()), args)
                    .await?;
                found
                    .iter()
                    .map(|row| rows::job(queue, row))
                    .collect::<Result<Vec<_>>>()
            }
        });
        let mut jobs: Vec<_> = try_join_all(calls).await?.into_iter().flatten().collect();
        jobs.sort_by_key(|job| std::cmp::Reverse(job.id));
        jobs.truncate(filter.limit as usize + 1);
        Ok(JobPage::from_overfetch(jobs, filter.limit))
    }

    pub(crate) async fn throughput_scripted(&self, window: Duration) -> Result<Vec<Throughput>> {
        validate_window(window)?;
        let queues = self.all_queues().await?;
        let args = [self.now_arg(), duration_micros(window).to_string()];
        let calls = queues.iter().map(|queue| {
            let args = &args;
            async move {
                self.invoke::<Vec<String>>(
                    &scripts::THROUGHPUT,
                    &self.keys.queue(queue.as_str()),
                    args,
                )
                .await
            }
        });
        let answers = try_join_all(calls).await?;
        let mut series = Vec::new();
        for (queue, answer) in queues.into_iter().zip(answers) {
            for point in answer.chunks(3) {
                let [minute, completed, failed] = point else {
                    return Err(QueueError::backend("the throughput script answered badly"));
                };
                let count = |field: &str, raw: &str| -> Result<u64> {
                    let n = integer(field, raw)?;
                    u64::try_from(n).map_err(|_| queue_core::backend::corrupt(field, n))
                };
                series.push(Throughput {
                    queue: queue.clone(),
                    minute: stored_instant("minute", integer("minute", minute)?)?,
                    completed: count("completed", completed)?,
                    failed: count("failed", failed)?,
                });
            }
        }
        series.sort_by(|a, b| (&a.queue, a.minute).cmp(&(&b.queue, b.minute)));
        Ok(series)
    }
}
