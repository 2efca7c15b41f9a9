//! What a storage can do beyond the required core.
//!
//! Every [`crate::Storage`] enqueues, claims, heartbeats, acks, nacks,
//! releases, reclaims, counts and keeps history: those methods are required.
//! Everything else is a [`Capability`]: its methods have a default body that
//! returns [`crate::QueueError::NotSupported`] naming it, and a storage says
//! which ones it implements in [`crate::Storage::capabilities`].
//!
//! So a backend written against one release keeps compiling when a later one
//! adds a capability: it simply does not declare it. The conformance suite
//! runs the cases of each declared capability and reports the others as not
//! run; the worker, the CLI and the dashboard ask before they use one.

use std::fmt;

/// One optional part of the [`crate::Storage`] contract.
///
/// New capabilities are added in minor releases, hence `non_exhaustive`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Capability {
    /// Per-queue concurrency and rate limits that the claim enforces:
    /// `configure_queue`, `queue_configs`.
    FlowLimits,
    /// Stopping and restarting claims from a queue: `pause_queue`,
    /// `resume_queue`.
    Pause,
    /// Leaderless periodic jobs: `enqueue_periodic`, `schedules`.
    Periodic,
    /// Putting a claimed job off without spending an attempt: `snooze`.
    Snooze,
    /// Cancelling a live job and telling its worker to stop: `cancel`.
    Cancel,
    /// Removing one live job into history: `discard`.
    Discard,
    /// Putting one dead letter back into its queue: `retry_dead_letter`.
    RetryDeadLetter,
    /// Deleting old history: `prune_history`.
    PruneHistory,
    /// Searching live jobs by queue, state, id and key: `list_jobs`.
    ListJobs,
    /// Acting on what a filter selects: `run_now`, `discard_jobs`,
    /// `retry_dead_letters`.
    BulkActions,
    /// Completed and failed jobs per queue and minute: `throughput`.
    Throughput,
    /// Telling workers about new work as soon as it commits: `subscribe`
    /// returns a stream.
    Wakeups,
    /// Wake-ups that cross processes: a job committed through any handle,
    /// on any host, wakes the subscribers of every handle on the database
    /// (PostgreSQL's `NOTIFY`, Redis pub/sub). Without it, wake-ups reach
    /// the subscribers of the handle that committed, and workers elsewhere
    /// find the job at their next poll.
    RemoteWakeups,
    /// Enqueueing and acking inside the application's own transaction, with
    /// the backend's own API (see `queue_testkit::transactional`).
    Transactions,
    /// The registry of running workers: `register_worker` (also their
    /// heartbeat), `deregister_worker`, `list_workers`.
    Workers,
    /// Group concurrency: jobs carry a group key
    /// ([`crate::NewJob::group_key`]), a queue's
    /// [`crate::QueueLimits::group_concurrency`] caps the leases one group
    /// holds at once across every handle and host, and one group's own
    /// limit overrides it: `set_group_limit`, `group_limits`. Needs
    /// [`Capability::FlowLimits`] (`configure_queue` sets the queue's
    /// default). A storage without it refuses a group key at enqueue and a
    /// group concurrency at `configure_queue` with `NotSupported`.
    GroupLimits,
    /// Priority aging: a queue's [`crate::QueueLimits::priority_aging`]
    /// makes its claims serve a job waiting `k` periods as if `k` levels
    /// higher (see [`crate::Storage::dequeue`]). Needs
    /// [`Capability::FlowLimits`] (`configure_queue` sets it). A storage
    /// without it refuses a `configure_queue` that sets it with
    /// `NotSupported`.
    PriorityAging,
    /// Start lags and depths per queue and minute, as workers observe
    /// them, for the operator's charts: `record_samples`, `samples`.
    Samples,
    /// Fair claiming between groups: a queue's
    /// [`crate::QueueLimits::fair_groups`] makes its claims serve its
    /// groups in turn within each priority level (see
    /// [`crate::Storage::dequeue`]). Needs [`Capability::FlowLimits`]
    /// (`configure_queue` sets it). A storage without it refuses a
    /// `configure_queue` that sets it with `NotSupported`.
    FairGroups,
    /// Weights between a fair queue's groups: a group's own weight `w`
    /// lets it take `w` jobs each time its turn comes (see
    /// [`crate::Storage::dequeue`]): `set_group_weight`, `group_weights`.
    /// Needs [`Capability::FairGroups`].
    GroupWeights,
    /// Workflows: a job may depend on other jobs
    /// ([`crate::NewJob::depends_on`]) and waits until they have finished
    /// (see [`crate::Storage::enqueue_batch`]); `job_links` reads a job's
    /// dependencies, their results, and its dependants. A storage without
    /// it refuses a job with dependencies with `NotSupported`.
    Dependencies,
    /// Batches grow: a job may join an open batch
    /// ([`crate::NewJob::joins`]), whose callback then waits for it too
    /// (see [`crate::batch`]). Needs [`Capability::Dependencies`]. A
    /// storage without it refuses such a job with `NotSupported`.
    Batches,
}

