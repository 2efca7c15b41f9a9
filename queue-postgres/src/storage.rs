//! `PgStorage`: a pool, a schema, a clock, and the statements for them;
//! and its `Storage` implementation, each method one statement of
//! `sql.rs` run by the file of its contract area.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use queue_core::backend::{LimitedQueues, PING_IDLE_AFTER};
use queue_core::{
    Ack, Capabilities, Capability, Clock, DequeueRequest, EnqueueOutcome, FinalStatus,
    HistoryFilter, HistoryPage, HistoryRecord, Job, JobFilter, JobId, JobPage, Lease, NackOutcome,
    NewJob, PeriodicFire, PruneRequest, QueueConfig, QueueLimits, QueueName, QueueStats,
    ReclaimOutcome, Result, Retry, ScheduleRecord, Storage, Throughput, Wakeups, WorkerId,
    WorkerInfo, WorkerRecord,
};
use serde_json::Value;
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgPool};

use crate::interpret_error;
use crate::migrate::validate_schema;
use crate::sql::Statements;

/// The schema used when none is given.
pub const DEFAULT_SCHEMA: &str = "public";

/// A job-queue storage in one PostgreSQL schema.
///
/// Cheap to clone: clones share the pool. Every statement names its tables
/// with the schema, so it works on any connection whatever its
/// `search_path`, including the caller's own transactions
/// ([`PgStorage::enqueue_in`], [`PgStorage::ack_in`], [`PgStorage::nack_in`]).
#[derive(Debug, Clone)]
pub struct PgStorage {
    pub(crate) pool: PgPool,
    pub(crate) clock: Clock,
    pub(crate) sql: Arc<Statements>,
    schema: Arc<str>,
    channel: Arc<str>,
    cancel_channel: Arc<str>,
    pub(crate) signals: Arc<crate::signals::Signals>,
    /// Which queues have claim limits, read at most once a second.
    pub(crate) limited: Arc<LimitedQueues>,
    /// When this handle last rotated the ready ring (`ready_ring.rs`).
    pub(crate) ring: Arc<queue_core::backend::Turn>,
    /// Claims commit without waiting for the WAL flush ([`PgStorage::with_async_claims`]).
    async_claims: bool,
}

/// The pool options [`PgStorage::connect`] uses, for building a pool of
/// your own: a connection is pinged before use only when it sat idle for
/// more than [`PING_IDLE_AFTER`] (a connection the server dropped while
/// idle is replaced, not handed out), rather than before every use, sqlx's
/// default. That ping is a round trip before every statement of a busy
/// queue: without it a PostgreSQL drain ran 6-14% faster on the benchmark
/// machine (docs/benchmarks-journal.md, "JIT on the batch enqueue, pings
/// before every statement"). A connection the server dropped within
/// the last second fails its next statement instead.
pub fn pool_options() -> PgPoolOptions {
    PgPoolOptions::new()
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for > PING_IDLE_AFTER {
                    conn.ping().await?;
                }
                Ok(true)
            })
        })
}

impl PgStorage {
    /// Connects a pool of 10 connections to `url`, in the `public` schema.
    ///
    /// # Errors
    /// [`queue_core::QueueError::Unavailable`] when the server cannot be reached.
    pub async fn connect(url: &str) -> Result<Self> {
        let pool = pool_options()
            .max_connections(10)
            .connect(url)
            .await
            .map_err(interpret_error)?;
        Ok(Self::from_pool(pool))
    }

    /// A storage on an existing pool, in the `public` schema, on the
    /// database's clock.
    pub fn from_pool(pool: PgPool) -> Self {
        Self::build(pool, Clock::Database, DEFAULT_SCHEMA, false)
    }

    /// The same storage in another schema (created by [`PgStorage::migrate`]),
    /// so several applications or tests can share one database.
    ///
    /// # Errors
    /// [`queue_core::QueueError::InvalidInput`] for `schema` unless it is an ASCII
    /// letter or underscore followed by up to 62 letters, digits or
    /// underscores.
    pub fn with_schema(self, schema: &str) -> Result<Self> {
        validate_schema(schema)?;
        Ok(Self::build(
            self.pool,
            self.clock,
            schema,
            self.async_claims,
        ))
    }

