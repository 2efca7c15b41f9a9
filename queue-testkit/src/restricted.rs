//! A storage seen through fewer capabilities: [`Restricted`].
//!
//! It answers `capabilities()` with what it was given (never more than the
//! inner storage declares) and returns
//! [`QueueError::NotSupported`](queue_core::QueueError::NotSupported) for
//! every method of a capability it hides, as a backend that never
//! implemented it would. The kit runs its own suite through it to prove
//! that each case names every capability it uses; an author can run the
//! worker or their own cases through it to see how they behave on a
//! smaller backend.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use queue_core::{
    Ack, Capabilities, Capability, DequeueRequest, EnqueueOutcome, GroupKey, GroupLimit,
    HistoryFilter, HistoryPage, HistoryRecord, Job, JobFilter, JobId, JobPage, Lease, NackOutcome,
    NewJob, PeriodicFire, PruneRequest, QueueConfig, QueueLimits, QueueName, QueueSample,
    QueueStats, ReclaimOutcome, Result, Retry, ScheduleRecord, Storage, Throughput, Wakeups,
    WorkerId, WorkerInfo, WorkerRecord,
};
use serde_json::Value;

use crate::suite::{Fixture, StorageFactory};

/// `inner`, offering only the capabilities it was given.
pub struct Restricted<S> {
    inner: Arc<S>,
    offered: Capabilities,
}

impl<S: Storage> Restricted<S> {
    /// `inner` with only `offered` of its declared capabilities.
    pub fn new(inner: S, offered: Capabilities) -> Self {
        Self::shared(Arc::new(inner), offered)
    }

    /// [`Restricted::new`] over a storage that others keep using
    /// unrestricted.
    pub fn shared(inner: Arc<S>, offered: Capabilities) -> Self {
        let offered = inner
            .capabilities()
            .iter()
            .filter(|c| offered.supports(*c))
            .collect();
        Self { inner, offered }
    }

    fn gate(&self, capability: Capability, operation: &'static str) -> Result<()> {
        self.offered.require(capability, operation)
    }

    /// Refuses jobs with a group key unless group limits are offered, as a
    /// backend without them does.
    fn gate_groups(&self, jobs: &[NewJob], operation: &'static str) -> Result<()> {
        if jobs.iter().any(|job| job.current_group_key().is_some()) {
            self.gate(Capability::GroupLimits, operation)?;
        }
        if jobs
            .iter()
            .any(|job| !job.current_dependencies().is_empty())
        {
            self.gate(Capability::Dependencies, operation)?;
        }
        if jobs.iter().any(|job| job.current_joins().is_some()) {
            self.gate(Capability::Batches, operation)?;
        }
        Ok(())
    }
}

/// A [`StorageFactory`] whose storages are another factory's, restricted to
/// `offered`.
pub struct RestrictedFactory<F> {
    /// The factory that makes the real storages.
    pub inner: F,
    /// What the storages offer of what they declare.
    pub offered: Capabilities,
}

#[async_trait]
impl<F: StorageFactory> StorageFactory for RestrictedFactory<F> {
    type Storage = Restricted<F::Storage>;

    async fn create(&self, clock: queue_core::Clock) -> Fixture<Self::Storage> {
        let mut inner = self.inner.create(clock).await;
        let second = inner.take_second_handle();
        let (storage, teardown) = inner.into_parts();
        let offered = self.offered;
        let mut fixture = Fixture::new(Restricted::new(storage, offered));
        if let Some(teardown) = teardown {
            fixture = fixture.with_teardown(teardown);
        }
        if let Some(open) = second {
            fixture =
                fixture.with_second_handle(async move { Restricted::new(open.await, offered) });
        }
        fixture
    }
}

#[async_trait]
impl<S: Storage> Storage for Restricted<S> {
    fn capabilities(&self) -> Capabilities {
        self.offered
    }

    async fn now(&self) -> Result<DateTime<Utc>> {
        self.inner.now().await
    }

    async fn enqueue(&self, job: NewJob) -> Result<EnqueueOutcome> {
        self.gate_groups(std::slice::from_ref(&job), "enqueue")?;
        self.inner.enqueue(job).await
    }

