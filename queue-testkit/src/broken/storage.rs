//! The `Storage` implementation of `BrokenStorage`: the reference storage,
//! except where the planted bug says otherwise.

use std::collections::HashMap;
use std::sync::PoisonError;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use queue_core::{
    Ack, DequeueRequest, EnqueueOutcome, HistoryFilter, HistoryPage, HistoryRecord, Job, JobFilter,
    JobId, JobPage, JobState, Lease, NackOutcome, NewJob, PeriodicFire, PruneRequest, QueueConfig,
    QueueError, QueueLimits, QueueName, QueueSample, QueueStats, ReclaimOutcome, Result, Retry,
    ScheduleRecord, Storage, Throughput, WorkerId, WorkerInfo, WorkerRecord,
};
use serde_json::Value;

use super::{BrokenStorage, Bug};

impl BrokenStorage {
    fn now_time(&self) -> DateTime<Utc> {
        self.inner.current_time()
    }

    /// The stored job the lease names, if its lease has ended.
    fn expired(&self, lease: &Lease) -> bool {
        let now = self.now_time();
        self.inner
            .lock()
            .jobs
            .get(&lease.job_id)
            .and_then(|job| job.lease_until)
            .is_some_and(|until| until <= now)
    }

    /// `lease` with the worker or the attempt taken from the stored job, as
    /// a backend that checks too little sees it.
    fn loosen(&self, lease: &Lease) -> Lease {
        let mut lease = lease.clone();
        if let Some(job) = self.inner.lock().jobs.get(&lease.job_id) {
            match self.bug {
                Bug::AckIgnoresWorker | Bug::HeartbeatIgnoresWorker => {
                    if let Some(worker) = &job.locked_by {
                        lease.worker_id = worker.clone();
                    }
                }
                Bug::AckIgnoresAttempt => lease.attempt = job.attempts,
                _ => {}
            }
        }
        lease
    }

    /// A claim that picks every unheld job of the named queues (paused and
    /// not yet due included when the bug says so) by id.
    fn claim_by_id(&self, request: &DequeueRequest) -> Vec<Job> {
        let now = self.now_time();
        let mut state = self.inner.lock();
        let ids: Vec<JobId> = state
            .jobs
            .values()
            .filter(|job| request.queues().contains(&job.queue))
            .filter(|job| !state.paused.contains(&job.queue))
            .filter(|job| match self.bug {
                Bug::ClaimTakesDelayedJobs => job.lease_until.is_none(),
                _ => job.state(now) == JobState::Pending,
            })
            .map(|job| job.id)
            .take(request.limit() as usize)
            .collect();
        state.claim(&ids, request, now)
    }
}

#[async_trait]
impl Storage for BrokenStorage {
    fn capabilities(&self) -> queue_core::Capabilities {
        self.inner.capabilities()
    }

    async fn now(&self) -> Result<DateTime<Utc>> {
        self.inner.now().await
    }

    async fn enqueue(&self, job: NewJob) -> Result<EnqueueOutcome> {
        let valid = job.validate()?;
        if self.bug == Bug::KeyChecksThenInserts
            && let Some(key) = valid.unique_key.clone()
        {
            let existing = (self.inner.lock().jobs.values())
                .find(|j| j.queue == valid.queue && j.unique_key.as_ref() == Some(&key))
                .map(|j| j.id);
            // The round trip between the look-up and the insert.
            tokio::task::yield_now().await;
            if let Some(id) = existing {
                return Ok(EnqueueOutcome { id, existed: true });
            }
            let mut keyless = NewJob::new(valid.queue.as_str(), valid.payload)
                .priority(valid.priority)
                .max_attempts(valid.max_attempts);
            if let Some(trace) = valid.trace_context {
                keyless = keyless.trace_context(trace);
            }
            keyless = match valid.schedule {
                queue_core::Schedule::Now => keyless,
                queue_core::Schedule::After(delay) => keyless.delay(delay),
                queue_core::Schedule::At(at) => keyless.run_at(at),
            };
            let outcome = self.inner.enqueue(keyless).await?;
            if let Some(stored) = self.inner.lock().jobs.get_mut(&outcome.id) {
                stored.unique_key = Some(key);
            }
            return Ok(outcome);
        }
        if let Some(key) = valid.unique_key {
            let state = self.inner.lock();
            let existing = match self.bug {
                Bug::UniqueKeyAcrossQueues => state
                    .jobs
                    .values()
                    .find(|j| j.unique_key.as_ref() == Some(&key))
                    .map(|j| j.id),
                Bug::UniqueKeyHeldByHistory => state
                    .history
                    .values()
                    .find(|r| r.queue == valid.queue && r.unique_key.as_ref() == Some(&key))
                    .map(|r| r.id),
                _ => None,
            };
            if let Some(id) = existing {
                return Ok(EnqueueOutcome { id, existed: true });
            }
        }
        self.inner.enqueue(job).await
    }

