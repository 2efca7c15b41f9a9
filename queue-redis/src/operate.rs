//! Operator listings and bulk actions: live jobs by filter, run now,
//! discard and retry in bulk, and the throughput series. Listings merge
//! the queues' answers by id; bulk actions select with the listing, then
//! act per job with the scripts that act on one (each atomic on its own).

use std::time::Duration;

use futures_util::future::try_join_all;
use queue_core::time::duration_micros;
use queue_core::{
    FinalStatus, HistoryFilter, JobFilter, JobPage, JobState, MAX_PAGE_SIZE, QueueError, QueueName,
    Result, Throughput, validate_window,
};

use crate::keys::token;
use crate::rows::{self, integer};
use crate::{RedisStorage, scripts};

impl RedisStorage {
    pub(crate) async fn list_live(&self, filter: &JobFilter) -> Result<JobPage> {
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

    pub(crate) async fn run_now_jobs(&self, filter: &JobFilter) -> Result<u64> {
        filter.validate()?;
        let Some(scheduled) = filter.scheduled_only() else {
            return Ok(0);
        };
        let page = self.list_live(&scheduled).await?;
        let mut moved = 0;
        let mut queues: Vec<&QueueName> = page.jobs.iter().map(|job| &job.queue).collect();
        queues.sort();
        queues.dedup();
        for queue in queues {
            let mut args = vec![
                self.now_arg(),
                self.keys.channel(),
                queue.as_str().to_owned(),
            ];
            args.extend(
                page.jobs
                    .iter()
                    .filter(|job| job.queue == *queue)
                    .map(|job| token(job.id)),
            );
            let n: u64 = self
                .invoke(&scripts::RUN_NOW, &self.keys.queue(queue.as_str()), &args)
                .await?;
            moved += n;
        }
        Ok(moved)
    }

    pub(crate) async fn discard_selected(&self, filter: &JobFilter) -> Result<u64> {
        let page = self.list_live(filter).await?;
        let mut discarded = 0;
        for job in &page.jobs {
            match self.discard_job(job.id).await {
                Ok(()) => discarded += 1,
                // Finished or discarded by someone else since the listing.
                Err(QueueError::NotFound { .. }) => {}
                Err(other) => return Err(other),
            }
        }
        Ok(discarded)
    }

    pub(crate) async fn retry_selected(&self, filter: &HistoryFilter) -> Result<u64> {
        filter.validate()?;
        let mut moved = 0;
        let mut before = filter.before;
        loop {
            let page = self
                .history_page(&HistoryFilter {
                    queue: filter.queue.clone(),
                    status: Some(FinalStatus::DeadLetter),
                    before,
                    limit: MAX_PAGE_SIZE,
                })
                .await?;
            for record in &page.records {
                if moved == u64::from(filter.limit) {
                    return Ok(moved);
                }
                match self.retry_job(record.id).await {
                    Ok(()) => moved += 1,
                    // Its key is live again (it stays), or it moved since.
                    Err(QueueError::Conflict { .. } | QueueError::NotFound { .. }) => {}
                    Err(other) => return Err(other),
                }
            }
            match page.next {
                Some(next) => before = Some(next),
                None => return Ok(moved),
            }
        }
    }

    pub(crate) async fn throughput_series(&self, window: Duration) -> Result<Vec<Throughput>> {
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
                    minute: rows::instant(integer("minute", minute)?)?,
                    completed: count("completed", completed)?,
                    failed: count("failed", failed)?,
                });
            }
        }
        series.sort_by(|a, b| (&a.queue, a.minute).cmp(&(&b.queue, b.minute)));
        Ok(series)
    }
}