    async fn enqueue_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<EnqueueOutcome>> {
        self.gate_groups(&jobs, "enqueue_batch")?;
        self.inner.enqueue_batch(jobs).await
    }

    async fn dequeue(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        self.inner.dequeue(request).await
    }

    async fn next_due(&self, queues: &[QueueName]) -> Result<Option<Duration>> {
        self.inner.next_due(queues).await
    }

    async fn ack(&self, lease: &Lease, result: Option<Value>) -> Result<()> {
        self.inner.ack(lease, result).await
    }

    async fn ack_batch(&self, acks: &[Ack]) -> Result<Vec<bool>> {
        self.inner.ack_batch(acks).await
    }

    async fn nack(&self, lease: &Lease, error: Value, retry: Retry) -> Result<NackOutcome> {
        self.inner.nack(lease, error, retry).await
    }

    async fn snooze(&self, lease: &Lease, delay: Duration) -> Result<DateTime<Utc>> {
        self.gate(Capability::Snooze, "snooze")?;
        self.inner.snooze(lease, delay).await
    }

    async fn release(&self, lease: &Lease) -> Result<bool> {
        self.inner.release(lease).await
    }

    async fn heartbeat(&self, lease: &Lease, extend_by: Duration) -> Result<bool> {
        self.inner.heartbeat(lease, extend_by).await
    }

    async fn heartbeat_batch(&self, leases: &[Lease], extend_by: Duration) -> Result<Vec<bool>> {
        self.inner.heartbeat_batch(leases, extend_by).await
    }

    async fn reclaim_stalled(&self, limit: u32) -> Result<ReclaimOutcome> {
        self.inner.reclaim_stalled(limit).await
    }

    async fn discard(&self, id: JobId) -> Result<()> {
        self.gate(Capability::Discard, "discard")?;
        self.inner.discard(id).await
    }

    async fn cancel(&self, id: JobId) -> Result<()> {
        self.gate(Capability::Cancel, "cancel")?;
        self.inner.cancel(id).await
    }

    async fn retry_dead_letter(&self, id: JobId) -> Result<()> {
        self.gate(Capability::RetryDeadLetter, "retry_dead_letter")?;
        self.inner.retry_dead_letter(id).await
    }

    async fn prune_history(&self, request: &PruneRequest) -> Result<u64> {
        self.gate(Capability::PruneHistory, "prune_history")?;
        self.inner.prune_history(request).await
    }

    async fn stats_capped(&self, cap: u64) -> Result<Vec<QueueStats>> {
        self.inner.stats_capped(cap).await
    }

    async fn get_job(&self, id: JobId) -> Result<Option<Job>> {
        self.inner.get_job(id).await
    }

    async fn get_history(&self, id: JobId) -> Result<Option<HistoryRecord>> {
        self.inner.get_history(id).await
    }

    async fn list_history(&self, filter: &HistoryFilter) -> Result<HistoryPage> {
        self.inner.list_history(filter).await
    }

    async fn list_dead_letters(&self, filter: &HistoryFilter) -> Result<HistoryPage> {
        self.inner.list_dead_letters(filter).await
    }

    async fn list_jobs(&self, filter: &JobFilter) -> Result<JobPage> {
        self.gate(Capability::ListJobs, "list_jobs")?;
        self.inner.list_jobs(filter).await
    }

    async fn run_now(&self, filter: &JobFilter) -> Result<u64> {
        self.gate(Capability::BulkActions, "run_now")?;
        self.inner.run_now(filter).await
    }

    async fn discard_jobs(&self, filter: &JobFilter) -> Result<u64> {
        self.gate(Capability::BulkActions, "discard_jobs")?;
        self.inner.discard_jobs(filter).await
    }

    async fn retry_dead_letters(&self, filter: &HistoryFilter) -> Result<u64> {
        self.gate(Capability::BulkActions, "retry_dead_letters")?;
        self.inner.retry_dead_letters(filter).await
    }

    async fn throughput(&self, window: Duration) -> Result<Vec<Throughput>> {
        self.gate(Capability::Throughput, "throughput")?;
        self.inner.throughput(window).await
    }