    /// The same storage, its claims committing asynchronously when `on`
    /// (off by default): a claim's transaction returns without waiting for
    /// its WAL to reach the disk (`synchronous_commit = off` for that
    /// transaction only; enqueues, acks, nacks and every other statement
    /// still wait). A drain at 16 handlers ran 25% faster on the benchmark
    /// machine (docs/benchmarks-journal.md, "Claims that stop waiting").
    ///
    /// What it costs: if the PostgreSQL server crashes (a crash, not a
    /// clean shutdown), the claims committed in the last fraction of a
    /// second before it may be lost: those that no later synchronous
    /// commit on the server (an ack, an enqueue) flushed with its own, nor
    /// the WAL writer (within three times `wal_writer_delay`, 0.6 s by
    /// default). Their jobs are then unclaimed again, with the
    /// attempt not counted, and run again once the server is back, even if
    /// the worker that had them finishes them: its ack then fails as
    /// [`queue_core::QueueError::LeaseLost`]. Nothing enqueued or acked is
    /// lost, and exactly-once effects through [`PgStorage::ack_in`] still
    /// hold: the caller's transaction commits synchronously, which flushes
    /// the earlier claim with it. See docs/reliability.md.
    pub fn with_async_claims(mut self, on: bool) -> Self {
        self.sql = Arc::new(Statements::for_schema(
            &self.schema,
            &self.channel,
            &self.cancel_channel,
            on,
        ));
        self.async_claims = on;
        self
    }

    /// Whether claims commit asynchronously ([`PgStorage::with_async_claims`]).
    pub fn async_claims(&self) -> bool {
        self.async_claims
    }

    /// The same storage reading `clock`: a [`queue_core::ManualClock`] in
    /// tests, bound into every statement in place of the server's `now()`.
    pub fn with_clock(mut self, clock: impl Into<Clock>) -> Self {
        self.clock = clock.into();
        self
    }

    fn build(pool: PgPool, clock: Clock, schema: &str, async_claims: bool) -> Self {
        let channel = format!("queue_jobs.{schema}");
        let cancel_channel = format!("queue_cancel.{schema}");
        Self {
            pool,
            clock,
            sql: Arc::new(Statements::for_schema(
                schema,
                &channel,
                &cancel_channel,
                async_claims,
            )),
            schema: schema.into(),
            channel: channel.into(),
            cancel_channel: cancel_channel.into(),
            signals: Arc::default(),
            limited: Arc::default(),
            ring: Arc::new(queue_core::backend::Turn::new(
                crate::ready_ring::ROTATE_EVERY,
            )),
            async_claims,
        }
    }

    /// The pool, for the caller's own transactions.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The schema holding the queue's tables.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The LISTEN/NOTIFY channel on which enqueues announce their queue.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// The LISTEN/NOTIFY channel on which a cancel or discard of a leased
    /// job announces its id (as decimal text), on commit.
    pub fn cancel_channel(&self) -> &str {
        &self.cancel_channel
    }

    /// Creates the schema if needed and applies the embedded migrations not
    /// yet applied there; returns their versions (see [`crate::migrate()`]).
    pub async fn migrate(&self) -> Result<Vec<u32>> {
        crate::migrate(&self.pool, &self.schema).await
    }

    /// The manual clock's time, or `None` to let the server's `now()` decide.
    pub(crate) fn now_override(&self) -> Option<DateTime<Utc>> {
        self.clock.fixed_now()
    }

    pub(crate) async fn connection(&self) -> Result<PoolConnection<sqlx::Postgres>, sqlx::Error> {
        self.pool.acquire().await
    }
}

#[async_trait]
impl Storage for PgStorage {
    fn capabilities(&self) -> Capabilities {
        Capabilities::OPERATIONS
            .with(Capability::Wakeups)
            .with(Capability::RemoteWakeups)
            .with(Capability::Transactions)
            .with(Capability::Workers)
    }

    async fn now(&self) -> Result<DateTime<Utc>> {
        self.now_pooled().await
    }

    async fn enqueue_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<EnqueueOutcome>> {
        self.enqueue_batch_pooled(jobs).await
    }

    async fn dequeue(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        self.dequeue_pooled(request).await
    }