impl Capability {
    /// Every capability, in declaration order.
    pub const ALL: &'static [Capability] = &[
        Capability::FlowLimits,
        Capability::Pause,
        Capability::Periodic,
        Capability::Snooze,
        Capability::Cancel,
        Capability::Discard,
        Capability::RetryDeadLetter,
        Capability::PruneHistory,
        Capability::ListJobs,
        Capability::BulkActions,
        Capability::Throughput,
        Capability::Wakeups,
        Capability::RemoteWakeups,
        Capability::Transactions,
        Capability::Workers,
        Capability::GroupLimits,
        Capability::PriorityAging,
        Capability::Samples,
        Capability::FairGroups,
        Capability::GroupWeights,
        Capability::Dependencies,
        Capability::Batches,
    ];

    /// Its name in snake case, as reports and errors print it.
    pub const fn name(self) -> &'static str {
        match self {
            Capability::FlowLimits => "flow_limits",
            Capability::Pause => "pause",
            Capability::Periodic => "periodic",
            Capability::Snooze => "snooze",
            Capability::Cancel => "cancel",
            Capability::Discard => "discard",
            Capability::RetryDeadLetter => "retry_dead_letter",
            Capability::PruneHistory => "prune_history",
            Capability::ListJobs => "list_jobs",
            Capability::BulkActions => "bulk_actions",
            Capability::Throughput => "throughput",
            Capability::Wakeups => "wakeups",
            Capability::RemoteWakeups => "remote_wakeups",
            Capability::Transactions => "transactions",
            Capability::Workers => "workers",
            Capability::GroupLimits => "group_limits",
            Capability::PriorityAging => "priority_aging",
            Capability::Samples => "samples",
            Capability::FairGroups => "fair_groups",
            Capability::GroupWeights => "group_weights",
            Capability::Dependencies => "dependencies",
            Capability::Batches => "batches",
        }
    }

    /// What it lets a user do, as an error message says it: "this storage
    /// does not support {what}".
    pub const fn what(self) -> &'static str {
        match self {
            Capability::FlowLimits => "concurrency and rate limits per queue",
            Capability::Pause => "pausing queues",
            Capability::Periodic => "periodic jobs",
            Capability::Snooze => "snoozing jobs",
            Capability::Cancel => "cancelling jobs",
            Capability::Discard => "discarding jobs",
            Capability::RetryDeadLetter => "retrying dead letters",
            Capability::PruneHistory => "pruning history",
            Capability::ListJobs => "listing live jobs",
            Capability::BulkActions => "bulk actions on what a filter selects",
            Capability::Throughput => "throughput per minute",
            Capability::Wakeups => "wake-ups",
            Capability::RemoteWakeups => "wake-ups from other processes",
            Capability::Transactions => "enqueueing in the application's transaction",
            Capability::Workers => "the worker registry",
            Capability::GroupLimits => "group concurrency limits",
            Capability::PriorityAging => "priority aging",
            Capability::Samples => "start lag and depth samples",
            Capability::FairGroups => "fair claiming between groups",
            Capability::GroupWeights => "weights between fair groups",
            Capability::Dependencies => "jobs that depend on other jobs",
            Capability::Batches => "jobs that join an open batch",
        }
    }

    /// The [`crate::Storage`] methods it covers.
    pub const fn methods(self) -> &'static [&'static str] {
        match self {
            Capability::FlowLimits => &["configure_queue", "queue_configs"],
            Capability::Pause => &["pause_queue", "resume_queue"],
            Capability::Periodic => &["enqueue_periodic", "schedules"],
            Capability::Snooze => &["snooze"],
            Capability::Cancel => &["cancel"],
            Capability::Discard => &["discard"],
            Capability::RetryDeadLetter => &["retry_dead_letter"],
            Capability::PruneHistory => &["prune_history"],
            Capability::ListJobs => &["list_jobs"],
            Capability::BulkActions => &["run_now", "discard_jobs", "retry_dead_letters"],
            Capability::Throughput => &["throughput"],
            Capability::Wakeups | Capability::RemoteWakeups => &["subscribe"],
            Capability::Transactions => &[],
            Capability::Workers => &["register_worker", "deregister_worker", "list_workers"],
            Capability::GroupLimits => &["set_group_limit", "group_limits"],
            Capability::GroupWeights => &["set_group_weight", "group_weights"],
            Capability::Dependencies => &["job_links"],
            // Settings of `configure_queue`, or of `NewJob`: no method of
            // their own.
            Capability::PriorityAging | Capability::FairGroups | Capability::Batches => &[],
            Capability::Samples => &["record_samples", "samples"],
        }
    }

    const fn bit(self) -> u32 {
        1 << self as u32
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of [`Capability`]: what one storage declares.
///
/// ```
/// use queue_core::{Capabilities, Capability};
///
/// let declared = Capabilities::CORE
///     .with(Capability::Pause)
///     .with(Capability::Snooze);
/// assert!(declared.supports(Capability::Pause));
/// assert!(!declared.supports(Capability::Periodic));
/// assert_eq!(declared.to_string(), "pause, snooze");
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Capabilities(u32);

impl Capabilities {
    /// The required core only: no optional capability.
    pub const CORE: Capabilities = Capabilities(0);

    /// What workers and operators use beyond the core, as of release 0.1:
    /// every capability but wake-ups and transactions, which depend on the
    /// database. Fixed: a capability added later is not in it, so a backend
    /// that declares this set never claims more than it wrote.
    pub const OPERATIONS: Capabilities = Capabilities::of(&[
        Capability::FlowLimits,
        Capability::Pause,
        Capability::Periodic,
        Capability::Snooze,
        Capability::Cancel,
        Capability::Discard,
        Capability::RetryDeadLetter,
        Capability::PruneHistory,
        Capability::ListJobs,
        Capability::BulkActions,
        Capability::Throughput,
    ]);

    /// This set and `capability`.
    #[must_use]
    pub const fn with(self, capability: Capability) -> Self {
        Capabilities(self.0 | capability.bit())
    }

    /// This set without `capability`.
    #[must_use]
    pub const fn without(self, capability: Capability) -> Self {
        Capabilities(self.0 & !capability.bit())
    }

    /// The set of the capabilities listed.
    pub const fn of(capabilities: &[Capability]) -> Self {
        let mut set = Capabilities::CORE;
        let mut i = 0;
        while i < capabilities.len() {
            set = set.with(capabilities[i]);
            i += 1;
        }
        set
    }

    /// True when `capability` is in the set.
    pub const fn supports(self, capability: Capability) -> bool {
        self.0 & capability.bit() != 0
    }

    /// True when every one of `capabilities` is in the set.
    pub fn supports_all(self, capabilities: &[Capability]) -> bool {
        capabilities.iter().all(|c| self.supports(*c))
    }

    /// The capabilities in the set, in [`Capability::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Capability> {
        Capability::ALL
            .iter()
            .copied()
            .filter(move |c| self.supports(*c))
    }

    /// The capabilities not in the set, in [`Capability::ALL`] order.
    pub fn missing(self) -> impl Iterator<Item = Capability> {
        Capability::ALL
            .iter()
            .copied()
            .filter(move |c| !self.supports(*c))
    }

    /// `Ok(())` when `capability` is in the set, else the
    /// [`crate::QueueError::NotSupported`] a caller returns before it starts
    /// anything: `operation` names what it was about to do.
    pub fn require(self, capability: Capability, operation: &'static str) -> crate::Result<()> {
        if self.supports(capability) {
            Ok(())
        } else {
            Err(crate::QueueError::not_supported(capability, operation))
        }
    }
}

