//! `MySqlStorage`: a pool of READ COMMITTED connections and a clock; and
//! its `Storage` implementation, each method run by the file of its
//! contract area with the statements of `sql.rs`.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::ConnectionError;
use diesel_async::pooled_connection::deadpool::{Hook, HookError, Object, Pool};
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, PoolError, PoolableConnection, RecyclingMethod,
};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};
use queue_core::backend::{LimitedQueues, PING_IDLE_AFTER};
use queue_core::{
    Ack, Capabilities, Capability, Clock, DequeueRequest, EnqueueOutcome, FinalStatus, GroupKey,
    GroupLimit, GroupWeight, HistoryFilter, HistoryPage, HistoryRecord, Job, JobFilter, JobId,
    JobPage, Lease, NackOutcome, NewJob, PeriodicFire, PruneRequest, QueueConfig, QueueError,
    QueueLimits, QueueName, QueueSample, QueueStats, ReclaimOutcome, Result, Retry, ScheduleRecord,
    Storage, Throughput, WorkerId, WorkerInfo, WorkerRecord, redact_secrets,
};
use serde_json::Value;
use std::sync::Arc;

use crate::error::Failure;

/// The pool type `MySqlStorage` runs on.
pub type MySqlPool = Pool<AsyncMysqlConnection>;

/// The statement every pooled connection runs first. Claims must run at
/// READ COMMITTED: under REPEATABLE READ, InnoDB's gap locks in the claim
/// make concurrent enqueues wait for the lock timeout.
pub const SESSION_SETUP: &str = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED";

/// A job-queue storage in one MySQL 8+ / MariaDB 10.6+ database (the one
/// the URL names).
///
/// Cheap to clone: clones share the pool. The caller's own transactions
/// ([`MySqlStorage::enqueue_in`], [`MySqlStorage::ack_in`],
/// [`MySqlStorage::nack_in`]) must be on a connection to the same database.
#[derive(Clone)]
pub struct MySqlStorage {
    pub(crate) pool: MySqlPool,
    pub(crate) clock: Clock,
    /// Which queues have claim limits, read at most once a second.
    pub(crate) limited: Arc<LimitedQueues>,
    /// What batch enqueues rely on of the server, read on first use.
    pub(crate) server: std::sync::Arc<std::sync::OnceLock<crate::enqueue::ServerTraits>>,
    /// The ready ring as this handle knows it (`ready_ring.rs`).
    pub(crate) ring: Arc<crate::ready_ring::RingState>,
}

impl std::fmt::Debug for MySqlStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MySqlStorage")
            .field("pool", &self.pool.status())
            .field("clock", &self.clock)
            .finish()
    }
}

impl MySqlStorage {
    /// Builds a pool of up to 10 connections to `url`, each set to READ
    /// COMMITTED ([`SESSION_SETUP`]). Connections are made on first use.
    ///
    /// # Errors
    /// [`QueueError::InvalidInput`] (`url`) when the pool cannot be built.
    pub fn connect(url: &str) -> Result<Self> {
        Self::connect_with_size(url, 10)
    }

    /// As [`MySqlStorage::connect`], with up to `size` connections.
    ///
    /// # Errors
    /// [`QueueError::InvalidInput`] (`url`) when the pool cannot be built.
    pub fn connect_with_size(url: &str, size: usize) -> Result<Self> {
        let mut config = ManagerConfig::default();
        config.custom_setup = Box::new(|url| Box::pin(establish(url.to_owned())));
        config.recycling_method = RecyclingMethod::Fast;
        let manager =
            AsyncDieselConnectionManager::<AsyncMysqlConnection>::new_with_config(url, config);
        let pool = Pool::builder(manager)
            .max_size(size)
            .pre_recycle(Hook::async_fn(
                |conn: &mut AsyncMysqlConnection, metrics| {
                    Box::pin(ping_if_idle(conn, metrics.last_used()))
                },
            ))
            .build()
            .map_err(|e| QueueError::invalid("url", redact_secrets(&e.to_string(), url)))?;
        Ok(Self::from_pool(pool))
    }