    async fn enqueue_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<EnqueueOutcome>> {
        if self.bug != Bug::BatchWritesUntilTheInvalidJob {
            return self.inner.enqueue_batch(jobs).await;
        }
        let mut outcomes = Vec::with_capacity(jobs.len());
        for job in jobs {
            outcomes.push(self.inner.enqueue(job).await?);
        }
        Ok(outcomes)
    }

    async fn dequeue(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        let now = self.now_time();
        match self.bug {
            Bug::UnlockedClaim => {
                let ids = self.inner.lock().claimable(request, now);
                // The round trip between the select and the update; one yield
                // is all the suite needs to see the double claim.
                tokio::task::yield_now().await;
                Ok(self.inner.lock().claim(&ids, request, now))
            }
            Bug::ClaimIgnoresPause => {
                let mut state = self.inner.lock();
                let paused = std::mem::take(&mut state.paused);
                let ids = state.claimable(request, now);
                state.paused = paused;
                Ok(state.claim(&ids, request, now))
            }
            Bug::ClaimOrdersById | Bug::ClaimTakesDelayedJobs => Ok(self.claim_by_id(request)),
            Bug::ClaimIgnoresQueueLimits => {
                let plain = DequeueRequest::new(
                    request.queues().to_vec(),
                    request.limit(),
                    request.lease(),
                    request.worker_id().clone(),
                )?;
                self.inner.dequeue(&plain).await
            }
            Bug::ConcurrencyCountedPerHandle => {
                let mut mine = self
                    .claimed_here
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let mut state = self.inner.lock();
                // The limits see only the leases this handle handed out.
                let narrowed = state.within_limits_counting(request, now, |queue| {
                    (state.jobs.values())
                        .filter(|job| &job.queue == queue && job.lease_until.is_some())
                        .filter(|job| mine.contains(&job.id))
                        .count() as u64
                });
                let Some(request) = narrowed else {
                    return Ok(Vec::new());
                };
                let claimed = state.claim_within(&request, now);
                mine.extend(claimed.iter().map(|job| job.id));
                Ok(claimed)
            }
            Bug::FairTurnsForgotten => {
                let mut state = self.inner.lock();
                let kept = std::mem::take(&mut state.turns);
                let Some(request) = state.within_limits(request, now) else {
                    state.turns = kept;
                    return Ok(Vec::new());
                };
                let claimed = state.claim_within(&request, now);
                state.turns = kept;
                Ok(claimed)
            }
            Bug::WeightCountForgotten => {
                let mut state = self.inner.lock();
                let Some(request) = state.within_limits(request, now) else {
                    return Ok(Vec::new());
                };
                let claimed = state.claim_within(&request, now);
                for turn in state.turns.values_mut() {
                    turn.taken = 0;
                }
                Ok(claimed)
            }
            Bug::FairTurnsPerHandle => {
                let mut mine = self
                    .turns_here
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let mut state = self.inner.lock();
                // The shared counts and turns swapped for this handle's.
                std::mem::swap(&mut state.claim_counts, &mut mine.0);
                std::mem::swap(&mut state.turns, &mut mine.1);
                let claimed = match state.within_limits(request, now) {
                    Some(request) => state.claim_within(&request, now),
                    None => Vec::new(),
                };
                std::mem::swap(&mut state.claim_counts, &mut mine.0);
                std::mem::swap(&mut state.turns, &mut mine.1);
                Ok(claimed)
            }
            Bug::GroupLimitCountedPerHandle => {
                let mut mine = self
                    .claimed_here
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let mut state = self.inner.lock();
                let Some(request) = state.within_limits(request, now) else {
                    return Ok(Vec::new());
                };
                // Each group's slots see only the leases this handle handed out.
                let ids = state.claimable_counting(&request, now, |queue| {
                    state.group_slots_of(queue, |job| mine.contains(&job.id))
                });
                let claimed = state.claim(&ids, &request, now);
                state.take_tokens(&claimed, now);
                mine.extend(claimed.iter().map(|job| job.id));
                Ok(claimed)
            }
            Bug::RateChargedForTheRequest => {
                let mut state = self.inner.lock();
                let Some(narrowed) = state.within_limits(request, now) else {
                    return Ok(Vec::new());
                };
                let claimed = state.claim_within(&narrowed, now);
                for queue in narrowed.queues() {
                    let taken = claimed.iter().filter(|job| &job.queue == queue).count() as u64;
                    let unused = u64::from(narrowed.queue_limit(queue)).saturating_sub(taken);
                    if let Some(bucket) = state.buckets.get_mut(queue) {
                        bucket.tokens = (bucket.tokens - unused as f64).max(0.0);
                    }
                }
                Ok(claimed)
            }
            Bug::PauseIgnoredWhenLimited => {
                let mut state = self.inner.lock();
                let paused = state.paused.clone();
                let limited: Vec<QueueName> = state.limits.keys().cloned().collect();
                state.paused.retain(|queue| !limited.contains(queue));
                let narrowed = state.within_limits(request, now);
                let claimed = narrowed.map(|request| state.claim_within(&request, now));
                state.paused = paused;
                Ok(claimed.unwrap_or_default())
            }
            Bug::SnoozeKeepsTheSlot => {
                let ghosts = (self.snoozed_slots.lock())
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                let mut state = self.inner.lock();
                let narrowed = state.within_limits_counting(request, now, |queue| {
                    state.leases_held(queue) + ghosts.get(queue).copied().unwrap_or(0)
                });
                let Some(narrowed) = narrowed else {
                    return Ok(Vec::new());
                };
                Ok(state.claim_within(&narrowed, now))
            }
            Bug::ClaimChecksLimitsThenClaims => {
                let narrowed = self.inner.lock().within_limits(request, now);
                tokio::task::yield_now().await;
                let Some(request) = narrowed else {
                    return Ok(Vec::new());
                };
                Ok(self.inner.lock().claim_within(&request, now))
            }
            Bug::ClaimLocksWhatItDoesNotTake => {
                // Every queue's best `cap` jobs, "locked" by leasing them
                // for the round trip; then all unlocked, and the best leased.
                let caps = request
                    .queues()
                    .iter()
                    .map(|q| (q.clone(), request.queue_limit(q)))
                    .collect();
                let scanned = DequeueRequest::with_queue_limits(
                    caps,
                    request.lease(),
                    request.worker_id().clone(),
                )?;
                let (originals, best) = {
                    let mut state = self.inner.lock();
                    let best = state.claimable(request, now);
                    let locked = state.claimable(&scanned, now);
                    let originals: Vec<Job> = locked
                        .iter()
                        .filter_map(|id| state.jobs.get(id).cloned())
                        .collect();
                    state.claim(&locked, &scanned, now);
                    (originals, best)
                };
                tokio::task::yield_now().await;
                let mut state = self.inner.lock();
                for job in originals {
                    state.jobs.insert(job.id, job);
                }
                Ok(state.claim(&best, request, now))
            }
            Bug::ClaimSkipsThePageOfATakenJob => {
                // Reads each queue's best two pages of its cap, awaits, then
                // takes each queue's first page, or its second when a job of
                // the first was taken meanwhile ("contended, move on").
                let pages = {
                    let state = self.inner.lock();
                    let Some(narrowed) = state.within_limits(request, now) else {
                        return Ok(Vec::new());
                    };
                    let mut pages = Vec::new();
                    for queue in narrowed.queues() {
                        let cap = narrowed.queue_limit(queue);
                        let two_pages = DequeueRequest::with_queue_limits(
                            vec![(queue.clone(), cap.saturating_mul(2).max(1))],
                            request.lease(),
                            request.worker_id().clone(),
                        )?;
                        pages.push((cap as usize, state.claimable(&two_pages, now)));
                    }
                    pages
                };
                tokio::task::yield_now().await;
                let mut state = self.inner.lock();
                let pending = |state: &crate::memory::State, id: &JobId| {
                    (state.jobs.get(id)).is_some_and(|job| job.state(now) == JobState::Pending)
                };
                let mut chosen = Vec::new();
                for (cap, ids) in pages {
                    let (first, second) = ids.split_at(cap.min(ids.len()));
                    let page = if first.iter().all(|id| pending(&state, id)) {
                        first
                    } else {
                        second
                    };
                    chosen.extend(page.iter().copied().filter(|id| pending(&state, id)));
                }
                chosen.sort_by_key(|id| state.claim_key(&state.jobs[id], now));
                chosen.truncate(request.limit() as usize);
                let claimed = state.claim(&chosen, request, now);
                state.take_tokens(&claimed, now);
                Ok(claimed)
            }
            Bug::ClaimReturnsInIdOrder => {
                let mut jobs = self.inner.dequeue(request).await?;
                jobs.sort_by_key(|job| job.id);
                Ok(jobs)
            }
            Bug::ClaimResetsFirstLockedAt => {
                let mut jobs = self.inner.dequeue(request).await?;
                let mut state = self.inner.lock();
                for job in &mut jobs {
                    job.first_locked_at = Some(now);
                    if let Some(stored) = state.jobs.get_mut(&job.id) {
                        stored.first_locked_at = Some(now);
                    }
                }
                Ok(jobs)
            }
            Bug::ClaimAnswersAStaleRow => {
                let read: HashMap<JobId, DateTime<Utc>> = self
                    .inner
                    .lock()
                    .jobs
                    .values()
                    .map(|job| (job.id, job.updated_at))
                    .collect();
                let mut jobs = self.inner.dequeue(request).await?;
                for job in &mut jobs {
                    if let Some(updated_at) = read.get(&job.id) {
                        job.updated_at = *updated_at;
                    }
                }
                Ok(jobs)
            }
            Bug::ClaimDropsTheTraceContext => {
                let mut jobs = self.inner.dequeue(request).await?;
                for job in &mut jobs {
                    job.trace_context = None;
                }
                Ok(jobs)
            }
            _ => self.inner.dequeue(request).await,
        }
    }

