//! The SQLite storage type: opening the database and its options.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use queue_core::backend::LimitedQueues;
use queue_core::backend::stored_instant;
use queue_core::{
    Ack, Capabilities, Capability, Clock, DequeueRequest, EnqueueOutcome, FinalStatus, GroupKey,
    GroupLimit, GroupWeight, HistoryFilter, HistoryPage, HistoryRecord, Job, JobFilter, JobId,
    JobPage, Lease, NackOutcome, NewJob, PeriodicFire, PruneRequest, QueueConfig, QueueError,
    QueueLimits, QueueName, QueueSample, QueueStats, ReclaimOutcome, Result, Retry, ScheduleRecord,
    Storage, Throughput, Wakeup, Wakeups, WorkerId, WorkerInfo, WorkerRecord, redact_secrets,
};
use serde_json::Value;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Connection, SqliteConnection, SqlitePool};
use tokio::sync::{Mutex, broadcast};

use crate::checkpoint::{self, Checkpointer};
use crate::error::open_error;
use crate::{migrate, sql};

/// How long a connection waits for another writer's lock before SQLite
/// reports the database busy.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections per pool for a file: reads and the caller's own
/// transactions. The storage's writes run on one more connection of their
/// own (SQLite has one writer at a time).
const FILE_CONNECTIONS: u32 = 8;

/// How many wake-ups a slow subscriber may fall behind before it is told
/// to look at every queue.
const WAKEUP_BACKLOG: usize = 1024;

/// How far a committed write survives, chosen by the URL's `synchronous`
/// parameter. Files are always in WAL mode; this sets SQLite's
/// `synchronous` setting. See docs/reliability.md.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=NORMAL`, the default: a commit is written to the WAL
    /// before it returns, and the WAL is synced to disk at checkpoints, not
    /// at every commit. A commit survives the application crashing or being
    /// killed (the operating system holds the write); a power loss or an
    /// operating-system crash may lose the last commits before the
    /// checkpoint, but never corrupts the file. This is the setting SQLite
    /// recommends with WAL, and it spares a disk sync per write, which
    /// would bound a queue to the disk's sync rate (a few hundred to a few
    /// thousand writes per second).
    #[default]
    Normal,
    /// `synchronous=FULL`: every commit syncs the WAL to disk before it
    /// returns, so a commit also survives a power loss; each write waits
    /// for the disk.
    Full,
}

impl Durability {
    /// Takes the `synchronous` parameter out of `url` (sqlx does not know
    /// it), returning the URL without it and the durability it names.
    fn from_url(url: &str) -> Result<(String, Self)> {
        let Some((base, query)) = url.split_once('?') else {
            return Ok((url.to_owned(), Self::default()));
        };
        let mut durability = Self::default();
        let mut rest = Vec::new();
        for pair in query.split('&') {
            match pair.split_once('=') {
                Some(("synchronous", value)) => {
                    durability = match value.to_ascii_lowercase().as_str() {
                        "normal" => Self::Normal,
                        "full" => Self::Full,
                        _ => {
                            return Err(QueueError::invalid(
                                "url",
                                format!("synchronous={value}: expected normal or full"),
                            ));
                        }
                    }
                }
                _ => rest.push(pair),
            }
        }
        let url = if rest.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", rest.join("&"))
        };
        Ok((url, durability))
    }

    fn synchronous(self) -> SqliteSynchronous {
        match self {
            Self::Normal => SqliteSynchronous::Normal,
            Self::Full => SqliteSynchronous::Full,
        }
    }
}

