//! The `Storage` implementation of `MemoryStorage`.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use queue_core::backend::validate_batch;
use queue_core::time::validate_duration;
use queue_core::time::{to_time_delta, truncate_to_micros};
use queue_core::{
    Ack, Capabilities, Capability, DequeueRequest, EnqueueOutcome, FinalStatus, GroupKey,
    GroupLimit, GroupWeight, HistoryFilter, HistoryPage, HistoryRecord, Job, JobFilter, JobId,
    JobLinks, JobPage, JobState, Lease, MAX_BATCH, NackOutcome, NewJob, PeriodicFire, PruneRequest,
    QueueConfig, QueueError, QueueLimits, QueueName, QueueSample, QueueStats, ReclaimOutcome,
    Result, Retry, ScheduleRecord, Storage, Throughput, WorkerAges, WorkerId, WorkerInfo,
    WorkerRecord, is_waiting, minute_of, validate_lease, validate_limit, validate_window,
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
    fn capabilities(&self) -> Capabilities {
        Capabilities::OPERATIONS
            .with(Capability::Workers)
            .with(Capability::GroupLimits)
            .with(Capability::PriorityAging)
            .with(Capability::FairGroups)
            .with(Capability::GroupWeights)
            .with(Capability::Samples)
            .with(Capability::Dependencies)
            .with(Capability::Batches)
    }

    async fn now(&self) -> Result<DateTime<Utc>> {
        Ok(self.current_time())
    }

    async fn enqueue_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<EnqueueOutcome>> {
        let jobs = validate_batch(&jobs)?;
        let now = self.current_time();
        let mut state = self.lock();
        state.check_dependencies(&jobs)?;
        Ok(state.insert_batch(jobs, now))
    }

    async fn next_due(&self, queues: &[QueueName]) -> Result<Option<Duration>> {
        let now = self.current_time();
        let state = self.lock();
        Ok(state
            .jobs
            .values()
            .filter(|job| queues.contains(&job.queue))
            .filter(|job| job.lease_until.is_none() && job.available_at > now)
            .filter(|job| !is_waiting(job.available_at))
            .map(|job| job.available_at)
            .min()
            .map(|due| (due - now).to_std().unwrap_or_default()))
    }

    async fn dequeue(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        let now = self.current_time();
        let mut state = self.lock();
        let Some(request) = state.within_limits(request, now) else {
            return Ok(Vec::new());
        };
        Ok(state.claim_within(&request, now))
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
        self.lock().remove(id, FinalStatus::Discarded, now)
    }

    async fn cancel(&self, id: JobId) -> Result<()> {
        let now = self.current_time();
        self.lock().remove(id, FinalStatus::Cancelled, now)
    }

    async fn snooze(&self, lease: &Lease, delay: Duration) -> Result<DateTime<Utc>> {
        validate_duration("delay", delay, true)?;
        let now = self.current_time();
        self.lock().snooze(lease, delay, now)
    }

    async fn configure_queue(&self, queue: &QueueName, limits: &QueueLimits) -> Result<()> {
        limits.validate()?;
        let now = self.current_time();
        self.lock().configure(queue, limits, now);
        Ok(())
    }

    async fn queue_configs(&self) -> Result<Vec<QueueConfig>> {
        Ok(self.lock().configs())
    }

    async fn set_group_limit(
        &self,
        queue: &QueueName,
        group: &GroupKey,
        limit: Option<u32>,
    ) -> Result<()> {
        self.lock().set_group_limit(queue, group, limit)
    }

    async fn group_limits(&self) -> Result<Vec<GroupLimit>> {
        Ok(self.lock().group_limit_list())
    }

    async fn set_group_weight(
        &self,
        queue: &QueueName,
        group: &GroupKey,
        weight: Option<u32>,
    ) -> Result<()> {
        self.lock().set_group_weight(queue, group, weight)
    }

    async fn group_weights(&self) -> Result<Vec<GroupWeight>> {
        Ok(self.lock().group_weight_list())
    }

    async fn enqueue_periodic(&self, fire: &PeriodicFire) -> Result<Option<EnqueueOutcome>> {
        let fire = fire.validate()?;
        let now = self.current_time();
        Ok(self.lock().fire(fire, now))
    }

    async fn schedules(&self) -> Result<Vec<ScheduleRecord>> {
        Ok(self.lock().fires.values().cloned().collect())
    }

    async fn retry_dead_letter(&self, id: JobId) -> Result<()> {
        let now = self.current_time();
        self.lock().restore_dead_letter(id, now)
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

    async fn stats_capped(&self, cap: u64) -> Result<Vec<QueueStats>> {
        queue_core::validate_count_cap(cap)?;
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
        Ok(stats.into_values().map(|s| s.capped_at(cap)).collect())
    }

    async fn job_links(&self, id: JobId) -> Result<JobLinks> {
        let now = self.current_time();
        self.lock().links(id, now)
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

    async fn list_jobs(&self, filter: &JobFilter) -> Result<JobPage> {
        filter.validate()?;
        let now = self.current_time();
        let state = self.lock();
        let jobs: Vec<Job> = state
            .jobs_matching(filter, now)
            .take(filter.limit as usize + 1)
            .cloned()
            .collect();
        Ok(JobPage::from_overfetch(jobs, filter.limit))
    }

    async fn run_now(&self, filter: &JobFilter) -> Result<u64> {
        filter.validate()?;
        let now = self.current_time();
        let mut state = self.lock();
        let ids: Vec<JobId> = state
            .jobs_matching(filter, now)
            .filter(|job| job.state(now) == JobState::Scheduled)
            .take(filter.limit as usize)
            .map(|job| job.id)
            .collect();
        for id in &ids {
            if let Some(job) = state.jobs.get_mut(id) {
                job.available_at = now;
                job.updated_at = now;
            }
        }
        Ok(ids.len() as u64)
    }

    async fn discard_jobs(&self, filter: &JobFilter) -> Result<u64> {
        filter.validate()?;
        let now = self.current_time();
        let mut state = self.lock();
        let ids: Vec<JobId> = state
            .jobs_matching(filter, now)
            .take(filter.limit as usize)
            .map(|job| job.id)
            .collect();
        let archives: Vec<(JobId, Archive)> = ids
            .iter()
            .map(|id| (*id, Archive::removed(FinalStatus::Discarded)))
            .collect();
        state.archive_all(archives, now);
        Ok(ids.len() as u64)
    }

    async fn retry_dead_letters(&self, filter: &HistoryFilter) -> Result<u64> {
        filter.validate()?;
        let now = self.current_time();
        let mut state = self.lock();
        let filter = HistoryFilter {
            status: Some(FinalStatus::DeadLetter),
            ..filter.clone()
        };
        let candidates: Vec<JobId> = state.history_matching(&filter).map(|r| r.id).collect();
        let mut moved = 0;
        for id in candidates {
            if moved == u64::from(filter.limit) {
                break;
            }
            match state.restore_dead_letter(id, now) {
                Ok(()) => moved += 1,
                Err(QueueError::Conflict { .. }) => {}
                Err(other) => return Err(other),
            }
        }
        Ok(moved)
    }

    async fn record_samples(&self, samples: &[QueueSample]) -> Result<()> {
        // The same checks as every storage's, before anything is recorded.
        queue_core::backend::sample_rows(samples)?;
        let mut state = self.lock();
        for sample in queue_core::backend::coalesce_samples(samples) {
            state
                .samples
                .entry((sample.queue.clone(), sample.minute))
                .and_modify(|held| held.merge(&sample))
                .or_insert(sample);
        }
        Ok(())
    }

    async fn samples(&self, window: Duration) -> Result<Vec<QueueSample>> {
        let (after, until) = queue_core::backend::sample_window(self.current_time(), window)?;
        let state = self.lock();
        Ok(state
            .samples
            .values()
            .filter(|sample| sample.minute > after && sample.minute <= until)
            .cloned()
            .collect())
    }

    async fn throughput(&self, window: Duration) -> Result<Vec<Throughput>> {
        validate_window(window)?;
        let now = self.current_time();
        let since = now - to_time_delta(window);
        let state = self.lock();
        let mut series =
            std::collections::BTreeMap::<(QueueName, DateTime<Utc>), (u64, u64)>::new();
        for record in state.history.values() {
            if record.finished_at <= since || record.finished_at > now {
                continue;
            }
            let counts = match record.status {
                FinalStatus::Completed => (1, 0),
                FinalStatus::DeadLetter => (0, 1),
                FinalStatus::Discarded | FinalStatus::Cancelled => continue,
            };
            let entry = series
                .entry((record.queue.clone(), minute_of(record.finished_at)))
                .or_default();
            entry.0 += counts.0;
            entry.1 += counts.1;
        }
        Ok(series
            .into_iter()
            .map(|((queue, minute), (completed, failed))| Throughput {
                queue,
                minute,
                completed,
                failed,
            })
            .collect())
    }

    async fn pause_queue(&self, queue: &QueueName) -> Result<()> {
        let mut state = self.lock();
        state.configured.insert(queue.clone());
        state.paused.insert(queue.clone());
        Ok(())
    }

    async fn resume_queue(&self, queue: &QueueName) -> Result<()> {
        self.lock().paused.remove(queue);
        Ok(())
    }

    async fn register_worker(&self, worker: &WorkerInfo) -> Result<()> {
        let worker = worker.validate()?;
        let now = self.current_time();
        self.lock().workers.insert(worker.id.clone(), (worker, now));
        Ok(())
    }

    async fn deregister_worker(&self, id: &WorkerId) -> Result<bool> {
        Ok(self.lock().workers.remove(id).is_some())
    }

    async fn list_workers(
        &self,
        silent_after: Duration,
        forget_after: Duration,
    ) -> Result<Vec<WorkerRecord>> {
        let ages = WorkerAges::at(self.current_time(), silent_after, forget_after)?;
        let mut state = self.lock();
        state.workers.retain(|_, (_, seen)| !ages.forgotten(*seen));
        Ok(state
            .workers
            .values()
            .map(|(info, seen)| ages.record(info.clone(), *seen))
            .collect())
    }
}
