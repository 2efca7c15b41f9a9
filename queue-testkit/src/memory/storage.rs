//! The `Storage` implementation of `MemoryStorage`.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use queue_core::time::{to_time_delta, truncate_to_micros};
use queue_core::{
    Ack, DequeueRequest, EnqueueOutcome, FinalStatus, HistoryFilter, HistoryPage, HistoryRecord,
    Job, JobId, JobState, Lease, MAX_BATCH, NackOutcome, NewJob, PruneRequest, QueueError,
    QueueName, QueueStats, ReclaimOutcome, Result, Retry, Storage, validate_lease, validate_limit,
};
use serde_json::Value;

use super::{Archive, MemoryStorage, State};

pub(super) fn after(now: DateTime<Utc>, by: Duration) -> DateTime<Utc> {
    truncate_to_micros(now + to_time_delta(by))
}

impl State {
    fn ack_one(&mut self, lease: &Lease, result: Option<Value>, now: DateTime<Utc>) -> bool {
        if self.held(lease).is_none() {
            return false;
        }
        let archive = Archive {
            status: FinalStatus::Completed,
            result,
            last_error: None,
            processed_by: Some(lease.worker_id.clone()),
        };
        self.archive(lease.job_id, archive, now);
        true
    }

    fn heartbeat_one(&mut self, lease: &Lease, extend_by: Duration, now: DateTime<Utc>) -> bool {
        match self.held(lease) {
            Some(job) if job.lease_until.is_some_and(|until| until > now) => {
                job.lease_until = Some(after(now, extend_by));
                job.updated_at = now;
                true
            }
            _ => false,
        }
    }
}

#[async_trait]
impl Storage for MemoryStorage {
    async fn now(&self) -> Result<DateTime<Utc>> {
        Ok(self.current_time())
    }

    async fn enqueue(&self, job: NewJob) -> Result<EnqueueOutcome> {
        let job = job.validate()?;
        let now = self.current_time();
        Ok(self.lock().insert(job, now))
    }

    async fn enqueue_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<EnqueueOutcome>> {
        let jobs = jobs
            .iter()
            .map(NewJob::validate)
            .collect::<Result<Vec<_>>>()?;
        let now = self.current_time();
        let mut state = self.lock();
        Ok(jobs.into_iter().map(|job| state.insert(job, now)).collect())
    }

    async fn next_due(&self, queues: &[QueueName]) -> Result<Option<Duration>> {
        let now = self.current_time();
        let state = self.lock();
        Ok(state
            .jobs
            .values()
            .filter(|job| queues.contains(&job.queue))
            .filter(|job| job.lease_until.is_none() && job.available_at > now)
            .map(|job| job.available_at)
            .min()
            .map(|due| (due - now).to_std().unwrap_or_default()))
    }

    async fn dequeue(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        let now = self.current_time();
        let mut state = self.lock();
        let ids = state.claimable(request, now);
        Ok(state.claim(&ids, request, now))
    }

    async fn ack(&self, lease: &Lease, result: Option<Value>) -> Result<()> {
        let now = self.current_time();
        if self.lock().ack_one(lease, result, now) {
            Ok(())
        } else {
            Err(QueueError::LeaseLost {
                lease: lease.clone(),
            })
        }
    }

    async fn ack_batch(&self, acks: &[Ack]) -> Result<Vec<bool>> {
        let now = self.current_time();
        let mut state = self.lock();
        Ok(acks
            .iter()
            .map(|ack| state.ack_one(&ack.lease, ack.result.clone(), now))
            .collect())
    }

    async fn nack(&self, lease: &Lease, error: Value, retry: Retry) -> Result<NackOutcome> {
        retry.validate()?;
        let now = self.current_time();
        let mut state = self.lock();
        let lost = || QueueError::LeaseLost {
            lease: lease.clone(),
        };
        let job = state.held(lease).ok_or_else(lost)?;
        match retry {
            Retry::After(delay) if job.attempts < job.max_attempts => {
                let at = after(now, delay);
                job.lease_until = None;
                job.locked_by = None;
                job.available_at = at;
                job.last_error = Some(error);
                job.updated_at = now;
                Ok(NackOutcome::Retrying { at })
            }
            _ => {
                let archive = Archive {
                    status: FinalStatus::DeadLetter,
                    result: None,
                    last_error: Some(error),
                    processed_by: Some(lease.worker_id.clone()),
                };
                state.archive(lease.job_id, archive, now);
                Ok(NackOutcome::DeadLettered)
            }
        }
    }

    async fn release(&self, lease: &Lease) -> Result<bool> {
        let now = self.current_time();
        let mut state = self.lock();
        let Some(job) = state.held(lease) else {
            return Ok(false);
        };
        job.lease_until = None;
        job.locked_by = None;
        job.attempts -= 1;
        job.available_at = now;
        job.updated_at = now;
        Ok(true)
    }

    async fn heartbeat(&self, lease: &Lease, extend_by: Duration) -> Result<bool> {
        validate_lease("extend_by", extend_by)?;
        let now = self.current_time();
        Ok(self.lock().heartbeat_one(lease, extend_by, now))
    }