    async fn next_due(&self, queues: &[QueueName]) -> Result<Option<Duration>> {
        self.next_due_pooled(queues).await
    }

    async fn ack_batch(&self, acks: &[Ack]) -> Result<Vec<bool>> {
        self.ack_pooled(acks).await
    }

    async fn nack(&self, lease: &Lease, error: Value, retry: Retry) -> Result<NackOutcome> {
        self.nack_pooled(lease, &error, retry).await
    }

    async fn release(&self, lease: &Lease) -> Result<bool> {
        self.release_pooled(lease).await
    }

    async fn heartbeat_batch(&self, leases: &[Lease], extend_by: Duration) -> Result<Vec<bool>> {
        self.heartbeat_pooled(leases, extend_by).await
    }

    async fn reclaim_stalled(&self, limit: u32) -> Result<ReclaimOutcome> {
        self.reclaim_stalled_pooled(limit).await
    }

    async fn discard(&self, id: JobId) -> Result<()> {
        self.discard_pooled(id, FinalStatus::Discarded).await
    }

    async fn cancel(&self, id: JobId) -> Result<()> {
        self.discard_pooled(id, FinalStatus::Cancelled).await
    }

    async fn snooze(&self, lease: &Lease, delay: Duration) -> Result<DateTime<Utc>> {
        self.snooze_pooled(lease, delay).await
    }

    async fn configure_queue(&self, queue: &QueueName, limits: &QueueLimits) -> Result<()> {
        self.configure_queue_pooled(queue, limits).await
    }

    async fn queue_configs(&self) -> Result<Vec<QueueConfig>> {
        self.queue_configs_pooled().await
    }

    async fn enqueue_periodic(&self, fire: &PeriodicFire) -> Result<Option<EnqueueOutcome>> {
        self.enqueue_periodic_pooled(fire).await
    }

    async fn schedules(&self) -> Result<Vec<ScheduleRecord>> {
        self.schedules_pooled().await
    }

    async fn register_worker(&self, worker: &WorkerInfo) -> Result<()> {
        self.register_worker_pooled(worker).await
    }

    async fn deregister_worker(&self, id: &WorkerId) -> Result<bool> {
        self.deregister_worker_pooled(id).await
    }

    async fn list_workers(
        &self,
        silent_after: Duration,
        forget_after: Duration,
    ) -> Result<Vec<WorkerRecord>> {
        self.list_workers_pooled(silent_after, forget_after).await
    }

    async fn retry_dead_letter(&self, id: JobId) -> Result<()> {
        self.retry_dead_letter_pooled(id).await
    }

    async fn prune_history(&self, request: &PruneRequest) -> Result<u64> {
        self.prune_history_pooled(request).await
    }

    async fn stats_capped(&self, cap: u64) -> Result<Vec<QueueStats>> {
        self.stats_pooled(cap).await
    }

    async fn get_job(&self, id: JobId) -> Result<Option<Job>> {
        self.get_job_pooled(id).await
    }

    async fn get_history(&self, id: JobId) -> Result<Option<HistoryRecord>> {
        self.get_history_pooled(id).await
    }

    async fn list_history(&self, filter: &HistoryFilter) -> Result<HistoryPage> {
        self.list_history_pooled(filter).await
    }

    async fn list_jobs(&self, filter: &JobFilter) -> Result<JobPage> {
        self.list_jobs_pooled(filter).await
    }

    async fn run_now(&self, filter: &JobFilter) -> Result<u64> {
        self.run_now_pooled(filter).await
    }

    async fn discard_jobs(&self, filter: &JobFilter) -> Result<u64> {
        self.discard_jobs_pooled(filter).await
    }

    async fn retry_dead_letters(&self, filter: &HistoryFilter) -> Result<u64> {
        self.retry_dead_letters_pooled(filter).await
    }

    async fn throughput(&self, window: Duration) -> Result<Vec<Throughput>> {
        self.throughput_pooled(window).await
    }

    async fn subscribe(&self) -> Result<Option<Wakeups>> {
        self.wakeups().await.map(Some)
    }

    async fn pause_queue(&self, queue: &QueueName) -> Result<()> {
        self.set_paused(queue, true).await
    }

    async fn resume_queue(&self, queue: &QueueName) -> Result<()> {
        self.set_paused(queue, false).await
    }
}
