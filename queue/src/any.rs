//! [`AnyStorage`]: whichever backend [`crate::connect`] chose, as one type.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use queue_core::{
    Ack, DequeueRequest, EnqueueOutcome, HistoryFilter, HistoryPage, HistoryRecord, Job, JobFilter,
    JobId, JobPage, Lease, NackOutcome, NewJob, PeriodicFire, PruneRequest, QueueConfig,
    QueueLimits, QueueName, QueueSample, QueueStats, ReclaimOutcome, Result, Retry, ScheduleRecord,
    Storage, Throughput, Wakeups, WorkerId, WorkerInfo, WorkerRecord,
};
use serde_json::Value;

/// One storage of any enabled backend. Every [`Storage`] call is one
/// `match` and a direct call into the backend: no boxing, no dynamic
/// dispatch.
#[derive(Clone)]
#[non_exhaustive]
pub enum AnyStorage {
    /// PostgreSQL.
    #[cfg(feature = "postgres")]
    Postgres(queue_postgres::PgStorage),
    /// MySQL or MariaDB.
    #[cfg(feature = "mysql")]
    MySql(queue_mysql::MySqlStorage),
    /// SQLite.
    #[cfg(feature = "sqlite")]
    Sqlite(queue_sqlite::SqliteStorage),
    /// Redis, standalone or Cluster.
    #[cfg(feature = "redis")]
    Redis(queue_redis::RedisStorage),
}

/// Runs `$body` with `$s` bound to the backend storage inside `$any`.
macro_rules! each {
    ($any:expr, $s:ident => $body:expr) => {
        match $any {
            #[cfg(feature = "postgres")]
            AnyStorage::Postgres($s) => $body,
            #[cfg(feature = "mysql")]
            AnyStorage::MySql($s) => $body,
            #[cfg(feature = "sqlite")]
            AnyStorage::Sqlite($s) => $body,
            #[cfg(feature = "redis")]
            AnyStorage::Redis($s) => $body,
        }
    };
}

impl AnyStorage {
    /// The backend's name: `postgres`, `mysql`, `sqlite` or `redis`.
    pub fn backend(&self) -> &'static str {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(_) => "postgres",
            #[cfg(feature = "mysql")]
            Self::MySql(_) => "mysql",
            #[cfg(feature = "sqlite")]
            Self::Sqlite(_) => "sqlite",
            #[cfg(feature = "redis")]
            Self::Redis(_) => "redis",
        }
    }

    /// Creates or upgrades the queue's tables (on Redis: checks and records
    /// the key layout version); returns the versions applied.
    /// Safe to call in every process at start-up.
    ///
    /// # Errors
    /// As the backend's `migrate`.
    pub async fn migrate(&self) -> Result<Vec<u32>> {
        each!(self, s => s.migrate().await)
    }

    /// The same storage in another PostgreSQL schema (see
    /// `PgStorage::with_schema`).
    ///
    /// # Errors
    /// [`queue_core::QueueError::InvalidInput`] for an invalid schema name,
    /// or on a backend without schemas.
    pub fn with_schema(self, schema: &str) -> Result<Self> {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(s) => Ok(Self::Postgres(s.with_schema(schema)?)),
            #[allow(unreachable_patterns)]
            other => Err(queue_core::QueueError::invalid(
                "schema",
                format!("the {} backend has no schemas", other.backend()),
            )),
        }
    }

    /// The PostgreSQL storage, when this is one.
    #[cfg(feature = "postgres")]
    pub fn as_postgres(&self) -> Option<&queue_postgres::PgStorage> {
        #[allow(unreachable_patterns)]
        match self {
            Self::Postgres(s) => Some(s),
            _ => None,
        }
    }

    /// The MySQL / MariaDB storage, when this is one.
    #[cfg(feature = "mysql")]
    pub fn as_mysql(&self) -> Option<&queue_mysql::MySqlStorage> {
        #[allow(unreachable_patterns)]
        match self {
            Self::MySql(s) => Some(s),
            _ => None,
        }
    }

    /// The SQLite storage, when this is one.
    #[cfg(feature = "sqlite")]
    pub fn as_sqlite(&self) -> Option<&queue_sqlite::SqliteStorage> {
        #[allow(unreachable_patterns)]
        match self {
            Self::Sqlite(s) => Some(s),
            _ => None,
        }
    }

    /// The Redis storage, when this is one.
    #[cfg(feature = "redis")]
    pub fn as_redis(&self) -> Option<&queue_redis::RedisStorage> {
        #[allow(unreachable_patterns)]
        match self {
            Self::Redis(s) => Some(s),
            _ => None,
        }
    }
}

