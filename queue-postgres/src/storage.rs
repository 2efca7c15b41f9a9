//! `PgStorage`: a pool, a schema, a clock, and the statements for them;
//! and its `Storage` implementation, each method one statement of
//! `sql.rs` run by the file of its contract area.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use queue_core::backend::{LimitedQueues, PING_IDLE_AFTER};
use queue_core::{
    Ack, Capabilities, Capability, Clock, DequeueRequest, EnqueueOutcome, FinalStatus, GroupKey,
    GroupLimit, GroupWeight, HistoryFilter, HistoryPage, HistoryRecord, Job, JobFilter, JobId,
    JobPage, Lease, NackOutcome, NewJob, PeriodicFire, PruneRequest, QueueConfig, QueueLimits,
    QueueName, QueueSample, QueueStats, ReclaimOutcome, Result, Retry, ScheduleRecord, Storage,
    Throughput, Wakeups, WorkerId, WorkerInfo, WorkerRecord,
};
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgPool};

use crate::exec::Pooling;
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
    /// Which of them have no limits but their groups', read with them.
    pub(crate) groups_only: Arc<LimitedQueues>,
    /// When this handle last rotated the ready ring (`ready_ring.rs`).
    pub(crate) ring: Arc<queue_core::backend::Turn>,
    /// Claims commit without waiting for the WAL flush ([`PgStorage::with_async_claims`]).
    async_claims: bool,
    /// For a URL of several hosts: the watcher that keeps the pool on the
    /// one that accepts writes (`hosts.rs`).
    failover: Option<Arc<crate::hosts::Failover>>,
    /// Where operators' reads go when not to the pool
    /// ([`PgStorage::with_read_pool`]): a standby.
    pub(crate) read_pool: Option<PgPool>,
    /// Unnamed statements, each in a transaction ([`PgStorage::with_transaction_pooling`]).
    pub(crate) pooling: Pooling,
    /// Where LISTEN connects, when not on the pool ([`PgStorage::with_listen_options`]).
    pub(crate) listen: Option<Arc<ListenOptions>>,
}

/// The direct connection for LISTEN, its password kept out of `Debug`.
#[derive(Clone)]
pub(crate) struct ListenOptions(pub(crate) PgConnectOptions);