    async fn heartbeat_batch(&self, leases: &[Lease], extend_by: Duration) -> Result<Vec<bool>> {
        validate_lease("extend_by", extend_by)?;
        let now = self.current_time();
        let mut state = self.lock();
        Ok(leases
            .iter()
            .map(|lease| state.heartbeat_one(lease, extend_by, now))
            .collect())
    }

    async fn reclaim_stalled(&self, limit: u32) -> Result<ReclaimOutcome> {
        validate_limit("limit", limit, MAX_BATCH)?;
        let now = self.current_time();
        let mut state = self.lock();
        let mut ids = state.reclaimable(now);
        ids.truncate(limit as usize);
        Ok(state.reclaim(&ids, now))
    }

    async fn discard(&self, id: JobId) -> Result<()> {
        let now = self.current_time();
        let mut state = self.lock();
        if state.state_of(id, now).is_none() {
            return Err(QueueError::not_found(format!("live job {id}")));
        }
        let archive = Archive {
            status: FinalStatus::Discarded,
            result: None,
            last_error: None,
            processed_by: None,
        };
        state.archive(id, archive, now);
        Ok(())
    }

    async fn retry_dead_letter(&self, id: JobId) -> Result<()> {
        let now = self.current_time();
        let mut state = self.lock();
        let record = match state.history.get(&id) {
            Some(record) if record.status == FinalStatus::DeadLetter => record.clone(),
            _ => return Err(QueueError::not_found(format!("dead letter {id}"))),
        };
        if let Some(key) = &record.unique_key {
            let taken = state
                .jobs
                .values()
                .any(|job| job.queue == record.queue && job.unique_key.as_ref() == Some(key));
            if taken {
                return Err(QueueError::Conflict {
                    reason: format!("unique key {key} is live again in queue {}", record.queue),
                });
            }
        }
        state.history.remove(&id);
        state.jobs.insert(
            id,
            Job {
                id,
                queue: record.queue,
                priority: record.priority,
                unique_key: record.unique_key,
                payload: record.payload,
                attempts: 0,
                max_attempts: record.max_attempts,
                available_at: now,
                lease_until: None,
                locked_by: None,
                first_locked_at: None,
                last_error: record.last_error,
                created_at: record.created_at,
                updated_at: now,
            },
        );
        Ok(())
    }

    async fn prune_history(&self, request: &PruneRequest) -> Result<u64> {
        request.validate()?;
        let now = self.current_time();
        let cutoff = now - to_time_delta(request.older_than);
        let mut state = self.lock();
        let mut old: Vec<(DateTime<Utc>, JobId)> = state
            .history
            .values()
            .filter(|r| r.finished_at < cutoff)
            .filter(|r| request.status.is_none_or(|s| s == r.status))
            .map(|r| (r.finished_at, r.id))
            .collect();
        old.sort();
        old.truncate(request.limit as usize);
        for (_, id) in &old {
            state.history.remove(id);
        }
        Ok(old.len() as u64)
    }

    async fn stats(&self) -> Result<Vec<QueueStats>> {
        let now = self.current_time();
        let state = self.lock();
        let mut stats = std::collections::BTreeMap::<QueueName, QueueStats>::new();
        for queue in &state.paused {
            stats.insert(queue.clone(), QueueStats::empty(queue.clone()));
        }
        for job in state.jobs.values() {
            let entry = stats
                .entry(job.queue.clone())
                .or_insert_with(|| QueueStats::empty(job.queue.clone()));
            let job_state = job.state(now);
            entry.add(job_state);
            if job_state == JobState::Pending {
                let age = (now - job.available_at).to_std().unwrap_or_default();
                entry.oldest_pending_age =
                    Some(entry.oldest_pending_age.map_or(age, |a| a.max(age)));
            }
        }
        for entry in stats.values_mut() {
            entry.paused = state.paused.contains(&entry.queue);
        }
        Ok(stats.into_values().collect())
    }

    async fn get_job(&self, id: JobId) -> Result<Option<Job>> {
        Ok(self.lock().jobs.get(&id).cloned())
    }

    async fn get_history(&self, id: JobId) -> Result<Option<HistoryRecord>> {
        Ok(self.lock().history.get(&id).cloned())
    }

    async fn list_history(&self, filter: &HistoryFilter) -> Result<HistoryPage> {
        filter.validate()?;
        let state = self.lock();
        let records: Vec<HistoryRecord> = state
            .history_matching(filter)
            .take(filter.limit as usize + 1)
            .cloned()
            .collect();
        Ok(HistoryPage::from_overfetch(records, filter.limit))
    }

    async fn pause_queue(&self, queue: &QueueName) -> Result<()> {
        self.lock().paused.insert(queue.clone());
        Ok(())
    }

    async fn resume_queue(&self, queue: &QueueName) -> Result<()> {
        self.lock().paused.remove(queue);
        Ok(())
    }
}
