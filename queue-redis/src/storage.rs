//! The Redis storage type: its options, its clock, and the `Storage`
//! implementation (one line per method, each in the file of its area).
//! Connecting is in `connect.rs`, running commands and scripts in
//! `command.rs`, the namespace and its queue registry in `namespace.rs`.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use queue_core::backend::stored_instant;
use queue_core::{
    Ack, Capabilities, Capability, Clock, DequeueRequest, EnqueueOutcome, FinalStatus, GroupKey,
    GroupLimit, GroupWeight, HistoryFilter, HistoryPage, HistoryRecord, Job, JobFilter, JobId,
    JobLinks, JobPage, Lease, NackOutcome, NewJob, PeriodicFire, PruneRequest, QueueConfig,
    QueueLimits, QueueName, QueueSample, QueueStats, ReclaimOutcome, Result, Retry, ScheduleRecord,
    Storage, Throughput, Wakeups, WorkerId, WorkerInfo, WorkerRecord,
};
use serde_json::Value as Json;

use crate::connect::Conn;
use crate::keys::Keys;
use crate::namespace::Registry;

/// The namespace keys live under unless [`RedisStorage::with_namespace`]
/// says otherwise.
pub const DEFAULT_NAMESPACE: &str = "queue";

/// The largest payload (as JSON text) accepted unless
/// [`RedisStorage::with_max_payload_bytes`] says otherwise: 16 MiB. A
/// Redis value may hold 512 MiB, but every claim copies the payload
/// through the server's single thread.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 16 * 1024 * 1024;

/// The version of the key layout (see the crate docs) this version writes.
pub const LAYOUT_VERSION: u32 = 3;

/// A job queue stored in Redis (standalone or Cluster).
///
/// Clones share one connection and one queue registry cache.
#[derive(Clone)]
pub struct RedisStorage {
    pub(crate) conn: Conn,
    pub(crate) keys: Keys,
    pub(crate) clock: Clock,
    pub(crate) node: String,
    pub(crate) pubsub: redis::Client,
    pub(crate) registry: Arc<RwLock<Registry>>,
    pub(crate) max_payload_bytes: usize,
    /// Set by [`RedisStorage::with_durable_writes`].
    pub(crate) durable: Option<crate::durable::Durable>,
}

impl std::fmt::Debug for RedisStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStorage")
            .field("node", &self.node)
            .field("namespace", &self.keys.namespace())
            .field("cluster", &matches!(self.conn, Conn::Cluster(_)))
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl RedisStorage {
    /// The same storage with its keys under `namespace` (default
    /// [`DEFAULT_NAMESPACE`]): storages in different namespaces share
    /// nothing. 1 to 64 ASCII letters, digits, `_`, `-`, `.` or `:`.
    ///
    /// # Errors
    /// [`queue_core::QueueError::InvalidInput`] for `namespace`.
    pub fn with_namespace(mut self, namespace: &str) -> Result<Self> {
        self.keys = Keys::new(namespace)?;
        self.registry = Arc::default();
        Ok(self)
    }

    /// The same storage reading `clock`: a [`queue_core::ManualClock`] in
    /// tests (passed to every script in place of the server's `TIME`),
    /// [`Clock::Database`] otherwise.
    pub fn with_clock(mut self, clock: impl Into<Clock>) -> Self {
        self.clock = clock.into();
        self
    }

    /// The same storage accepting payloads of at most `bytes` bytes of
    /// JSON text (default [`DEFAULT_MAX_PAYLOAD_BYTES`]).
    pub fn with_max_payload_bytes(mut self, bytes: usize) -> Self {
        self.max_payload_bytes = bytes;
        self
    }

    /// The namespace this storage's keys live under.
    pub fn namespace(&self) -> &str {
        self.keys.namespace()
    }

    /// The node (or cluster seed nodes) this storage talks to, password redacted.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The server's clock: UTC, microsecond precision.
    ///
    /// # Errors
    /// As any command ([`crate::interpret_error`]).
    pub async fn server_now(&self) -> Result<DateTime<Utc>> {
        let (secs, micros): (i64, i64) = self.command(&redis::cmd("TIME")).await?;
        stored_instant(
            "time",
            secs.saturating_mul(1_000_000).saturating_add(micros),
        )
    }

    /// The clock argument of every script: the manual clock's microseconds,
    /// or empty for the server's `TIME`.
    pub(crate) fn now_arg(&self) -> String {
        self.clock
            .fixed_now()
            .map(|now| now.timestamp_micros().to_string())
            .unwrap_or_default()
    }

    /// Whether this storage talks to a Redis Cluster (where a script
    /// reaches one queue's slot only).
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.conn, Conn::Cluster(_))
    }

    /// The client that wake-up subscriptions connect with.
    pub(crate) fn pubsub_client(&self) -> &redis::Client {
        &self.pubsub
    }
}

#[async_trait::async_trait]
impl Storage for RedisStorage {
    fn capabilities(&self) -> Capabilities {
        let common = Capabilities::OPERATIONS
            .with(Capability::Wakeups)
            .with(Capability::RemoteWakeups)
            .with(Capability::Workers)
            .with(Capability::GroupLimits)
            .with(Capability::PriorityAging)
            .with(Capability::FairGroups)
            .with(Capability::GroupWeights)
            .with(Capability::Samples);
        // Workflows span queues, hence slots: standalone only (design.md).
        if self.is_cluster() {
            common
        } else {
            common
                .with(Capability::Dependencies)
                .with(Capability::Batches)
        }
    }

    async fn now(&self) -> Result<DateTime<Utc>> {
        match self.clock.fixed_now() {
            Some(now) => Ok(now),
            None => self.server_now().await,
        }
    }

    async fn enqueue_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<EnqueueOutcome>> {
        self.enqueue_batch_scripted(jobs).await
    }

