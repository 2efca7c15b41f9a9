//! Group concurrency in the claim: the slots each group of a queue has
//! left, as every backend counts them, and what a storage without the
//! capability refuses.

use std::collections::HashMap;

use crate::{Capability, GroupKey, QueueError, QueueLimits, QueueName, Result, ValidJob};

/// The group slots of one queue during one claim: each group's limit (its
/// own [`crate::GroupLimit`], else the queue's
/// [`QueueLimits::group_concurrency`]) less the leases its jobs hold.
///
/// A backend fills it with the queue's limits and its held leases per
/// group (counted from the live rows, never kept as a counter, so every way
/// a lease ends gives its slot back by itself), then walks the queue's
/// claimable jobs in claim order and keeps those [`GroupSlots::take`]
/// accepts: a job of a full group is skipped, and the walk goes on to the
/// next job. All of it inside the claim's transaction or lock, so nothing
/// claims in between.
#[derive(Debug, Clone, Default)]
pub struct GroupSlots {
    default: Option<u32>,
    limits: HashMap<GroupKey, u32>,
    held: HashMap<GroupKey, u64>,
}

impl GroupSlots {
    /// The slots of a queue whose groups get `default` each (`None`: only
    /// the groups of `overrides` are limited).
    pub fn new(default: Option<u32>, overrides: impl IntoIterator<Item = (GroupKey, u32)>) -> Self {
        Self {
            default,
            limits: overrides.into_iter().collect(),
            held: HashMap::new(),
        }
    }

    /// True when some group of the queue is limited: otherwise a claim
    /// need not count anything.
    pub fn limits_any(&self) -> bool {
        self.default.is_some() || !self.limits.is_empty()
    }

    /// Records that `held` jobs of `group` hold a lease (expired ones
    /// included, until reclaim).
    pub fn hold(&mut self, group: GroupKey, held: u64) {
        *self.held.entry(group).or_default() += held;
    }

    /// The limit of `group`: its own, else the queue's default.
    pub fn limit(&self, group: &GroupKey) -> Option<u32> {
        self.limits.get(group).copied().or(self.default)
    }

    /// True when `group` has no slot left.
    pub fn is_full(&self, group: &GroupKey) -> bool {
        self.limit(group)
            .is_some_and(|limit| self.held.get(group).copied().unwrap_or(0) >= u64::from(limit))
    }

    /// Takes a slot for a job of `group` if one is left, and says whether
    /// it did. A job without a group always gets one.
    pub fn take(&mut self, group: Option<&GroupKey>) -> bool {
        let Some(group) = group else {
            return true;
        };
        if self.is_full(group) {
            return false;
        }
        *self.held.entry(group.clone()).or_default() += 1;
        true
    }

    /// The groups with no slot left, sorted: what a backend's pick may
    /// exclude before it reads a row.
    pub fn full_groups(&self) -> Vec<&GroupKey> {
        let mut full: Vec<&GroupKey> = (self.held.keys())
            .filter(|group| self.is_full(group))
            .collect();
        full.sort();
        full
    }
}

/// What a storage that does not declare [`Capability::GroupLimits`]
/// returns from an enqueue of jobs of which one has a group key: it must
/// not store the job as if it had none.
///
/// # Errors
/// [`QueueError::NotSupported`] (operation `operation`) when any job has a
/// group key.
pub fn refuse_group_keys(jobs: &[ValidJob], operation: &'static str) -> Result<()> {
    if jobs.iter().any(|job| job.group_key.is_some()) {
        Err(QueueError::not_supported(
            Capability::GroupLimits,
            operation,
        ))
    } else {
        Ok(())
    }
}

/// What a storage that does not declare [`Capability::Dependencies`]
/// returns from an enqueue of jobs of which one has a dependency: it must
/// not run a job before the jobs it waits for.
///
/// # Errors
/// [`QueueError::NotSupported`] (operation `operation`) when any job has a
/// dependency.
pub fn refuse_dependencies(jobs: &[ValidJob], operation: &'static str) -> Result<()> {
    if jobs.iter().any(|job| !job.dependencies.is_empty()) {
        Err(QueueError::not_supported(
            Capability::Dependencies,
            operation,
        ))
    } else {
        Ok(())
    }
}

/// What a storage that does not declare [`Capability::Batches`] returns
/// from an enqueue of jobs of which one joins a batch: it must not write a
/// job its batch's callback does not wait for.
///
/// # Errors
/// [`QueueError::NotSupported`] (operation `operation`) when any job joins
/// a batch.
pub fn refuse_joins(jobs: &[ValidJob], operation: &'static str) -> Result<()> {
    if jobs.iter().any(|job| job.joins.is_some()) {
        Err(QueueError::not_supported(Capability::Batches, operation))
    } else {
        Ok(())
    }
}

/// What a storage that does not declare [`Capability::GroupLimits`]
/// returns from `configure_queue` with a group concurrency: it must not
/// store limits it would not enforce.
///
/// # Errors
/// [`QueueError::NotSupported`] when `limits.group_concurrency` is set.
pub fn refuse_group_concurrency(limits: &QueueLimits) -> Result<()> {
    if limits.group_concurrency.is_some() {
        Err(QueueError::not_supported(
            Capability::GroupLimits,
            "configure_queue",
        ))
    } else {
        Ok(())
    }
}

/// What `set_group_limit` returns for a queue without a `queue_config`
/// row: the same error, in the same words, on every backend.
pub fn unconfigured_queue(queue: &QueueName) -> QueueError {
    QueueError::not_found(format!(
        "queue {queue} (it has no queue_config row: configure or pause it first)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> GroupKey {
        GroupKey::new(name).expect("valid key")
    }

    #[test]
    fn a_group_takes_slots_up_to_its_limit_and_an_override_replaces_the_default() {
        let mut slots = GroupSlots::new(Some(2), [(key("big"), 3), (key("one"), 1)]);
        slots.hold(key("a"), 1);
        assert!(slots.take(Some(&key("a"))));
        assert!(!slots.take(Some(&key("a"))), "a holds 2 of 2");
        assert!(slots.take(None), "no group, no limit");
        assert!(slots.take(Some(&key("one"))));
        assert!(!slots.take(Some(&key("one"))));
        for _ in 0..3 {
            assert!(slots.take(Some(&key("big"))));
        }
        assert!(!slots.take(Some(&key("big"))));
        assert_eq!(
            slots.full_groups(),
            vec![&key("a"), &key("big"), &key("one")]
        );
    }

    #[test]
    fn without_a_default_only_the_overridden_groups_are_limited() {
        let mut slots = GroupSlots::new(None, [(key("x"), 1)]);
        assert!(slots.limits_any());
        assert!((0..10).all(|_| slots.take(Some(&key("y")))));
        assert!(slots.take(Some(&key("x"))));
        assert!(!slots.take(Some(&key("x"))));
        assert!(!GroupSlots::new(None, []).limits_any());
    }
}
