//! Bulk actions: run now, discard and retry dead letters by filter. Each
//! selects with the listing (`inspect.rs`), then acts with one script per
//! queue (run now, discard: on standalone Redis one discard script for all)
//! or per job (retry), each atomic on its own.

use queue_core::{
    FinalStatus, HistoryFilter, JobFilter, JobId, MAX_PAGE_SIZE, QueueError, QueueName, Result,
};

use crate::keys::token;
use crate::{RedisStorage, scripts};

impl RedisStorage {
    pub(crate) async fn run_now_scripted(&self, filter: &JobFilter) -> Result<u64> {
        filter.validate()?;
        let Some(scheduled) = filter.scheduled_only() else {
            return Ok(0);
        };
        let page = self.list_jobs_scripted(&scheduled).await?;
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

    pub(crate) async fn discard_jobs_scripted(&self, filter: &JobFilter) -> Result<u64> {
        let page = self.list_jobs_scripted(filter).await?;
        let mut jobs: Vec<(QueueName, JobId)> = page
            .jobs
            .into_iter()
            .map(|job| (job.queue, job.id))
            .collect();
        // Jobs finished or discarded by someone else since the listing are
        // not counted. On standalone Redis one script discards them all
        // (their dependants learn of it in ascending id order); on a
        // cluster, one script per queue.
        if !self.is_cluster() {
            return self.discard_all(&jobs, FinalStatus::Discarded).await;
        }
        jobs.sort();
        let mut discarded = 0;
        for queue_jobs in jobs.chunk_by(|a, b| a.0 == b.0) {
            discarded += self.discard_all(queue_jobs, FinalStatus::Discarded).await?;
        }
        Ok(discarded)
    }

    pub(crate) async fn retry_dead_letters_scripted(&self, filter: &HistoryFilter) -> Result<u64> {
        filter.validate()?;
        let mut moved = 0;
        let mut before = filter.before;
        loop {
            let page = self
                .list_history_scripted(&HistoryFilter {
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
                match self.retry_dead_letter_scripted(record.id).await {
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
}
