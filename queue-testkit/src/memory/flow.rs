//! `MemoryStorage`'s flow limits, snooze, cancel and periodic fires.

use std::time::Duration;

use chrono::{DateTime, Utc};
use queue_core::{
    Bucket, DequeueRequest, EnqueueOutcome, FinalStatus, GroupKey, GroupLimit, GroupWeight, Job,
    JobId, Lease, QueueConfig, QueueError, QueueLimits, QueueName, Result, ScheduleRecord,
    ValidFire,
};

use super::storage::after;
use super::{Archive, State};

impl State {
    /// `request` narrowed to what each queue's limits allow at `now`.
    pub(crate) fn within_limits(
        &self,
        request: &DequeueRequest,
        now: DateTime<Utc>,
    ) -> Option<DequeueRequest> {
        self.within_limits_counting(request, now, |queue| self.leases_held(queue))
    }

    /// [`State::within_limits`] with each queue's held leases counted by
    /// `held` (the broken storages count them wrongly).
    pub(crate) fn within_limits_counting(
        &self,
        request: &DequeueRequest,
        now: DateTime<Utc>,
        held: impl Fn(&QueueName) -> u64,
    ) -> Option<DequeueRequest> {
        let allowances: Vec<(QueueName, u32)> = request
            .queues()
            .iter()
            .filter_map(|queue| {
                let limits = self.limits.get(queue)?;
                let bucket = self.buckets.get(queue).copied();
                Some((queue.clone(), limits.allowance(held(queue), bucket, now)))
            })
            .collect();
        request.narrowed(&allowances)
    }

    /// How many of `queue`'s jobs hold a lease, expired ones included.
    pub(crate) fn leases_held(&self, queue: &QueueName) -> u64 {
        (self.jobs.values())
            .filter(|job| &job.queue == queue && job.lease_until.is_some())
            .count() as u64
    }

    /// Claims the best jobs `narrowed` (a request already within limits)
    /// allows, and takes their tokens.
    pub(crate) fn claim_within(
        &mut self,
        narrowed: &DequeueRequest,
        now: DateTime<Utc>,
    ) -> Vec<Job> {
        let ids = self.claimable(narrowed, now);
        let claimed = self.claim(&ids, narrowed, now);
        self.take_tokens(&claimed, now);
        claimed
    }

    /// Takes a token per claimed job from rate-limited queues' buckets.
    pub(crate) fn take_tokens(&mut self, claimed: &[Job], now: DateTime<Utc>) {
        let limited: Vec<(QueueName, queue_core::RateLimit)> = self
            .limits
            .iter()
            .filter_map(|(queue, limits)| Some((queue.clone(), limits.rate?)))
            .collect();
        for (queue, rate) in limited {
            let taken = claimed.iter().filter(|job| job.queue == queue).count() as u32;
            let bucket = self.buckets.get(&queue).copied();
            self.buckets
                .insert(queue, Bucket::after(&rate, bucket, now, taken));
        }
    }

    /// Moves live job `id` into history as `status` (discard or cancel).
    pub(crate) fn remove(
        &mut self,
        id: JobId,
        status: FinalStatus,
        now: DateTime<Utc>,
    ) -> Result<()> {
        if !self.jobs.contains_key(&id) {
            return Err(QueueError::not_found(format!("live job {id}")));
        }
        self.archive(id, Archive::removed(status), now);
        Ok(())
    }

    pub(crate) fn snooze(
        &mut self,
        lease: &Lease,
        delay: Duration,
        now: DateTime<Utc>,
    ) -> Result<DateTime<Utc>> {
        let job = self.held(lease).ok_or_else(|| QueueError::LeaseLost {
            lease: lease.clone(),
        })?;
        let at = after(now, delay);
        job.lease_until = None;
        job.locked_by = None;
        job.attempts -= 1;
        job.snoozes += 1;
        job.available_at = at;
        job.updated_at = now;
        Ok(at)
    }