    async fn next_due(&self, queues: &[QueueName]) -> Result<Option<Duration>> {
        match self.bug {
            Bug::NextDueOnlyFirstQueue => self.inner.next_due(&queues[..queues.len().min(1)]).await,
            Bug::NextDueIgnoresRetries => {
                let now = self.now_time();
                Ok(self
                    .inner
                    .lock()
                    .jobs
                    .values()
                    .filter(|job| queues.contains(&job.queue) && job.attempts == 0)
                    .filter(|job| job.lease_until.is_none() && job.available_at > now)
                    .map(|job| job.available_at)
                    .min()
                    .map(|due| (due - now).to_std().unwrap_or_default()))
            }
            _ => self.inner.next_due(queues).await,
        }
    }

    async fn ack(&self, lease: &Lease, result: Option<Value>) -> Result<()> {
        self.inner.ack(&self.loosen(lease), result).await
    }

    async fn ack_batch(&self, acks: &[Ack]) -> Result<Vec<bool>> {
        let loosened: Vec<Ack> = acks
            .iter()
            .map(|ack| Ack {
                lease: self.loosen(&ack.lease),
                result: ack.result.clone(),
            })
            .collect();
        let mut acked = self.inner.ack_batch(&loosened).await?;
        if self.bug == Bug::AckBatchAcksRepeatsTwice {
            for i in 0..acks.len() {
                let earlier = (0..i).any(|j| acked[j] && acks[j].lease == acks[i].lease);
                acked[i] |= earlier;
            }
        }
        Ok(acked)
    }