impl fmt::Display for Capabilities {
    /// The names, comma-separated, or `core only`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for capability in self.iter() {
            if !first {
                f.write_str(", ")?;
            }
            f.write_str(capability.name())?;
            first = false;
        }
        if first {
            f.write_str("core only")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl FromIterator<Capability> for Capabilities {
    fn from_iter<I: IntoIterator<Item = Capability>>(iter: I) -> Self {
        iter.into_iter()
            .fold(Capabilities::CORE, Capabilities::with)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_capability_has_its_own_bit_and_name() {
        let all = Capabilities::of(Capability::ALL);
        assert_eq!(all.iter().count(), Capability::ALL.len());
        let mut names: Vec<_> = Capability::ALL.iter().map(|c| c.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Capability::ALL.len());
    }

    #[test]
    fn a_set_supports_what_it_was_given_and_nothing_else() {
        let set = Capabilities::CORE
            .with(Capability::Cancel)
            .with(Capability::Wakeups);
        assert!(set.supports(Capability::Cancel) && set.supports(Capability::Wakeups));
        assert_eq!(set.missing().count(), Capability::ALL.len() - 2);
        assert!(!set.without(Capability::Cancel).supports(Capability::Cancel));
        assert_eq!(Capabilities::CORE.to_string(), "core only");
        let error = set.require(Capability::Pause, "pause_queue").unwrap_err();
        assert_eq!(
            error.to_string(),
            "this storage does not support pausing queues (capability pause, Storage::pause_queue)"
        );
    }
}