impl std::fmt::Debug for ListenOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenOptions")
            .field("host", &self.0.get_host())
            .field("port", &self.0.get_port())
            .field("database", &self.0.get_database())
            .finish_non_exhaustive()
    }
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
    /// `url` may name several hosts, as libpq reads them
    /// (`postgres://user@a:5432,b:5432/db?target_session_attrs=read-write`):
    /// the storage connects to the first, in the URL's order, that accepts
    /// writes (not a standby, not read-only), checks every new connection
    /// again, and moves its pool to another host within about a second of
    /// the one it uses no longer taking writes (a failover). See
    /// docs/high-availability.md.
    ///
    /// # Errors
    /// [`queue_core::QueueError::Unavailable`] when the server cannot be
    /// reached, or, for several hosts, none accepts writes (each named,
    /// with the reason). [`queue_core::QueueError::InvalidInput`] for a
    /// `target_session_attrs` other than `read-write` or `primary`.
    pub async fn connect(url: &str) -> Result<Self> {
        if let Some(hosts) = crate::hosts::parse(url)? {
            return Self::connect_hosts(hosts).await;
        }
        let pool = pool_options()
            .max_connections(10)
            .connect(url)
            .await
            .map_err(interpret_error)?;
        Ok(Self::from_pool(pool))
    }

    /// [`PgStorage::connect`] for a URL of several hosts.
    async fn connect_hosts(hosts: crate::hosts::Hosts) -> Result<Self> {
        let (index, probe) = hosts.find_writable().await?;
        let pool = pool_options()
            .max_connections(10)
            .after_connect(|conn, _meta| {
                Box::pin(async move {
                    crate::hosts::writable(conn).await.map_err(|why| {
                        sqlx::Error::Io(std::io::Error::other(format!(
                            "the host no longer accepts writes: {why}"
                        )))
                    })
                })
            })
            .connect_with(hosts.options(index).clone())
            .await
            .map_err(interpret_error)?;
        let failover = crate::hosts::Failover::watch(hosts, index, probe, pool.clone());
        let mut storage = Self::from_pool(pool);
        storage.failover = Some(failover);
        Ok(storage)
    }

    /// The same storage reading its operators' reads from `pool`, a
    /// standby's: [`Storage::stats`], [`Storage::list_jobs`],
    /// [`Storage::list_history`], [`Storage::list_dead_letters`],
    /// [`Storage::get_job`], [`Storage::get_history`] and
    /// [`Storage::throughput`], what the CLI's reads and the dashboard
    /// show. Everything else, claims and `next_due` and queue settings
    /// included, stays on the primary. Those reads show the standby's state:
    /// behind the primary by its replay lag (`replay_lag` in the primary's
    /// `pg_stat_replication`), so a job just enqueued may not be listed yet
    /// and one just acked may still show as running.
    ///
    /// [`Storage::stats`]: queue_core::Storage::stats
    /// [`Storage::list_jobs`]: queue_core::Storage::list_jobs
    /// [`Storage::list_history`]: queue_core::Storage::list_history
    /// [`Storage::list_dead_letters`]: queue_core::Storage::list_dead_letters
    /// [`Storage::get_job`]: queue_core::Storage::get_job
    /// [`Storage::get_history`]: queue_core::Storage::get_history
    /// [`Storage::throughput`]: queue_core::Storage::throughput
    pub fn with_read_pool(mut self, pool: PgPool) -> Self {
        self.read_pool = Some(pool);
        self
    }

    /// [`PgStorage::with_read_pool`] with a pool of 4 connections to `url`
    /// (one host: a standby, or a load balancer in front of several).
    ///
    /// # Errors
    /// [`queue_core::QueueError::Unavailable`] when `url`'s server cannot be
    /// reached; [`queue_core::QueueError::InvalidInput`] when `url` names
    /// several hosts.
    pub async fn with_read_url(self, url: &str) -> Result<Self> {
        if crate::hosts::parse(url)?.is_some() {
            return Err(queue_core::QueueError::invalid(
                "read_url",
                "name one host: the reads do not follow a failover",
            ));
        }
        let pool = pool_options()
            .max_connections(4)
            .connect(url)
            .await
            .map_err(interpret_error)?;
        Ok(self.with_read_pool(pool))
    }

    /// For a storage connected through a URL of several hosts, the one its
    /// pool connects to now (`host:port` as the URL writes it); `None` for
    /// one host.
    pub fn current_host(&self) -> Option<&str> {
        self.failover
            .as_deref()
            .map(crate::hosts::Failover::current)
    }

    /// A storage on an existing pool, in the `public` schema, on the
    /// database's clock.
    pub fn from_pool(pool: PgPool) -> Self {
        Self::build(pool, Clock::Database, DEFAULT_SCHEMA, false)
    }

    /// The same storage for a pool that goes through a PgBouncer in
    /// `pool_mode = transaction`, when `on` (off by default: a direct
    /// connection, or PgBouncer's session pooling, needs nothing).
    ///
    /// PgBouncer then lends a server connection to a client for one
    /// transaction only, so the storage keeps nothing on a session between
    /// transactions: every statement it sends is unnamed (never prepared
    /// and cached under a name, as sqlx does by default) and runs in a
    /// transaction (statements on the pool in one of their own, `BEGIN`
    /// ... `COMMIT`; the others in the storage's transaction or the
    /// caller's, [`PgStorage::enqueue_in`], [`PgStorage::ack_in`],
    /// [`PgStorage::nack_in`]). What it costs: each statement on the pool
    /// is parsed and planned every time, in four round trips instead of
    /// one. Statements you run yourself on [`PgStorage::pool`] need the
    /// same care (`Query::persistent(false)`, inside a transaction).
    ///
    /// LISTEN needs a session: wake-ups ([`PgStorage::listen`],
    /// `Storage::subscribe`) then listen on the direct connection given to
    /// [`PgStorage::with_listen_options`]; without one the storage declares
    /// neither [`Capability::Wakeups`] nor [`Capability::RemoteWakeups`],
    /// `subscribe` answers `None` and workers poll. Enqueues still NOTIFY
    /// (inside their transaction), which works through PgBouncer.
    /// [`PgStorage::index_keyless_jobs`] needs a session too, and refuses
    /// to change the index.
    /// Settings and figures: docs/high-availability.md, "PgBouncer".
    pub fn with_transaction_pooling(mut self, on: bool) -> Self {
        self.pooling = if on {
            Pooling::Transaction
        } else {
            Pooling::Session
        };
        self
    }

    /// Whether the storage runs for a transaction-pooling PgBouncer
    /// ([`PgStorage::with_transaction_pooling`]).
    pub fn transaction_pooling(&self) -> bool {
        self.pooling == Pooling::Transaction
    }

    /// The same storage, listening for wake-ups ([`PgStorage::listen`]) on
    /// a connection of its own made with `options`, rather than on one of
    /// the pool: with [`PgStorage::with_transaction_pooling`], give here
    /// the database server itself (or a PgBouncer in session pooling), as
    /// LISTEN needs a session. One connection per listener, for as long as
    /// it lives.
    pub fn with_listen_options(mut self, options: PgConnectOptions) -> Self {
        self.listen = Some(Arc::new(ListenOptions(options)));
        self
    }

    /// [`PgStorage::with_listen_options`] from a URL.
    ///
    /// # Errors
    /// [`queue_core::QueueError::InvalidInput`] when `url` is not a
    /// PostgreSQL URL.
    pub fn with_listen_url(self, url: &str) -> Result<Self> {
        let options = url.parse::<PgConnectOptions>().map_err(|e| {
            queue_core::QueueError::invalid(
                "listen_url",
                format!("{}: {e}", queue_core::redact_url(url)),
            )
        })?;
        Ok(self.with_listen_options(options))
    }

    /// Whether this storage has wake-ups: always directly, only with
    /// listen options in transaction pooling.
    pub(crate) fn has_wakeups(&self) -> bool {
        self.pooling == Pooling::Session || self.listen.is_some()
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
        Ok(Self {
            failover: self.failover,
            read_pool: self.read_pool,
            pooling: self.pooling,
            listen: self.listen,
            ..Self::build(self.pool, self.clock, schema, self.async_claims)
        })
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
            groups_only: Arc::default(),
            ring: Arc::new(queue_core::backend::Turn::new(
                crate::ready_ring::ROTATE_EVERY,
            )),
            async_claims,
            failover: None,
            read_pool: None,
            pooling: Pooling::Session,
            listen: None,
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
}