    async fn nack(&self, lease: &Lease, error: Value, retry: Retry) -> Result<NackOutcome> {
        match self.bug {
            Bug::NackRefusesExpiredLease if self.expired(lease) => Err(QueueError::LeaseLost {
                lease: lease.clone(),
            }),
            Bug::NackRetriesOnceTooOften => {
                if let Some(job) = self.inner.lock().held(lease) {
                    job.max_attempts += 1;
                }
                let outcome = self.inner.nack(lease, error, retry).await;
                if let Some(job) = self.inner.lock().jobs.get_mut(&lease.job_id) {
                    job.max_attempts -= 1;
                }
                outcome
            }
            Bug::NackKeepsLockedBy => {
                let outcome = self.inner.nack(lease, error, retry).await?;
                if let Some(job) = self.inner.lock().jobs.get_mut(&lease.job_id) {
                    job.locked_by = Some(lease.worker_id.clone());
                }
                Ok(outcome)
            }
            _ => self.inner.nack(lease, error, retry).await,
        }
    }

    async fn release(&self, lease: &Lease) -> Result<bool> {
        if self.bug == Bug::ReleaseRefusesExpiredLease && self.expired(lease) {
            return Ok(false);
        }
        let released = self.inner.release(lease).await?;
        if released
            && self.bug == Bug::ReleaseBurnsAnAttempt
            && let Some(job) = self.inner.lock().jobs.get_mut(&lease.job_id)
        {
            job.attempts += 1;
        }
        Ok(released)
    }