impl std::fmt::Debug for AnyStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AnyStorage").field(&self.backend()).finish()
    }
}

#[cfg(feature = "postgres")]
impl From<queue_postgres::PgStorage> for AnyStorage {
    fn from(storage: queue_postgres::PgStorage) -> Self {
        Self::Postgres(storage)
    }
}

#[cfg(feature = "mysql")]
impl From<queue_mysql::MySqlStorage> for AnyStorage {
    fn from(storage: queue_mysql::MySqlStorage) -> Self {
        Self::MySql(storage)
    }
}

#[cfg(feature = "sqlite")]
impl From<queue_sqlite::SqliteStorage> for AnyStorage {
    fn from(storage: queue_sqlite::SqliteStorage) -> Self {
        Self::Sqlite(storage)
    }
}

#[cfg(feature = "redis")]
impl From<queue_redis::RedisStorage> for AnyStorage {
    fn from(storage: queue_redis::RedisStorage) -> Self {
        Self::Redis(storage)
    }
}

/// Every method, the default-bodied ones included, goes to the backend, so
/// a backend's own implementation is always the one that runs.
#[async_trait]
impl Storage for AnyStorage {
    fn capabilities(&self) -> queue_core::Capabilities {
        each!(self, s => s.capabilities())
    }

    async fn now(&self) -> Result<DateTime<Utc>> {
        each!(self, s => s.now().await)
    }

    async fn enqueue(&self, job: NewJob) -> Result<EnqueueOutcome> {
        each!(self, s => s.enqueue(job).await)
    }

    async fn enqueue_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<EnqueueOutcome>> {
        each!(self, s => s.enqueue_batch(jobs).await)
    }

    async fn dequeue(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        each!(self, s => s.dequeue(request).await)
    }

    async fn next_due(&self, queues: &[QueueName]) -> Result<Option<Duration>> {
        each!(self, s => s.next_due(queues).await)
    }

    async fn ack(&self, lease: &Lease, result: Option<Value>) -> Result<()> {
        each!(self, s => s.ack(lease, result).await)
    }

    async fn ack_batch(&self, acks: &[Ack]) -> Result<Vec<bool>> {
        each!(self, s => s.ack_batch(acks).await)
    }

    async fn nack(&self, lease: &Lease, error: Value, retry: Retry) -> Result<NackOutcome> {
        each!(self, s => s.nack(lease, error, retry).await)
    }

    async fn release(&self, lease: &Lease) -> Result<bool> {
        each!(self, s => s.release(lease).await)
    }

    async fn heartbeat(&self, lease: &Lease, extend_by: Duration) -> Result<bool> {
        each!(self, s => s.heartbeat(lease, extend_by).await)
    }

    async fn heartbeat_batch(&self, leases: &[Lease], extend_by: Duration) -> Result<Vec<bool>> {
        each!(self, s => s.heartbeat_batch(leases, extend_by).await)
    }

    async fn reclaim_stalled(&self, limit: u32) -> Result<ReclaimOutcome> {
        each!(self, s => s.reclaim_stalled(limit).await)
    }

    async fn discard(&self, id: JobId) -> Result<()> {
        each!(self, s => s.discard(id).await)
    }

    async fn retry_dead_letter(&self, id: JobId) -> Result<()> {
        each!(self, s => s.retry_dead_letter(id).await)
    }

    async fn prune_history(&self, request: &PruneRequest) -> Result<u64> {
        each!(self, s => s.prune_history(request).await)
    }

    async fn stats_capped(&self, cap: u64) -> Result<Vec<QueueStats>> {
        each!(self, s => s.stats_capped(cap).await)
    }

    async fn get_job(&self, id: JobId) -> Result<Option<Job>> {
        each!(self, s => s.get_job(id).await)
    }