    pub(crate) fn configure(
        &mut self,
        queue: &QueueName,
        limits: &QueueLimits,
        now: DateTime<Utc>,
    ) {
        match limits.rate {
            Some(rate) => self.buckets.insert(queue.clone(), Bucket::full(&rate, now)),
            None => self.buckets.remove(queue),
        };
        self.configured.insert(queue.clone());
        if *limits == QueueLimits::default() {
            self.limits.remove(queue);
        } else {
            self.limits.insert(queue.clone(), *limits);
        }
    }

    /// Gives `group` of `queue` its own limit, or removes it.
    pub(crate) fn set_group_limit(
        &mut self,
        queue: &QueueName,
        group: &GroupKey,
        limit: Option<u32>,
    ) -> Result<()> {
        if let Some(limit) = limit {
            GroupLimit::validate_limit(limit)?;
        }
        if !self.configured.contains(queue) {
            return Err(queue_core::backend::unconfigured_queue(queue));
        }
        let key = (queue.clone(), group.clone());
        match limit {
            Some(limit) => self.group_limits.insert(key, limit),
            None => self.group_limits.remove(&key),
        };
        Ok(())
    }

    /// Every group's own limit, by queue, then group.
    pub(crate) fn group_limit_list(&self) -> Vec<GroupLimit> {
        (self.group_limits.iter())
            .map(|((queue, group), limit)| GroupLimit {
                queue: queue.clone(),
                group: group.clone(),
                limit: *limit,
            })
            .collect()
    }

    /// Gives `group` of `queue` its own weight, or removes it.
    pub(crate) fn set_group_weight(
        &mut self,
        queue: &QueueName,
        group: &GroupKey,
        weight: Option<u32>,
    ) -> Result<()> {
        if let Some(weight) = weight {
            GroupWeight::validate_weight(weight)?;
        }
        if !self.configured.contains(queue) {
            return Err(queue_core::backend::unconfigured_queue(queue));
        }
        let key = (queue.clone(), group.clone());
        match weight {
            Some(weight) => self.group_weights.insert(key, weight),
            None => self.group_weights.remove(&key),
        };
        Ok(())
    }

    /// Every group's own weight, by queue, then group.
    pub(crate) fn group_weight_list(&self) -> Vec<GroupWeight> {
        (self.group_weights.iter())
            .map(|((queue, group), weight)| GroupWeight {
                queue: queue.clone(),
                group: group.clone(),
                weight: *weight,
            })
            .collect()
    }

    /// The weight of `group` (`None`: no group key) in fair `queue`.
    pub(crate) fn group_weight(&self, queue: &QueueName, group: Option<&GroupKey>) -> u32 {
        group
            .and_then(|group| self.group_weights.get(&(queue.clone(), group.clone())))
            .copied()
            .unwrap_or(1)
    }

    pub(crate) fn configs(&self) -> Vec<QueueConfig> {
        let mut queues: Vec<&QueueName> = self.limits.keys().chain(&self.paused).collect();
        queues.sort();
        queues.dedup();
        queues
            .into_iter()
            .map(|queue| QueueConfig {
                queue: queue.clone(),
                paused: self.paused.contains(queue),
                limits: self.limits.get(queue).copied().unwrap_or_default(),
            })
            .collect()
    }

    pub(crate) fn fire(&mut self, fire: ValidFire, now: DateTime<Utc>) -> Option<EnqueueOutcome> {
        if let Some(last) = self.fires.get(&fire.schedule)
            && last.last_fire_at >= fire.fire_at
        {
            return None;
        }
        self.fires.insert(
            fire.schedule.clone(),
            ScheduleRecord {
                schedule: fire.schedule,
                last_fire_at: fire.fire_at,
                next_fire_at: fire.next_fire_at,
            },
        );
        Some(self.insert(fire.job, now))
    }
}