    async fn heartbeat(&self, lease: &Lease, extend_by: Duration) -> Result<bool> {
        let lease = self.loosen(lease);
        if self.bug == Bug::HeartbeatRevivesExpiredLease && self.expired(&lease) {
            queue_core::validate_lease("extend_by", extend_by)?;
            let now = self.now_time();
            if let Some(job) = self.inner.lock().held(&lease) {
                job.lease_until = Some(now + queue_core::time::to_time_delta(extend_by));
                return Ok(true);
            }
        }
        self.inner.heartbeat(&lease, extend_by).await
    }

    async fn heartbeat_batch(&self, leases: &[Lease], extend_by: Duration) -> Result<Vec<bool>> {
        let loosened: Vec<Lease> = leases.iter().map(|lease| self.loosen(lease)).collect();
        self.inner.heartbeat_batch(&loosened, extend_by).await
    }

    async fn reclaim_stalled(&self, limit: u32) -> Result<ReclaimOutcome> {
        let outcome = match self.bug {
            Bug::ReclaimOrdersById | Bug::ReclaimIgnoresLimit => {
                queue_core::validate_limit("limit", limit, queue_core::MAX_BATCH)?;
                let now = self.now_time();
                let mut state = self.inner.lock();
                let mut ids = state.reclaimable(now);
                if self.bug == Bug::ReclaimOrdersById {
                    ids.sort();
                    ids.truncate(limit as usize);
                }
                return Ok(state.reclaim(&ids, now));
            }
            Bug::ReclaimForgetsLastError => {
                let before: Vec<(JobId, Option<Value>)> = {
                    let state = self.inner.lock();
                    state
                        .jobs
                        .values()
                        .map(|j| (j.id, j.last_error.clone()))
                        .collect()
                };
                let outcome = self.inner.reclaim_stalled(limit).await?;
                let mut state = self.inner.lock();
                for (id, error) in before {
                    if let Some(job) = state.jobs.get_mut(&id) {
                        job.last_error = error;
                    } else if let Some(record) = state.history.get_mut(&id) {
                        record.last_error = error;
                    }
                }
                outcome
            }
            _ => self.inner.reclaim_stalled(limit).await?,
        };
        Ok(outcome)
    }

    async fn discard(&self, id: JobId) -> Result<()> {
        match self.inner.discard(id).await {
            Err(QueueError::NotFound { .. }) if self.bug == Bug::DiscardOfUnknownSucceeds => Ok(()),
            other => other,
        }
    }

    async fn retry_dead_letter(&self, id: JobId) -> Result<()> {
        let attempts = self.inner.lock().history.get(&id).map(|r| r.attempts);
        self.inner.retry_dead_letter(id).await?;
        if self.bug == Bug::RetryKeepsAttempts
            && let (Some(job), Some(attempts)) = (self.inner.lock().jobs.get_mut(&id), attempts)
        {
            job.attempts = attempts;
        }
        Ok(())
    }

    async fn prune_history(&self, request: &PruneRequest) -> Result<u64> {
        if self.bug == Bug::PruneIgnoresStatus {
            let mut request = *request;
            request.status = None;
            return self.inner.prune_history(&request).await;
        }
        self.inner.prune_history(request).await
    }

    async fn list_jobs(&self, filter: &JobFilter) -> Result<JobPage> {
        let mut page = self.inner.list_jobs(filter).await?;
        if self.bug == Bug::ListJobsNextOnFullPage
            && page.next.is_none()
            && page.jobs.len() == filter.limit as usize
        {
            page.next = page.jobs.last().map(|job| job.id);
        }
        Ok(page)
    }