    /// A storage on an existing pool, on the database's clock. Its
    /// connections should run at READ COMMITTED ([`SESSION_SETUP`]).
    pub fn from_pool(pool: MySqlPool) -> Self {
        Self {
            pool,
            clock: Clock::Database,
            limited: Arc::default(),
            server: std::sync::Arc::default(),
            ring: Arc::default(),
        }
    }

    /// The same storage reading `clock`: a [`queue_core::ManualClock`] in
    /// tests, bound into every statement in place of `UTC_TIMESTAMP(6)`.
    pub fn with_clock(mut self, clock: impl Into<Clock>) -> Self {
        self.clock = clock.into();
        self
    }

    /// The pool, for the caller's own transactions.
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// Applies the embedded migrations not yet applied (see [`crate::migrate`]).
    pub async fn migrate(&self) -> Result<Vec<u32>> {
        let mut conn = self
            .connection()
            .await
            .map_err(crate::error::interpret_failure)?;
        crate::migrate(&mut conn).await
    }

    /// The manual clock's time as a stored DATETIME(6) value, or `None` to
    /// let the server's `UTC_TIMESTAMP(6)` decide.
    pub(crate) fn now_override(&self) -> Option<NaiveDateTime> {
        self.clock
            .fixed_now()
            .map(|at: DateTime<Utc>| at.naive_utc())
    }

    /// The manual clock's time, or the server's UTC time (one round trip):
    /// the single "now" of a multi-statement operation.
    pub(crate) async fn resolve_now(
        &self,
        conn: &mut AsyncMysqlConnection,
    ) -> Result<NaiveDateTime, Failure> {
        if let Some(now) = self.now_override() {
            return Ok(now);
        }
        let row = crate::bind::query(crate::sql::NOW, vec![crate::bind::Param::OptTime(None)])
            .get_result::<crate::rows::NowRow>(conn)
            .await?;
        Ok(row.now_ts)
    }

    pub(crate) async fn connection(&self) -> Result<Object<AsyncMysqlConnection>, Failure> {
        self.pool
            .get()
            .await
            .map_err(|e| Failure::Pool(e.to_string()))
    }
}

/// Checks a pooled connection with a round trip on its way out only when
/// it sat idle for more than [`PING_IDLE_AFTER`] (the pool recycles
/// `Fast`, without a check): a connection the server dropped while idle
/// is replaced rather than handed out. One lost while in use fails its
/// statement, and [`MySqlStorage::retrying`] then drops the pool's idle
/// connections.
async fn ping_if_idle(conn: &mut AsyncMysqlConnection, idle: Duration) -> Result<(), HookError> {
    if idle > PING_IDLE_AFTER {
        conn.ping(&RecyclingMethod::Verified)
            .await
            .map_err(|e| HookError::Backend(PoolError::QueryError(e)))?;
    }
    Ok(())
}

async fn establish(url: String) -> Result<AsyncMysqlConnection, ConnectionError> {
    let mut conn = AsyncMysqlConnection::establish(&url).await?;
    conn.batch_execute(SESSION_SETUP)
        .await
        .map_err(ConnectionError::CouldntSetupConfiguration)?;
    Ok(conn)
}

#[async_trait]
impl Storage for MySqlStorage {
    fn capabilities(&self) -> Capabilities {
        Capabilities::OPERATIONS
            .with(Capability::Transactions)
            .with(Capability::Workers)
            .with(Capability::Samples)
            .with(Capability::GroupLimits)
            .with(Capability::PriorityAging)
            .with(Capability::FairGroups)
            .with(Capability::GroupWeights)
            .with(Capability::Dependencies)
            .with(Capability::Batches)
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

    async fn job_links(&self, id: JobId) -> Result<queue_core::JobLinks> {
        self.job_links_pooled(id).await
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

    async fn pause_queue(&self, queue: &QueueName) -> Result<()> {
        self.set_paused(queue, true).await
    }

    async fn resume_queue(&self, queue: &QueueName) -> Result<()> {
        self.set_paused(queue, false).await
    }
}
