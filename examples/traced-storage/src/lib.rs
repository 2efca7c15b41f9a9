//! `TracedStorage`: wraps any [`Storage`] and logs each call, its arguments
//! that matter and its outcome, at `debug` level (errors at `warn`).
//!
//! It exists as the repository's example of an out-of-tree backend: see
//! `tests/` for the two lines that run the conformance suite and the model
//! test against it.

use std::time::Duration;

use chrono::{DateTime, Utc};
use queue_core::{
    Ack, DequeueRequest, EnqueueOutcome, HistoryFilter, HistoryPage, HistoryRecord, Job, JobFilter,
    JobId, JobPage, Lease, NackOutcome, NewJob, PeriodicFire, PruneRequest, QueueConfig,
    QueueLimits, QueueName, QueueSample, QueueStats, ReclaimOutcome, Result, Retry, ScheduleRecord,
    Storage, Throughput, WorkerId, WorkerInfo, WorkerRecord, async_trait,
};
use serde_json::Value;

/// A storage that logs every call to the storage it wraps.
#[derive(Debug, Default)]
pub struct TracedStorage<S> {
    inner: S,
}

impl<S> TracedStorage<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self { inner }
    }

    /// The wrapped storage.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

/// Logs the outcome of `operation` and hands it back.
fn traced<T: std::fmt::Debug>(operation: &'static str, outcome: Result<T>) -> Result<T> {
    match &outcome {
        Ok(value) => tracing::debug!(operation, ?value, "storage call"),
        Err(error) => tracing::warn!(operation, %error, "storage call failed"),
    }
    outcome
}

#[async_trait]
impl<S: Storage> Storage for TracedStorage<S> {
    fn capabilities(&self) -> queue_core::Capabilities {
        self.inner.capabilities()
    }

    async fn now(&self) -> Result<DateTime<Utc>> {
        traced("now", self.inner.now().await)
    }

    async fn enqueue(&self, job: NewJob) -> Result<EnqueueOutcome> {
        traced("enqueue", self.inner.enqueue(job).await)
    }

    async fn enqueue_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<EnqueueOutcome>> {
        traced("enqueue_batch", self.inner.enqueue_batch(jobs).await)
    }

    async fn dequeue(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        let jobs = self.inner.dequeue(request).await;
        match &jobs {
            Ok(jobs) => {
                let ids: Vec<JobId> = jobs.iter().map(|job| job.id).collect();
                tracing::debug!(operation = "dequeue", ?ids, "storage call");
            }
            Err(error) => tracing::warn!(operation = "dequeue", %error, "storage call failed"),
        }
        jobs
    }

    async fn next_due(&self, queues: &[QueueName]) -> Result<Option<Duration>> {
        traced("next_due", self.inner.next_due(queues).await)
    }

    async fn ack(&self, lease: &Lease, result: Option<Value>) -> Result<()> {
        traced("ack", self.inner.ack(lease, result).await)
    }

    async fn ack_batch(&self, acks: &[Ack]) -> Result<Vec<bool>> {
        traced("ack_batch", self.inner.ack_batch(acks).await)
    }

    async fn nack(&self, lease: &Lease, error: Value, retry: Retry) -> Result<NackOutcome> {
        traced("nack", self.inner.nack(lease, error, retry).await)
    }

    async fn release(&self, lease: &Lease) -> Result<bool> {
        traced("release", self.inner.release(lease).await)
    }

    async fn heartbeat(&self, lease: &Lease, extend_by: Duration) -> Result<bool> {
        traced("heartbeat", self.inner.heartbeat(lease, extend_by).await)
    }

    async fn heartbeat_batch(&self, leases: &[Lease], extend_by: Duration) -> Result<Vec<bool>> {
        traced(
            "heartbeat_batch",
            self.inner.heartbeat_batch(leases, extend_by).await,
        )
    }

    async fn reclaim_stalled(&self, limit: u32) -> Result<ReclaimOutcome> {
        traced("reclaim_stalled", self.inner.reclaim_stalled(limit).await)
    }

    async fn discard(&self, id: JobId) -> Result<()> {
        traced("discard", self.inner.discard(id).await)
    }

    async fn retry_dead_letter(&self, id: JobId) -> Result<()> {
        traced("retry_dead_letter", self.inner.retry_dead_letter(id).await)
    }

    async fn prune_history(&self, request: &PruneRequest) -> Result<u64> {
        traced("prune_history", self.inner.prune_history(request).await)
    }

    async fn stats_capped(&self, cap: u64) -> Result<Vec<QueueStats>> {
        traced("stats", self.inner.stats_capped(cap).await)
    }

