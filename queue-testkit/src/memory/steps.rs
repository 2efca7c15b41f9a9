//! The steps `MemoryStorage` composes its claims, reclaims and history
//! listings from; the crate's broken storages recombine them.

use std::cmp::Reverse;
use std::collections::{BTreeMap, VecDeque};

use chrono::{DateTime, Utc};
use queue_core::backend::{GroupSlots, aged_claim_order, fair_order};
use queue_core::{
    DequeueRequest, FinalStatus, GroupKey, HistoryFilter, HistoryRecord, Job, JobFilter, JobId,
    JobState, QueueError, QueueName, ReclaimOutcome, Result,
};
use serde_json::json;

use super::storage::after;
use super::{Archive, State};

impl State {
    /// The ids a claim by `request` takes at `now`, in dequeue order.
    pub(crate) fn claimable(&self, request: &DequeueRequest, now: DateTime<Utc>) -> Vec<JobId> {
        self.claimable_counting(request, now, |queue| self.group_slots(queue))
    }

    /// [`State::claimable`] with each queue's group slots counted by
    /// `slots` (the broken storages count them wrongly).
    pub(crate) fn claimable_counting(
        &self,
        request: &DequeueRequest,
        now: DateTime<Utc>,
        slots: impl Fn(&QueueName) -> GroupSlots,
    ) -> Vec<JobId> {
        let ready = self.claim_order(request, now);
        let mut taken: std::collections::HashMap<&QueueName, u32> = Default::default();
        let mut groups: std::collections::HashMap<&QueueName, GroupSlots> = Default::default();
        ready
            .into_iter()
            .filter(|job| {
                let count = taken.entry(&job.queue).or_default();
                if *count >= request.queue_limit(&job.queue) {
                    return false;
                }
                // A job of a full group is skipped: the next one is taken.
                let slots = groups
                    .entry(&job.queue)
                    .or_insert_with(|| slots(&job.queue));
                if !slots.take(job.group_key.as_ref()) {
                    return false;
                }
                *count += 1;
                true
            })
            .take(request.limit() as usize)
            .map(|job| job.id)
            .collect()
    }

    /// The pending jobs of `request`'s unpaused queues in the order a
    /// claim at `now` considers them: each queue's in its own order (a
    /// fair queue's by [`fair_order`]), merged job by job by the plain
    /// order of each queue's next job.
    fn claim_order(&self, request: &DequeueRequest, now: DateTime<Utc>) -> Vec<&Job> {
        let mut queues: BTreeMap<&QueueName, Vec<&Job>> = BTreeMap::new();
        for job in self.jobs.values() {
            if request.queues().contains(&job.queue)
                && !self.paused.contains(&job.queue)
                && job.state(now) == JobState::Pending
            {
                queues.entry(&job.queue).or_default().push(job);
            }
        }
        let mut heads: Vec<VecDeque<&Job>> = Vec::with_capacity(queues.len());
        for (queue, mut jobs) in queues {
            jobs.sort_by_key(|job| self.claim_key(job, now));
            if self.limits.get(queue).is_some_and(|l| l.fair_groups) {
                let keyed: Vec<(i32, Option<&GroupKey>)> = jobs
                    .iter()
                    .map(|job| (self.claim_key(job, now).0.0, job.group_key.as_ref()))
                    .collect();
                let turn = |group: Option<&&GroupKey>| {
                    let key = (queue.clone(), group.map(|g| (*g).clone()));
                    self.turns.get(&key).copied().unwrap_or_default()
                };
                let weight = |group: Option<&&GroupKey>| self.group_weight(queue, group.copied());
                let order = fair_order(&keyed, turn, weight);
                jobs = order.into_iter().map(|place| jobs[place]).collect();
            }
            heads.push(jobs.into());
        }
        let mut merged = Vec::new();
        while let Some(next) = (heads.iter_mut())
            .filter(|jobs| !jobs.is_empty())
            .min_by_key(|jobs| self.claim_key(jobs[0], now))
        {
            merged.extend(next.pop_front());
        }
        merged
    }

    /// `job`'s place in the claim order at `now`: the contract's order,
    /// with its queue's priority aging, if any, lifting it one level per
    /// whole period it has waited since it was due.
    pub(crate) fn claim_key(
        &self,
        job: &Job,
        now: DateTime<Utc>,
    ) -> (Reverse<i32>, DateTime<Utc>, i64) {
        let period = (self.limits.get(&job.queue)).and_then(|limits| limits.priority_aging);
        aged_claim_order(job.priority, job.available_at, job.id.get(), now, period)
    }

    /// The group slots of `queue`: its groups' limits, and the leases its
    /// jobs of each group hold (expired ones included, until reclaim).
    pub(crate) fn group_slots(&self, queue: &QueueName) -> GroupSlots {
        self.group_slots_of(queue, |_| true)
    }

    /// [`State::group_slots`] counting only the leased jobs `counted`
    /// accepts (the broken storages count them wrongly).
    pub(crate) fn group_slots_of(
        &self,
        queue: &QueueName,
        counted: impl Fn(&Job) -> bool,
    ) -> GroupSlots {
        let default = self.limits.get(queue).and_then(|l| l.group_concurrency);
        let overrides = (self.group_limits.iter())
            .filter(|((q, _), _)| q == queue)
            .map(|((_, group), limit)| (group.clone(), *limit));
        let mut slots = GroupSlots::new(default, overrides);
        if slots.limits_any() {
            for job in self.jobs.values() {
                if &job.queue == queue
                    && job.lease_until.is_some()
                    && let Some(group) = &job.group_key
                    && counted(job)
                {
                    slots.hold(group.clone(), 1);
                }
            }
        }
        slots
    }