/// A job queue stored in SQLite.
///
/// Clones share one connection pool and one set of wake-up subscribers.
#[derive(Debug, Clone)]
pub struct SqliteStorage {
    pub(crate) pool: SqlitePool,
    path: String,
    clock: Clock,
    wakeups: broadcast::Sender<Wakeup>,
    /// Which queues have claim limits, as read at most a second ago.
    pub(crate) limited: Arc<LimitedQueues>,
    /// Which queues' only claim limits are their groups', as read at most a
    /// second ago: their claims try [`crate::sql::GROUP_CLAIM_QUEUE`] first.
    pub(crate) groups_only: Arc<LimitedQueues>,
    /// Held through each write of this storage and its clones: SQLite has
    /// one writer at a time, and waiting for the turn here wakes the next
    /// writer as soon as the last one commits, where SQLite's busy handler
    /// would poll the lock with sleeps of a millisecond and more.
    ///
    /// For a file it holds the connection every write runs on, kept out of
    /// the pool: a pooled connection costs a spawned task and a ping on
    /// every release. In memory it holds `None` and writes take the pool's
    /// one connection (another connection would be another database).
    pub(crate) write_turn: Arc<Mutex<Option<SqliteConnection>>>,
    /// A file's WAL checkpoints, off the write path (`checkpoint.rs`);
    /// `None` in memory.
    _checkpointer: Option<Arc<Checkpointer>>,
}