    async fn dequeue(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        self.dequeue_scripted(request).await
    }

    async fn next_due(&self, queues: &[QueueName]) -> Result<Option<Duration>> {
        self.next_due_scripted(queues).await
    }

    async fn ack_batch(&self, acks: &[Ack]) -> Result<Vec<bool>> {
        self.ack_scripted(acks).await
    }

    async fn nack(&self, lease: &Lease, error: Json, retry: Retry) -> Result<NackOutcome> {
        self.nack_scripted(lease, &error, retry).await
    }

    async fn release(&self, lease: &Lease) -> Result<bool> {
        self.release_scripted(lease).await
    }

    async fn heartbeat_batch(&self, leases: &[Lease], extend_by: Duration) -> Result<Vec<bool>> {
        self.heartbeat_scripted(leases, extend_by).await
    }

    async fn reclaim_stalled(&self, limit: u32) -> Result<ReclaimOutcome> {
        self.reclaim_stalled_scripted(limit).await
    }

    async fn discard(&self, id: JobId) -> Result<()> {
        self.discard_scripted(id, FinalStatus::Discarded).await
    }

    async fn cancel(&self, id: JobId) -> Result<()> {
        self.discard_scripted(id, FinalStatus::Cancelled).await
    }

    async fn snooze(&self, lease: &Lease, delay: Duration) -> Result<DateTime<Utc>> {
        self.snooze_scripted(lease, delay).await
    }

    async fn configure_queue(&self, queue: &QueueName, limits: &QueueLimits) -> Result<()> {
        self.configure_queue_scripted(queue, limits).await
    }

    async fn queue_configs(&self) -> Result<Vec<QueueConfig>> {
        self.queue_configs_scripted().await
    }

    async fn set_group_limit(
        &self,
        queue: &QueueName,
        group: &GroupKey,
        limit: Option<u32>,
    ) -> Result<()> {
        self.set_group_limit_scripted(queue, group, limit).await
    }

    async fn group_limits(&self) -> Result<Vec<GroupLimit>> {
        self.group_limits_scripted().await
    }

    async fn set_group_weight(
        &self,
        queue: &QueueName,
        group: &GroupKey,
        weight: Option<u32>,
    ) -> Result<()> {
        self.set_group_weight_scripted(queue, group, weight).await
    }

    async fn group_weights(&self) -> Result<Vec<GroupWeight>> {
        self.group_weights_scripted().await
    }

    async fn enqueue_periodic(&self, fire: &PeriodicFire) -> Result<Option<EnqueueOutcome>> {
        self.enqueue_periodic_scripted(fire).await
    }

    async fn schedules(&self) -> Result<Vec<ScheduleRecord>> {
        self.schedules_scripted().await
    }

    async fn record_samples(&self, samples: &[QueueSample]) -> Result<()> {
        self.record_samples_scripted(samples).await
    }

    async fn samples(&self, window: Duration) -> Result<Vec<QueueSample>> {
        self.samples_scripted(window).await
    }

    async fn register_worker(&self, worker: &WorkerInfo) -> Result<()> {
        self.register_worker_scripted(worker).await
    }

    async fn deregister_worker(&self, id: &WorkerId) -> Result<bool> {
        self.deregister_worker_scripted(id).await
    }

    async fn list_workers(
        &self,
        silent_after: Duration,
        forget_after: Duration,
    ) -> Result<Vec<WorkerRecord>> {
        self.list_workers_scripted(silent_after, forget_after).await
    }

    async fn retry_dead_letter(&self, id: JobId) -> Result<()> {
        self.retry_dead_letter_scripted(id).await
    }

    async fn prune_history(&self, request: &PruneRequest) -> Result<u64> {
        self.prune_history_scripted(request).await
    }

    async fn stats_capped(&self, cap: u64) -> Result<Vec<QueueStats>> {
        queue_core::validate_count_cap(cap)?;
        let stats = self.stats_scripted().await?;
        Ok(stats.into_iter().map(|s| s.capped_at(cap)).collect())
    }

    async fn get_job(&self, id: JobId) -> Result<Option<Job>> {
        self.get_job_scripted(id).await
    }

    async fn get_history(&self, id: JobId) -> Result<Option<HistoryRecord>> {
        self.get_history_scripted(id).await
    }

    async fn list_history(&self, filter: &HistoryFilter) -> Result<HistoryPage> {
        self.list_history_scripted(filter).await
    }

    async fn subscribe(&self) -> Result<Option<Wakeups>> {
        Ok(Some(self.wakeups().await?))
    }

    async fn pause_queue(&self, queue: &QueueName) -> Result<()> {
        self.set_paused(queue, true).await
    }

    async fn resume_queue(&self, queue: &QueueName) -> Result<()> {
        self.set_paused(queue, false).await
    }

    async fn list_jobs(&self, filter: &JobFilter) -> Result<JobPage> {
        self.list_jobs_scripted(filter).await
    }

    async fn run_now(&self, filter: &JobFilter) -> Result<u64> {
        self.run_now_scripted(filter).await
    }

    async fn discard_jobs(&self, filter: &JobFilter) -> Result<u64> {
        self.discard_jobs_scripted(filter).await
    }

    async fn retry_dead_letters(&self, filter: &HistoryFilter) -> Result<u64> {
        self.retry_dead_letters_scripted(filter).await
    }

    async fn throughput(&self, window: Duration) -> Result<Vec<Throughput>> {
        self.throughput_scripted(window).await
    }

    async fn job_links(&self, id: JobId) -> Result<JobLinks> {
        if self.is_cluster() {
            return Err(queue_core::QueueError::not_supported(
                Capability::Dependencies,
                "job_links",
            ));
        }
        self.job_links_scripted(id).await
    }
}