    async fn run_now(&self, filter: &JobFilter) -> Result<u64> {
        if self.bug == Bug::RunNowIgnoresQueue {
            let loose = JobFilter {
                queue: None,
                ..filter.clone()
            };
            return self.inner.run_now(&loose).await;
        }
        self.inner.run_now(filter).await
    }

    async fn discard_jobs(&self, filter: &JobFilter) -> Result<u64> {
        self.inner.discard_jobs(filter).await
    }

    async fn retry_dead_letters(&self, filter: &HistoryFilter) -> Result<u64> {
        self.inner.retry_dead_letters(filter).await
    }

    async fn throughput(&self, window: Duration) -> Result<Vec<Throughput>> {
        self.inner.throughput(window).await
    }

    async fn record_samples(&self, samples: &[QueueSample]) -> Result<()> {
        if self.bug != Bug::LagSamplesOverwritten {
            return self.inner.record_samples(samples).await;
        }
        queue_core::backend::sample_rows(samples)?;
        let mut state = self.inner.lock();
        for sample in queue_core::backend::coalesce_samples(samples) {
            let held = state
                .samples
                .entry((sample.queue.clone(), sample.minute))
                .or_insert_with(|| QueueSample::new(sample.queue.clone(), sample.minute));
            if !sample.lag.is_empty() {
                held.lag = sample.lag.clone();
            }
            if sample.depth.is_some() {
                held.depth = sample.depth;
            }
        }
        Ok(())
    }

    async fn samples(&self, window: Duration) -> Result<Vec<QueueSample>> {
        if self.bug != Bug::SamplesIgnoreTheWindow {
            return self.inner.samples(window).await;
        }
        queue_core::validate_window(window)?;
        Ok(self.inner.lock().samples.values().cloned().collect())
    }

    async fn stats_capped(&self, cap: u64) -> Result<Vec<QueueStats>> {
        let counted_to = match self.bug {
            Bug::StatsIgnoreCap => u64::MAX,
            _ => cap,
        };
        let mut stats = self.inner.stats_capped(counted_to).await?;
        match self.bug {
            Bug::StatsIgnoreCap => {
                for entry in &mut stats {
                    entry.cap = Some(cap);
                }
            }
            Bug::StatsSkipEmptyQueues => stats.retain(|s| s.live() > 0),
            Bug::AgeFromCreation => {
                let now = self.now_time();
                let state = self.inner.lock();
                for entry in &mut stats {
                    entry.oldest_pending_age = state
                        .jobs
                        .values()
                        .filter(|j| j.queue == entry.queue && j.state(now) == JobState::Pending)
                        .map(|j| (now - j.created_at).to_std().unwrap_or_default())
                        .max();
                }
            }
            Bug::OldestFromTheBestPriority => {
                let now = self.now_time();
                let state = self.inner.lock();
                for entry in &mut stats {
                    let pending = || {
                        state
                            .jobs
                            .values()
                            .filter(|j| j.queue == entry.queue && j.state(now) == JobState::Pending)
                    };
                    let best = pending().map(|j| j.priority).max();
                    entry.oldest_pending_age = pending()
                        .filter(|j| Some(j.priority) == best)
                        .map(|j| (now - j.available_at).to_std().unwrap_or_default())
                        .max();
                }
            }
            _ => {}
        }
        Ok(stats)
    }

    async fn get_job(&self, id: JobId) -> Result<Option<Job>> {
        self.inner.get_job(id).await
    }

    async fn get_history(&self, id: JobId) -> Result<Option<HistoryRecord>> {
        self.inner.get_history(id).await
    }

    async fn list_history(&self, filter: &HistoryFilter) -> Result<HistoryPage> {
        match self.bug {
            Bug::HistoryByFinishTime => {
                filter.validate()?;
                let state = self.inner.lock();
                let mut records: Vec<HistoryRecord> =
                    state.history_matching(filter).cloned().collect();
                records.sort_by_key(|r| std::cmp::Reverse(r.finished_at));
                records.truncate(filter.limit as usize + 1);
                Ok(HistoryPage::from_overfetch(records, filter.limit))
            }
            Bug::HistoryAlwaysHasNext => {
                let mut page = self.inner.list_history(filter).await?;
                if page.next.is_none() {
                    page.next = page.records.last().map(|r| r.id);
                }
                Ok(page)
            }
            _ => self.inner.list_history(filter).await,
        }
    }