    async fn get_job(&self, id: JobId) -> Result<Option<Job>> {
        traced("get_job", self.inner.get_job(id).await)
    }

    async fn get_history(&self, id: JobId) -> Result<Option<HistoryRecord>> {
        traced("get_history", self.inner.get_history(id).await)
    }

    async fn list_history(&self, filter: &HistoryFilter) -> Result<HistoryPage> {
        traced("list_history", self.inner.list_history(filter).await)
    }

    async fn list_jobs(&self, filter: &JobFilter) -> Result<JobPage> {
        traced("list_jobs", self.inner.list_jobs(filter).await)
    }

    async fn run_now(&self, filter: &JobFilter) -> Result<u64> {
        traced("run_now", self.inner.run_now(filter).await)
    }

    async fn discard_jobs(&self, filter: &JobFilter) -> Result<u64> {
        traced("discard_jobs", self.inner.discard_jobs(filter).await)
    }

    async fn retry_dead_letters(&self, filter: &HistoryFilter) -> Result<u64> {
        traced(
            "retry_dead_letters",
            self.inner.retry_dead_letters(filter).await,
        )
    }

    async fn throughput(&self, window: Duration) -> Result<Vec<Throughput>> {
        traced("throughput", self.inner.throughput(window).await)
    }

    async fn record_samples(&self, samples: &[QueueSample]) -> Result<()> {
        traced("record_samples", self.inner.record_samples(samples).await)
    }

    async fn samples(&self, window: Duration) -> Result<Vec<QueueSample>> {
        traced("samples", self.inner.samples(window).await)
    }

    async fn list_dead_letters(&self, filter: &HistoryFilter) -> Result<HistoryPage> {
        traced(
            "list_dead_letters",
            self.inner.list_dead_letters(filter).await,
        )
    }

    async fn pause_queue(&self, queue: &QueueName) -> Result<()> {
        traced("pause_queue", self.inner.pause_queue(queue).await)
    }

    async fn resume_queue(&self, queue: &QueueName) -> Result<()> {
        traced("resume_queue", self.inner.resume_queue(queue).await)
    }

    async fn snooze(&self, lease: &Lease, delay: Duration) -> Result<DateTime<Utc>> {
        traced("snooze", self.inner.snooze(lease, delay).await)
    }

    async fn cancel(&self, id: JobId) -> Result<()> {
        traced("cancel", self.inner.cancel(id).await)
    }

    async fn configure_queue(&self, queue: &QueueName, limits: &QueueLimits) -> Result<()> {
        traced(
            "configure_queue",
            self.inner.configure_queue(queue, limits).await,
        )
    }

    async fn queue_configs(&self) -> Result<Vec<QueueConfig>> {
        traced("queue_configs", self.inner.queue_configs().await)
    }

    async fn set_group_limit(
        &self,
        queue: &QueueName,
        group: &queue_core::GroupKey,
        limit: Option<u32>,
    ) -> Result<()> {
        traced(
            "set_group_limit",
            self.inner.set_group_limit(queue, group, limit).await,
        )
    }

    async fn group_limits(&self) -> Result<Vec<queue_core::GroupLimit>> {
        traced("group_limits", self.inner.group_limits().await)
    }

    async fn set_group_weight(
        &self,
        queue: &QueueName,
        group: &queue_core::GroupKey,
        weight: Option<u32>,
    ) -> Result<()> {
        traced(
            "set_group_weight",
            self.inner.set_group_weight(queue, group, weight).await,
        )
    }

    async fn group_weights(&self) -> Result<Vec<queue_core::GroupWeight>> {
        traced("group_weights", self.inner.group_weights().await)
    }

    async fn job_links(&self, id: JobId) -> Result<queue_core::JobLinks> {
        traced("job_links", self.inner.job_links(id).await)
    }

    async fn enqueue_periodic(&self, fire: &PeriodicFire) -> Result<Option<EnqueueOutcome>> {
        traced("enqueue_periodic", self.inner.enqueue_periodic(fire).await)
    }

    async fn schedules(&self) -> Result<Vec<ScheduleRecord>> {
        traced("schedules", self.inner.schedules().await)
    }

    async fn register_worker(&self, worker: &WorkerInfo) -> Result<()> {
        traced("register_worker", self.inner.register_worker(worker).await)
    }

    async fn deregister_worker(&self, id: &WorkerId) -> Result<bool> {
        traced("deregister_worker", self.inner.deregister_worker(id).await)
    }

    async fn list_workers(
        &self,
        silent_after: Duration,
        forget_after: Duration,
    ) -> Result<Vec<WorkerRecord>> {
        traced(
            "list_workers",
            self.inner.list_workers(silent_after, forget_after).await,
        )
    }
}