#[async_trait]
impl Storage for PgStorage {
    fn capabilities(&self) -> Capabilities {
        let capabilities = Capabilities::OPERATIONS
            .with(Capability::Transactions)
            .with(Capability::Workers)
            .with(Capability::Samples)
            .with(Capability::GroupLimits)
            .with(Capability::PriorityAging)
            .with(Capability::FairGroups)
            .with(Capability::GroupWeights)
            .with(Capability::Dependencies)
            .with(Capability::Batches);
        if self.has_wakeups() {
            capabilities
                .with(Capability::Wakeups)
                .with(Capability::RemoteWakeups)
        } else {
            capabilities
        }
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

    async fn set_group_limit(
        &self,
        queue: &QueueName,
        group: &GroupKey,
        limit: Option<u32>,
    ) -> Result<()> {
        self.set_group_limit_pooled(queue, group, limit).await
    }

    async fn group_limits(&self) -> Result<Vec<GroupLimit>> {
        self.group_limits_pooled().await
    }

    async fn set_group_weight(
        &self,
        queue: &QueueName,
        group: &GroupKey,
        weight: Option<u32>,
    ) -> Result<()> {
        self.set_group_weight_pooled(queue, group, weight).await
    }

    async fn group_weights(&self) -> Result<Vec<GroupWeight>> {
        self.group_weights_pooled().await
    }

    async fn enqueue_periodic(&self, fire: &PeriodicFire) -> Result<Option<EnqueueOutcome>> {
        self.enqueue_periodic_pooled(fire).await
    }

    async fn schedules(&self) -> Result<Vec<ScheduleRecord>> {
        self.schedules_pooled().await
    }

    async fn record_samples(&self, samples: &[QueueSample]) -> Result<()> {
        self.record_samples_pooled(samples).await
    }

    async fn samples(&self, window: Duration) -> Result<Vec<QueueSample>> {
        self.samples_pooled(window).await
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

    async fn job_links(&self, id: JobId) -> Result<queue_core::JobLinks> {
        self.job_links_pooled(id).await
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
        if !self.has_wakeups() {
            return Ok(None);
        }
        self.wakeups().await.map(Some)
    }

    async fn pause_queue(&self, queue: &QueueName) -> Result<()> {
        self.set_paused(queue, true).await
    }

    async fn resume_queue(&self, queue: &QueueName) -> Result<()> {
        self.set_paused(queue, false).await
    }
}