    /// Leases the live jobs `ids` to `request`'s worker, whatever their state.
    pub(crate) fn claim(
        &mut self,
        ids: &[JobId],
        request: &DequeueRequest,
        now: DateTime<Utc>,
    ) -> Vec<Job> {
        let lease_until = after(now, request.lease());
        let mut claimed = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(job) = self.jobs.get_mut(id) {
                job.attempts += 1;
                job.lease_until = Some(lease_until);
                job.locked_by = Some(request.worker_id().clone());
                job.first_locked_at.get_or_insert(now);
                job.updated_at = now;
                claimed.push(job.clone());
            }
        }
        for job in &claimed {
            if self.limits.get(&job.queue).is_some_and(|l| l.fair_groups) {
                let weight = self.group_weight(&job.queue, job.group_key.as_ref());
                let count = self.claim_counts.entry(job.queue.clone()).or_default();
                *count += 1;
                let turn = (self.turns)
                    .entry((job.queue.clone(), job.group_key.clone()))
                    .or_default();
                *turn = turn.take(weight, *count);
            }
        }
        claimed
    }
}

impl State {
    /// The history rows `filter` selects (its limit aside), newest id first.
    pub(crate) fn history_matching<'a>(
        &'a self,
        filter: &'a HistoryFilter,
    ) -> impl Iterator<Item = &'a HistoryRecord> + 'a {
        self.history
            .values()
            .rev()
            .filter(|r| filter.queue.as_ref().is_none_or(|q| *q == r.queue))
            .filter(|r| filter.status.is_none_or(|s| s == r.status))
            .filter(|r| filter.before.is_none_or(|before| r.id < before))
    }

    /// The live jobs `filter` selects at `now`, highest id first (its
    /// limit aside).
    pub(crate) fn jobs_matching<'a>(
        &'a self,
        filter: &'a JobFilter,
        now: DateTime<Utc>,
    ) -> impl Iterator<Item = &'a Job> + 'a {
        self.jobs
            .values()
            .rev()
            .filter(move |job| filter.matches(job, job.state(now)))
    }

    /// Puts dead letter `id` back as a pending job (see
    /// `Storage::retry_dead_letter`).
    pub(crate) fn restore_dead_letter(&mut self, id: JobId, now: DateTime<Utc>) -> Result<()> {
        let record = match self.history.get(&id) {
            Some(record) if record.status == FinalStatus::DeadLetter => record.clone(),
            _ => return Err(QueueError::not_found(format!("dead letter {id}"))),
        };
        if let Some(key) = &record.unique_key {
            let taken = self
                .jobs
                .values()
                .any(|job| job.queue == record.queue && job.unique_key.as_ref() == Some(key));
            if taken {
                return Err(QueueError::Conflict {
                    reason: format!("unique key {key} is live again in queue {}", record.queue),
                });
            }
        }
        self.history.remove(&id);
        self.jobs.insert(
            id,
            Job {
                id,
                queue: record.queue,
                priority: record.priority,
                unique_key: record.unique_key,
                group_key: record.group_key,
                payload: record.payload,
                attempts: 0,
                max_attempts: record.max_attempts,
                snoozes: record.snoozes,
                available_at: now,
                lease_until: None,
                locked_by: None,
                first_locked_at: None,
                last_error: record.last_error,
                created_at: record.created_at,
                updated_at: now,
                trace_context: record.trace_context,
            },
        );
        Ok(())
    }

    /// The jobs reclaim takes at `now`, in its order: stalled ones by lease
    /// end, then exhausted ones.
    pub(crate) fn reclaimable(&self, now: DateTime<Utc>) -> Vec<JobId> {
        let mut stalled: Vec<(DateTime<Utc>, JobId)> = Vec::new();
        let mut exhausted: Vec<JobId> = Vec::new();
        for job in self.jobs.values() {
            match (job.state(now), job.lease_until) {
                (JobState::Stalled, Some(until)) => stalled.push((until, job.id)),
                (JobState::Exhausted, _) => exhausted.push(job.id),
                _ => {}
            }
        }
        stalled.sort();
        stalled
            .into_iter()
            .map(|(_, id)| id)
            .chain(exhausted)
            .collect()
    }

    /// Reclaims the jobs `ids`: requeues those with attempts left, dead
    /// letters the rest.
    pub(crate) fn reclaim(&mut self, ids: &[JobId], now: DateTime<Utc>) -> ReclaimOutcome {
        let mut outcome = ReclaimOutcome::default();
        let mut dead = Vec::new();
        for &id in ids {
            let Some(job) = self.jobs.get_mut(&id) else {
                continue;
            };
            if let Some(worker) = job.locked_by.take() {
                job.last_error = Some(json!({
                    "kind": "lease_expired",
                    "worker_id": worker.as_str(),
                    "attempt": job.attempts,
                }));
                job.lease_until = None;
                job.available_at = now;
                job.updated_at = now;
            }
            if job.attempts >= job.max_attempts {
                let archive = Archive {
                    status: FinalStatus::DeadLetter,
                    result: None,
                    last_error: None,
                    processed_by: None,
                };
                dead.push((id, archive));
                outcome.dead_lettered += 1;
            } else {
                outcome.requeued += 1;
            }
        }
        self.archive_all(dead, now);
        outcome
    }
}