    async fn record_samples(&self, samples: &[QueueSample]) -> Result<()> {
        self.gate(Capability::Samples, "record_samples")?;
        self.inner.record_samples(samples).await
    }

    async fn samples(&self, window: Duration) -> Result<Vec<QueueSample>> {
        self.gate(Capability::Samples, "samples")?;
        self.inner.samples(window).await
    }

    async fn configure_queue(&self, queue: &QueueName, limits: &QueueLimits) -> Result<()> {
        self.gate(Capability::FlowLimits, "configure_queue")?;
        if !self.offered.supports(Capability::GroupLimits) {
            queue_core::backend::refuse_group_concurrency(limits)?;
        }
        if !self.offered.supports(Capability::PriorityAging) {
            queue_core::backend::refuse_priority_aging(limits)?;
        }
        if !self.offered.supports(Capability::FairGroups) {
            queue_core::backend::refuse_fair_groups(limits)?;
        }
        self.inner.configure_queue(queue, limits).await
    }

    async fn set_group_limit(
        &self,
        queue: &QueueName,
        group: &GroupKey,
        limit: Option<u32>,
    ) -> Result<()> {
        self.gate(Capability::GroupLimits, "set_group_limit")?;
        self.inner.set_group_limit(queue, group, limit).await
    }

    async fn group_limits(&self) -> Result<Vec<GroupLimit>> {
        self.gate(Capability::GroupLimits, "group_limits")?;
        self.inner.group_limits().await
    }

    async fn set_group_weight(
        &self,
        queue: &QueueName,
        group: &GroupKey,
        weight: Option<u32>,
    ) -> Result<()> {
        self.gate(Capability::GroupWeights, "set_group_weight")?;
        self.inner.set_group_weight(queue, group, weight).await
    }

    async fn group_weights(&self) -> Result<Vec<queue_core::GroupWeight>> {
        self.gate(Capability::GroupWeights, "group_weights")?;
        self.inner.group_weights().await
    }

    async fn job_links(&self, id: JobId) -> Result<queue_core::JobLinks> {
        self.gate(Capability::Dependencies, "job_links")?;
        self.inner.job_links(id).await
    }

    async fn queue_configs(&self) -> Result<Vec<QueueConfig>> {
        self.gate(Capability::FlowLimits, "queue_configs")?;
        self.inner.queue_configs().await
    }

    async fn enqueue_periodic(&self, fire: &PeriodicFire) -> Result<Option<EnqueueOutcome>> {
        self.gate(Capability::Periodic, "enqueue_periodic")?;
        self.gate_groups(std::slice::from_ref(&fire.job), "enqueue_periodic")?;
        self.inner.enqueue_periodic(fire).await
    }

    async fn schedules(&self) -> Result<Vec<ScheduleRecord>> {
        self.gate(Capability::Periodic, "schedules")?;
        self.inner.schedules().await
    }

    async fn pause_queue(&self, queue: &QueueName) -> Result<()> {
        self.gate(Capability::Pause, "pause_queue")?;
        self.inner.pause_queue(queue).await
    }

    async fn resume_queue(&self, queue: &QueueName) -> Result<()> {
        self.gate(Capability::Pause, "resume_queue")?;
        self.inner.resume_queue(queue).await
    }

    async fn register_worker(&self, worker: &WorkerInfo) -> Result<()> {
        self.gate(Capability::Workers, "register_worker")?;
        self.inner.register_worker(worker).await
    }

    async fn deregister_worker(&self, id: &WorkerId) -> Result<bool> {
        self.gate(Capability::Workers, "deregister_worker")?;
        self.inner.deregister_worker(id).await
    }

    async fn list_workers(
        &self,
        silent_after: Duration,
        forget_after: Duration,
    ) -> Result<Vec<WorkerRecord>> {
        self.gate(Capability::Workers, "list_workers")?;
        self.inner.list_workers(silent_after, forget_after).await
    }

    async fn subscribe(&self) -> Result<Option<Wakeups>> {
        if self.offered.supports(Capability::Wakeups) {
            self.inner.subscribe().await
        } else {
            Ok(None)
        }
    }
}

impl<S> std::fmt::Debug for Restricted<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Restricted")
            .field("offered", &self.offered)
            .finish_non_exhaustive()
    }
}