    async fn pause_queue(&self, queue: &QueueName) -> Result<()> {
        self.inner.pause_queue(queue).await
    }

    async fn snooze(&self, lease: &Lease, delay: Duration) -> Result<DateTime<Utc>> {
        let queue = self
            .inner
            .lock()
            .jobs
            .get(&lease.job_id)
            .map(|job| job.queue.clone());
        let at = self.inner.snooze(lease, delay).await?;
        match (self.bug, queue) {
            (Bug::SnoozeClearsLastError, _) => {
                if let Some(job) = self.inner.lock().jobs.get_mut(&lease.job_id) {
                    job.last_error = None;
                }
            }
            (Bug::SnoozeKeepsTheSlot, Some(queue)) => {
                *(self
                    .snoozed_slots
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner))
                .entry(queue)
                .or_default() += 1;
            }
            _ => {}
        }
        if self.bug == Bug::SnoozeCountsTheAttempt
            && let Some(job) = self.inner.lock().jobs.get_mut(&lease.job_id)
        {
            job.attempts += 1;
        }
        Ok(at)
    }

    async fn cancel(&self, id: JobId) -> Result<()> {
        self.inner.cancel(id).await
    }

    async fn configure_queue(&self, queue: &QueueName, limits: &QueueLimits) -> Result<()> {
        self.inner.configure_queue(queue, limits).await
    }

    async fn queue_configs(&self) -> Result<Vec<QueueConfig>> {
        self.inner.queue_configs().await
    }

    async fn set_group_limit(
        &self,
        queue: &QueueName,
        group: &queue_core::GroupKey,
        limit: Option<u32>,
    ) -> Result<()> {
        self.inner.set_group_limit(queue, group, limit).await
    }

    async fn group_limits(&self) -> Result<Vec<queue_core::GroupLimit>> {
        self.inner.group_limits().await
    }

    async fn set_group_weight(
        &self,
        queue: &QueueName,
        group: &queue_core::GroupKey,
        weight: Option<u32>,
    ) -> Result<()> {
        self.inner.set_group_weight(queue, group, weight).await
    }

    async fn group_weights(&self) -> Result<Vec<queue_core::GroupWeight>> {
        self.inner.group_weights().await
    }

    async fn enqueue_periodic(&self, fire: &PeriodicFire) -> Result<Option<EnqueueOutcome>> {
        if self.bug == Bug::FireChecksThenRecords {
            let fresh = (self.inner.lock().fires.get(&fire.schedule))
                .is_none_or(|record| record.last_fire_at < fire.fire_at);
            // The round trip between the read and the write.
            tokio::task::yield_now().await;
            if fresh {
                // Written as if the read still held: whatever a racer
                // recorded meanwhile is overwritten.
                self.inner.lock().fires.remove(&fire.schedule);
            }
        }
        if self.bug == Bug::PeriodicFiresAgainAfterFinish {
            let mut state = self.inner.lock();
            let queue = fire.job.validate()?.queue;
            if !state.jobs.values().any(|job| job.queue == queue) {
                state.fires.remove(&fire.schedule);
            }
        }
        self.inner.enqueue_periodic(fire).await
    }

    async fn schedules(&self) -> Result<Vec<ScheduleRecord>> {
        self.inner.schedules().await
    }

    async fn resume_queue(&self, queue: &QueueName) -> Result<()> {
        self.inner.resume_queue(queue).await
    }

    async fn register_worker(&self, worker: &WorkerInfo) -> Result<()> {
        let kept = match self.bug {
            Bug::WorkerHeartbeatKeepsLastSeen => (self.inner.lock().workers)
                .get(&worker.id)
                .map(|(_, seen)| *seen),
            _ => None,
        };
        self.inner.register_worker(worker).await?;
        if let Some(seen) = kept
            && let Some(entry) = self.inner.lock().workers.get_mut(&worker.id)
        {
            entry.1 = seen;
        }
        Ok(())
    }

    async fn deregister_worker(&self, id: &WorkerId) -> Result<bool> {
        self.inner.deregister_worker(id).await
    }

    async fn list_workers(
        &self,
        silent_after: Duration,
        forget_after: Duration,
    ) -> Result<Vec<WorkerRecord>> {
        self.inner.list_workers(silent_after, forget_after).await
    }
}