impl SqliteStorage {
    /// Opens the database at `url` and applies the embedded migrations.
    ///
    /// `sqlite::memory:` opens a private in-memory database on one
    /// connection (gone when the storage is dropped; a transaction of the
    /// caller's holds that connection, so use a file for `*_in` calls);
    /// `sqlite://path?mode=rwc` opens or creates a file. Files use WAL
    /// journaling and a busy timeout, so several processes can share one.
    ///
    /// A path that is a directory, a file that is not a database, or one
    /// that cannot be read or written returns an error naming the path,
    /// and nothing is left half-migrated.
    ///
    /// The query parameter `synchronous` chooses the [`Durability`] of a
    /// file: `synchronous=normal` (the default) or `synchronous=full`, as in
    /// `sqlite://jobs.db?mode=rwc&synchronous=full`.
    pub async fn connect(url: &str) -> Result<Self> {
        let (url, durability) = Durability::from_url(url)?;
        let options = SqliteConnectOptions::from_str(&url).map_err(|error| {
            QueueError::invalid("url", redact_secrets(&error.to_string(), &url))
        })?;
        let path = options.get_filename().display().to_string();
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        let options = options
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(false)
            .synchronous(durability.synchronous());
        let options = if in_memory {
            options
        } else {
            options.journal_mode(SqliteJournalMode::Wal)
        };
        if !in_memory {
            // Switching a new file to WAL takes an exclusive lock for which
            // SQLite does not wait: pool connections doing it at the same
            // time fail with "database is locked". One connection does it
            // first; WAL is kept in the file, so the others find it set.
            let first = SqliteConnection::connect_with(&options)
                .await
                .map_err(|error| open_error(&path, error))?;
            let _ = first.close().await;
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(if in_memory { 1 } else { FILE_CONNECTIONS })
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            // A ping before each use checks a network connection; an
            // embedded one cannot drop, and the ping costs a round trip to
            // the connection's thread on every acquire.
            .test_before_acquire(false)
            .connect_with(options.clone())
            .await
            .map_err(|error| open_error(&path, error))?;
        sqlx::query(sql::OPEN_CHECK)
            .execute(&pool)
            .await
            .map_err(|error| open_error(&path, error))?;
        migrate(&pool, &path).await?;
        let (writer, checkpointer) = if in_memory {
            (None, None)
        } else {
            // Its commits never checkpoint: the checkpoint task does.
            let writer_options = options.clone().pragma("wal_autocheckpoint", "0");
            let writer = SqliteConnection::connect_with(&writer_options)
                .await
                .map_err(|error| open_error(&path, error))?;
            let checkpointer = checkpoint::spawn(pool.clone(), path.clone());
            (Some(writer), Some(checkpointer))
        };
        let (wakeups, _) = broadcast::channel(WAKEUP_BACKLOG);
        Ok(Self {
            pool,
            path,
            clock: Clock::Database,
            wakeups,
            limited: Arc::default(),
            groups_only: Arc::default(),
            write_turn: Arc::new(Mutex::new(writer)),
            _checkpointer: checkpointer,
        })
    }

    /// Applies the embedded migrations not yet applied (`connect` already
    /// did; this is for the same call as the other backends'), returning
    /// their versions. Safe to repeat and to run in several processes.
    ///
    /// # Errors
    /// As [`SqliteStorage::connect`]'s migration step.
    pub async fn migrate(&self) -> Result<Vec<u32>> {
        migrate(&self.pool, &self.path).await
    }

    /// The same storage reading `clock`: a [`queue_core::ManualClock`] in
    /// tests, [`Clock::Database`] (SQLite's clock) otherwise.
    pub fn with_clock(mut self, clock: impl Into<Clock>) -> Self {
        self.clock = clock.into();
        self
    }

    /// Now, in microseconds since the epoch: the manual clock's, or the
    /// system clock SQLite itself reads.
    ///
    /// SQLite's `unixepoch('subsec')` is the operating system's real-time
    /// clock of the process running the statement, and every process that
    /// shares a database file runs on the same machine (WAL needs shared
    /// memory), so reading that clock here is reading the database's clock,
    /// at microsecond rather than millisecond precision, without a
    /// statement and its round trip to the connection's thread.
    pub(crate) fn now_micros(&self) -> i64 {
        self.clock
            .fixed_now()
            .unwrap_or_else(Utc::now)
            .timestamp_micros()
    }

    /// Wakes this process's subscribers: jobs of `queue` became claimable
    /// in a committed transaction.
    pub(crate) fn signal(&self, queue: &QueueName) {
        // No subscriber is not an error: nobody is waiting.
        let _ = self.wakeups.send(Wakeup::Queue(queue.clone()));
    }

    /// Tells this process's subscribers that job `id` left the live table
    /// by discard or cancel: a worker running it stops.
    pub(crate) fn signal_cancelled(&self, id: JobId) {
        let _ = self.wakeups.send(Wakeup::Cancelled(id));
    }

    /// A stream of this storage's wake-ups (shared by its clones).
    pub(crate) fn wakeup_stream(&self) -> Wakeups {
        let receiver = self.wakeups.subscribe();
        Box::pin(futures_util::stream::unfold(
            receiver,
            |mut receiver| async move {
                let next = match receiver.recv().await {
                    Ok(wakeup) => wakeup,
                    Err(broadcast::error::RecvError::Lagged(_)) => Wakeup::All,
                    Err(broadcast::error::RecvError::Closed) => return None,
                };
                Some((Ok(next), receiver))
            },
        ))
    }

    /// The connection pool, for the caller's own queries and transactions.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// The database file this storage opened (a generated name in memory).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The database's clock: UTC, microsecond precision.
    pub async fn database_now(&self) -> Result<DateTime<Utc>> {
        let micros: i64 = sqlx::query_scalar(sql::NOW_MICROS)
            .fetch_one(&self.pool)
            .await
            .map_err(crate::interpret_error)?;
        stored_instant("time", micros)
    }
}

#[async_trait::async_trait]
impl Storage for SqliteStorage {
    fn capabilities(&self) -> Capabilities {
        Capabilities::OPERATIONS
            .with(Capability::Wakeups)
            .with(Capability::Transactions)
            .with(Capability::Workers)
            .with(Capability::GroupLimits)
            .with(Capability::PriorityAging)
            .with(Capability::FairGroups)
            .with(Capability::GroupWeights)
            .with(Capability::Samples)
            .with(Capability::Dependencies)
            .with(Capability::Batches)
    }

    async fn now(&self) -> Result<DateTime<Utc>> {
        stored_instant("time", self.now_micros())
    }

    async fn enqueue_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<EnqueueOutcome>> {
        self.enqueue_batch_pooled(jobs).await
    }

    async fn dequeue(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        self.dequeue_pooled(request).await
    }

    async fn job_links(&self, id: JobId) -> Result<queue_core::JobLinks> {
        self.job_links_pooled(id).await
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
        Ok(Some(self.wakeup_stream()))
    }

    async fn pause_queue(&self, queue: &QueueName) -> Result<()> {
        self.set_paused(queue, true).await
    }

    async fn resume_queue(&self, queue: &QueueName) -> Result<()> {
        self.set_paused(queue, false).await
    }
}