    async fn get_history(&self, id: JobId) -> Result<Option<HistoryRecord>> {
        each!(self, s => s.get_history(id).await)
    }

    async fn list_history(&self, filter: &HistoryFilter) -> Result<HistoryPage> {
        each!(self, s => s.list_history(filter).await)
    }

    async fn list_jobs(&self, filter: &JobFilter) -> Result<JobPage> {
        each!(self, s => s.list_jobs(filter).await)
    }

    async fn run_now(&self, filter: &JobFilter) -> Result<u64> {
        each!(self, s => s.run_now(filter).await)
    }

    async fn discard_jobs(&self, filter: &JobFilter) -> Result<u64> {
        each!(self, s => s.discard_jobs(filter).await)
    }

    async fn retry_dead_letters(&self, filter: &HistoryFilter) -> Result<u64> {
        each!(self, s => s.retry_dead_letters(filter).await)
    }

    async fn throughput(&self, window: Duration) -> Result<Vec<Throughput>> {
        each!(self, s => s.throughput(window).await)
    }

    async fn record_samples(&self, samples: &[QueueSample]) -> Result<()> {
        each!(self, s => s.record_samples(samples).await)
    }

    async fn samples(&self, window: Duration) -> Result<Vec<QueueSample>> {
        each!(self, s => s.samples(window).await)
    }

    async fn list_dead_letters(&self, filter: &HistoryFilter) -> Result<HistoryPage> {
        each!(self, s => s.list_dead_letters(filter).await)
    }

    async fn subscribe(&self) -> Result<Option<Wakeups>> {
        each!(self, s => s.subscribe().await)
    }

    async fn pause_queue(&self, queue: &QueueName) -> Result<()> {
        each!(self, s => s.pause_queue(queue).await)
    }

    async fn resume_queue(&self, queue: &QueueName) -> Result<()> {
        each!(self, s => s.resume_queue(queue).await)
    }

    async fn snooze(&self, lease: &Lease, delay: Duration) -> Result<DateTime<Utc>> {
        each!(self, s => s.snooze(lease, delay).await)
    }

    async fn cancel(&self, id: JobId) -> Result<()> {
        each!(self, s => s.cancel(id).await)
    }

    async fn configure_queue(&self, queue: &QueueName, limits: &QueueLimits) -> Result<()> {
        each!(self, s => s.configure_queue(queue, limits).await)
    }

    async fn queue_configs(&self) -> Result<Vec<QueueConfig>> {
        each!(self, s => s.queue_configs().await)
    }

    async fn set_group_limit(
        &self,
        queue: &QueueName,
        group: &queue_core::GroupKey,
        limit: Option<u32>,
    ) -> Result<()> {
        each!(self, s => s.set_group_limit(queue, group, limit).await)
    }

    async fn group_limits(&self) -> Result<Vec<queue_core::GroupLimit>> {
        each!(self, s => s.group_limits().await)
    }

    async fn set_group_weight(
        &self,
        queue: &QueueName,
        group: &queue_core::GroupKey,
        weight: Option<u32>,
    ) -> Result<()> {
        each!(self, s => s.set_group_weight(queue, group, weight).await)
    }

    async fn group_weights(&self) -> Result<Vec<queue_core::GroupWeight>> {
        each!(self, s => s.group_weights().await)
    }

    async fn job_links(&self, id: JobId) -> Result<queue_core::JobLinks> {
        each!(self, s => s.job_links(id).await)
    }

    async fn enqueue_periodic(&self, fire: &PeriodicFire) -> Result<Option<EnqueueOutcome>> {
        each!(self, s => s.enqueue_periodic(fire).await)
    }

    async fn schedules(&self) -> Result<Vec<ScheduleRecord>> {
        each!(self, s => s.schedules().await)
    }

    async fn register_worker(&self, worker: &WorkerInfo) -> Result<()> {
        each!(self, s => s.register_worker(worker).await)
    }

    async fn deregister_worker(&self, id: &WorkerId) -> Result<bool> {
        each!(self, s => s.deregister_worker(id).await)
    }

    async fn list_workers(
        &self,
        silent_after: Duration,
        forget_after: Duration,
    ) -> Result<Vec<WorkerRecord>> {
        each!(self, s => s.list_workers(silent_after, forget_after).await)
    }
}
