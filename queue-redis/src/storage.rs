//! The Redis storage type: connecting (standalone or cluster), its
//! options, the queue registry, and the `Storage` implementation.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::future::try_join_all;
use queue_core::{
    Ack, Clock, DequeueRequest, EnqueueOutcome, FinalStatus, HistoryFilter, HistoryPage,
    HistoryRecord, Job, JobFilter, JobId, JobPage, Lease, NackOutcome, NewJob, PeriodicFire,
    PruneRequest, QueueConfig, QueueError, QueueLimits, QueueName, QueueStats, ReclaimOutcome,
    Result, Retry, ScheduleRecord, Storage, Throughput, Wakeups, redact_secrets, redact_url,
};
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{
    Cmd, ErrorKind, FromRedisValue, Pipeline, RedisFuture, Script, ServerErrorKind, Value,
};
use serde_json::Value as Json;

use crate::keys::{self, Keys, MAX_QUEUES};
use crate::{interpret_error, rows, scripts};

/// The namespace keys live under unless [`RedisStorage::with_namespace`]
/// says otherwise.
pub const DEFAULT_NAMESPACE: &str = "queue";

/// The largest payload (as JSON text) accepted unless
/// [`RedisStorage::with_max_payload_bytes`] says otherwise: 16 MiB. A
/// Redis value may hold 512 MiB, but every claim copies the payload
/// through the server's single thread.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 16 * 1024 * 1024;

/// The version of the key layout (see the crate docs) this version writes.
pub const LAYOUT_VERSION: u32 = 2;

/// How long connecting and each command may take before the node counts
/// as unreachable.
const TIMEOUT: Duration = Duration::from_secs(10);

/// One connection to a standalone server or to a cluster; cheap to clone.
#[derive(Clone)]
pub(crate) enum Conn {
    /// A standalone server, reconnecting by itself.
    Single(ConnectionManager),
    /// A Redis Cluster, routing each command by its key's slot.
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(conn) => conn.req_packed_command(cmd),
            Self::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Self::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(conn) => conn.get_db(),
            Self::Cluster(conn) => conn.get_db(),
        }
    }
}

/// Queue names and their indexes, as far as this process has seen them
/// (an index never changes once given).
#[derive(Debug, Default)]
struct Registry {
    by_name: HashMap<QueueName, i64>,
    by_index: HashMap<i64, QueueName>,
}

/// A job queue stored in Redis (standalone or Cluster).
///
/// Clones share one connection and one queue registry cache.
#[derive(Clone)]
pub struct RedisStorage {
    conn: Conn,
    pub(crate) keys: Keys,
    clock: Clock,
    node: String,
    pubsub: redis::Client,
    registry: Arc<RwLock<Registry>>,
    pub(crate) max_payload_bytes: usize,
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
    /// Connects to the standalone server at `url`
    /// (`redis://[[user]:password@]host[:port][/db]`), then checks that it
    /// answers and runs Lua scripts. A `redis+cluster://[userinfo@]host:port,host:port`
    /// URL connects to a cluster instead (see [`RedisStorage::connect_cluster`]).
    ///
    /// # Errors
    /// [`QueueError::InvalidInput`] for a URL that does not parse, and for
    /// `rediss://` (this build has no TLS client);
    /// [`QueueError::Unavailable`] naming the node when it cannot be
    /// reached; [`QueueError::Backend`] naming the node for a refused
    /// password or a server without scripting.
    pub async fn connect(url: &str) -> Result<Self> {
        if let Some(nodes) = cluster_nodes(url) {
            let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
            return Self::connect_cluster(&nodes).await;
        }
        let node = redact_url(url);
        let client = redis::Client::open(url).map_err(|e| invalid_url(&e.to_string(), url))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(TIMEOUT))
            .set_response_timeout(Some(TIMEOUT))
            .set_number_of_retries(1);
        let conn = ConnectionManager::new_with_config(client.clone(), config)
            .await
            .map_err(|e| interpret_error(&node, e))?;
        let storage = Self::new(Conn::Single(conn), node, client);
        storage.check().await?;
        Ok(storage)
    }

    /// Connects to the Redis Cluster that `nodes` (seed URLs) belong to,
    /// then checks that every slot is served and that it runs Lua scripts.
    /// Wake-ups are read from the first seed node (cluster pub/sub reaches
    /// every node).
    ///
    /// # Errors
    /// As [`RedisStorage::connect`]; a cluster whose state is not `ok`
    /// (slots without a master) is [`QueueError::Unavailable`] naming it.
    pub async fn connect_cluster(nodes: &[&str]) -> Result<Self> {
        let node = nodes
            .iter()
            .map(|n| redact_url(n))
            .collect::<Vec<_>>()
            .join(",");
        let first = nodes
            .first()
            .ok_or_else(|| QueueError::invalid("url", "name at least one cluster node"))?;
        let pubsub = redis::Client::open(*first).map_err(|e| invalid_url(&e.to_string(), first))?;
        let client = ClusterClientBuilder::new(nodes.to_vec())
            .connection_timeout(TIMEOUT)
            .response_timeout(TIMEOUT)
            .retries(2)
            .build()
            .map_err(|e| {
                let message = nodes.iter().fold(e.to_string(), |message, node| {
                    redact_secrets(&message, node)
                });
                QueueError::invalid("url", message)
            })?;
        let conn = client
            .get_async_connection()
            .await
            .map_err(|e| interpret_error(&node, e))?;
        let storage = Self::new(Conn::Cluster(conn), node, pubsub);
        storage.check().await?;
        let info: String = storage.command(redis::cmd("CLUSTER").arg("INFO")).await?;
        if !info.lines().any(|line| line.trim() == "cluster_state:ok") {
            return Err(QueueError::unavailable(format!(
                "Redis Cluster at {}: cluster_state is not ok (slots without a master?)",
                storage.node
            )));
        }
        Ok(storage)
    }

    /// Checks that the namespace holds this version's key layout and
    /// records it in a new namespace (`{<namespace>}:layout`), upgrading an
    /// older layout in place; returns `[LAYOUT_VERSION]` when it recorded
    /// or upgraded it, else nothing. Redis has no schema to create: keys
    /// appear with the first job.
    ///
    /// Layout 1 also kept every pending job by available_at in
    /// `P:ready_at`; layout 2 keeps only each priority level's oldest in
    /// `P:levels` (one sorted-set write less per job), and the upgrade
    /// builds that index and deletes the old one.
    /// Stop processes of the older version first: they would go on writing
    /// the index they know.
    ///
    /// # Errors
    /// [`QueueError::Conflict`] when the namespace was written with a
    /// layout this version does not know; else as any command.
    pub async fn migrate(&self) -> Result<Vec<u32>> {
        let key = format!("{}:layout", self.keys.global());
        let version = LAYOUT_VERSION.to_string();
        let set: Option<String> = self
            .command(redis::cmd("SET").arg(&key).arg(&version).arg("NX"))
            .await?;
        if set.is_some() {
            return Ok(vec![LAYOUT_VERSION]);
        }
        let found: Option<String> = self.command(redis::cmd("GET").arg(&key)).await?;
        match found {
            Some(found) if found == version => Ok(Vec::new()),
            Some(found) if found == "1" => {
                for queue in self.all_queues().await? {
                    let prefix = self.keys.queue(queue.as_str());
                    let _: i64 = self.invoke(&scripts::UPGRADE_LAYOUT, &prefix, &[]).await?;
                }
                let _: () = self
                    .command(redis::cmd("SET").arg(&key).arg(&version))
                    .await?;
                Ok(vec![LAYOUT_VERSION])
            }
            found => Err(QueueError::Conflict {
                reason: format!(
                    "namespace {} holds key layout {found:?}; this version writes layout {version}",
                    self.keys.namespace()
                ),
            }),
        }
    }

    fn new(conn: Conn, node: String, pubsub: redis::Client) -> Self {
        Self {
            conn,
            keys: Keys::default(),
            clock: Clock::Database,
            node,
            pubsub,
            registry: Arc::default(),
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
        }
    }

    /// The server answers and runs scripts (a server with scripting
    /// disabled, or a user denied EVAL, fails here rather than at the
    /// first enqueue).
    async fn check(&self) -> Result<()> {
        let _: String = self.command(&redis::cmd("PING")).await?;
        let probe: i64 = self
            .command(redis::cmd("EVAL").arg("return 1").arg(0))
            .await
            .map_err(|error| {
                QueueError::backend(format!(
                    "Redis at {} does not run Lua scripts, which this storage needs: {error}",
                    self.node
                ))
            })?;
        if probe != 1 {
            return Err(QueueError::backend(format!(
                "Redis at {} answered a script probe with {probe}",
                self.node
            )));
        }
        Ok(())
    }

    /// The same storage with its keys under `namespace` (default
    /// [`DEFAULT_NAMESPACE`]): storages in different namespaces share
    /// nothing. 1 to 64 ASCII letters, digits, `_`, `-`, `.` or `:`.
    ///
    /// # Errors
    /// [`QueueError::InvalidInput`] for `namespace`.
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
        rows::instant(secs.saturating_mul(1_000_000).saturating_add(micros))
    }

    /// The clock argument of every script: the manual clock's microseconds,
    /// or empty for the server's `TIME`.
    pub(crate) fn now_arg(&self) -> String {
        self.clock
            .fixed_now()
            .map(|now| now.timestamp_micros().to_string())
            .unwrap_or_default()
    }

    /// Runs one command.
    pub(crate) async fn command<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T> {
        let mut conn = self.conn.clone();
        cmd.query_async(&mut conn)
            .await
            .map_err(|e| interpret_error(&self.node, e))
    }

    /// Runs `script` with the single key `key` (a queue prefix or the
    /// global prefix, which routes it to its slot) and `args`.
    pub(crate) async fn invoke<T: FromRedisValue>(
        &self,
        script: &Script,
        key: &str,
        args: &[String],
    ) -> Result<T> {
        let mut cmd = script_cmd(script, key);
        for arg in args {
            cmd.arg(arg);
        }
        self.run_script(script, &cmd).await
    }

    /// Runs `cmd`, made by [`script_cmd`] for `script`, loading the script
    /// when the server does not know it (NOSCRIPT) and running it again.
    pub(crate) async fn run_script<T: FromRedisValue>(
        &self,
        script: &Script,
        cmd: &Cmd,
    ) -> Result<T> {
        let mut conn = self.conn.clone();
        let answer = match cmd.query_async(&mut conn).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                script
                    .prepare_invoke()
                    .load_async(&mut conn)
                    .await
                    .map_err(|e| interpret_error(&self.node, e))?;
                cmd.query_async(&mut conn).await
            }
            answer => answer,
        };
        answer.map_err(|e| interpret_error(&self.node, e))
    }

    /// Gives each of `queues` its index (once per namespace) and reserves
    /// `ids` job sequence numbers; returns the last one reserved and the
    /// indexes in the order of `queues`.
    pub(crate) async fn register(
        &self,
        queues: &[&QueueName],
        ids: usize,
    ) -> Result<(i64, Vec<i64>)> {
        let unknown: Vec<&QueueName> = {
            let registry = self.registry.read().unwrap_or_else(PoisonError::into_inner);
            queues
                .iter()
                .copied()
                .filter(|q| !registry.by_name.contains_key(*q))
                .collect()
        };
        let mut args = vec![MAX_QUEUES.to_string(), ids.to_string()];
        args.extend(unknown.iter().map(|q| q.as_str().to_owned()));
        let answer: Vec<i64> = self
            .invoke(&scripts::REGISTER, &self.keys.global(), &args)
            .await
            .map_err(|error| match error {
                QueueError::Backend(source) if source.to_string().contains("QUEUELIMIT") => {
                    QueueError::invalid("queue", source.to_string())
                }
                other => other,
            })?;
        let (last, indexes) = answer
            .split_first()
            .ok_or_else(|| QueueError::backend("the register script returned nothing"))?;
        let mut registry = self
            .registry
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        for (queue, index) in unknown.iter().zip(indexes) {
            registry.by_name.insert((*queue).clone(), *index);
            registry.by_index.insert(*index, (*queue).clone());
        }
        let indexes = queues
            .iter()
            .map(|q| {
                registry
                    .by_name
                    .get(*q)
                    .copied()
                    .ok_or_else(|| QueueError::backend(format!("queue {q} was not registered")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((*last, indexes))
    }

    /// The queue a job id belongs to, or `None` when no queue has its index.
    pub(crate) async fn queue_of(&self, id: JobId) -> Result<Option<QueueName>> {
        let index = keys::queue_index(id);
        if let Some(queue) = self
            .registry
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .by_index
            .get(&index)
        {
            return Ok(Some(queue.clone()));
        }
        let name: Option<String> = self
            .command(redis::cmd("HGET").arg(self.keys.queue_names()).arg(index))
            .await?;
        let Some(name) = name else {
            return Ok(None);
        };
        let queue = rows::queue_name(name)?;
        let mut registry = self
            .registry
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        registry.by_name.insert(queue.clone(), index);
        registry.by_index.insert(index, queue.clone());
        Ok(Some(queue))
    }

    /// Every queue of the namespace, sorted by name.
    pub(crate) async fn all_queues(&self) -> Result<Vec<QueueName>> {
        let found: HashMap<String, i64> = self
            .command(redis::cmd("HGETALL").arg(self.keys.queues()))
            .await?;
        let mut queues = Vec::with_capacity(found.len());
        let mut registry = self
            .registry
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        for (name, index) in found {
            let queue = rows::queue_name(name)?;
            registry.by_name.insert(queue.clone(), index);
            registry.by_index.insert(index, queue.clone());
            queues.push(queue);
        }
        queues.sort();
        Ok(queues)
    }

    /// Deletes every key of this storage's namespace on every master (its
    /// jobs, history, registry and layout record) and returns how many.
    /// For tests and benchmarks; not atomic: stop the workers first.
    ///
    /// # Errors
    /// As any command.
    pub async fn clear(&self) -> Result<u64> {
        let patterns = [
            format!("{}:*", self.keys.namespace()),
            format!("{}:*", self.keys.global()),
        ];
        let nodes: Vec<Option<(String, u16)>> = match &self.conn {
            Conn::Single(_) => vec![None],
            Conn::Cluster(_) => {
                let listing: String = self.command(redis::cmd("CLUSTER").arg("NODES")).await?;
                cluster_masters(&listing).into_iter().map(Some).collect()
            }
        };
        // The registry goes too: forget the indexes this process cached.
        *self
            .registry
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Registry::default();
        let mut deleted = 0;
        for node in &nodes {
            for pattern in &patterns {
                let mut cursor = 0_u64;
                loop {
                    let mut scan = redis::cmd("SCAN");
                    scan.arg(cursor)
                        .arg("MATCH")
                        .arg(pattern)
                        .arg("COUNT")
                        .arg(1000);
                    let (next, keys): (u64, Vec<String>) = self.command_on(node, &scan).await?;
                    // One key per command (keys of a page may sit in
                    // different slots), sent together: one round trip a page.
                    let unlinks = keys.iter().map(|key| async move {
                        self.command::<u64>(redis::cmd("UNLINK").arg(key)).await
                    });
                    deleted += try_join_all(unlinks).await?.into_iter().sum::<u64>();
                    if next == 0 {
                        break;
                    }
                    cursor = next;
                }
            }
        }
        Ok(deleted)
    }

    /// Runs `cmd` on one cluster node (`Some((host, port))`), or on the
    /// standalone server.
    async fn command_on<T: FromRedisValue>(
        &self,
        node: &Option<(String, u16)>,
        cmd: &Cmd,
    ) -> Result<T> {
        match (&self.conn, node) {
            (Conn::Cluster(conn), Some((host, port))) => {
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                });
                let value = conn
                    .clone()
                    .route_command(cmd.clone(), routing)
                    .await
                    .map_err(|e| interpret_error(&self.node, e))?;
                T::from_redis_value(value)
                    .map_err(|e| interpret_error(&self.node, redis::RedisError::from(e)))
            }
            _ => self.command(cmd).await,
        }
    }

    /// The client that wake-up subscriptions connect with.
    pub(crate) fn pubsub_client(&self) -> &redis::Client {
        &self.pubsub
    }
}

/// The (host, port) of every master in a `CLUSTER NODES` listing.
fn cluster_masters(listing: &str) -> Vec<(String, u16)> {
    listing
        .lines()
        .filter(|line| {
            line.split_whitespace()
                .nth(2)
                .is_some_and(|flags| flags.split(',').any(|f| f == "master"))
        })
        .filter_map(|line| line.split_whitespace().nth(1))
        .filter_map(|address| address.split('@').next()?.rsplit_once(':'))
        .filter_map(|(host, port)| Some((host.to_owned(), port.parse().ok()?)))
        .collect()
}

/// The node URLs of a `redis+cluster://[userinfo@]host:port,host:port[/…]`
/// (or `rediss+cluster://`) URL, each with the plain scheme; `None` for
/// any other URL.
/// The driver's refusal of `url`, with the URL's secrets hidden.
fn invalid_url(message: &str, url: &str) -> QueueError {
    QueueError::invalid("url", redact_secrets(message, url))
}

fn cluster_nodes(url: &str) -> Option<Vec<String>> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "redis+cluster" => "redis",
        "rediss+cluster" => "rediss",
        _ => return None,
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (format!("{userinfo}@"), hosts),
        None => (String::new(), authority),
    };
    Some(
        hosts
            .split(',')
            .map(|host| format!("{scheme}://{userinfo}{host}{tail}"))
            .collect(),
    )
}

#[async_trait::async_trait]
impl Storage for RedisStorage {
    async fn now(&self) -> Result<DateTime<Utc>> {
        match self.clock.fixed_now() {
            Some(now) => Ok(now),
            None => self.server_now().await,
        }
    }

    async fn enqueue_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<EnqueueOutcome>> {
        self.enqueue_jobs(jobs).await
    }

    async fn dequeue(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        self.dequeue_jobs(request).await
    }

    async fn next_due(&self, queues: &[QueueName]) -> Result<Option<Duration>> {
        self.next_due_of(queues).await
    }

    async fn ack_batch(&self, acks: &[Ack]) -> Result<Vec<bool>> {
        self.ack_jobs(acks).await
    }

    async fn nack(&self, lease: &Lease, error: Json, retry: Retry) -> Result<NackOutcome> {
        self.nack_job(lease, &error, retry).await
    }

    async fn release(&self, lease: &Lease) -> Result<bool> {
        self.release_job(lease).await
    }

    async fn heartbeat_batch(&self, leases: &[Lease], extend_by: Duration) -> Result<Vec<bool>> {
        self.heartbeat_leases(leases, extend_by).await
    }

    async fn reclaim_stalled(&self, limit: u32) -> Result<ReclaimOutcome> {
        self.reclaim(limit).await
    }

    async fn discard(&self, id: JobId) -> Result<()> {
        self.discard_job(id).await
    }

    async fn cancel(&self, id: JobId) -> Result<()> {
        self.remove_job(id, FinalStatus::Cancelled).await
    }

    async fn snooze(&self, lease: &Lease, delay: Duration) -> Result<DateTime<Utc>> {
        self.snooze_job(lease, delay).await
    }

    async fn configure_queue(&self, queue: &QueueName, limits: &QueueLimits) -> Result<()> {
        self.configure(queue, limits).await
    }

    async fn queue_configs(&self) -> Result<Vec<QueueConfig>> {
        self.configs().await
    }

    async fn enqueue_periodic(&self, fire: &PeriodicFire) -> Result<Option<EnqueueOutcome>> {
        self.fire(fire).await
    }

    async fn schedules(&self) -> Result<Vec<ScheduleRecord>> {
        self.schedule_records().await
    }

    async fn retry_dead_letter(&self, id: JobId) -> Result<()> {
        self.retry_job(id).await
    }

    async fn prune_history(&self, request: &PruneRequest) -> Result<u64> {
        self.prune(request).await
    }

    async fn stats_capped(&self, cap: u64) -> Result<Vec<QueueStats>> {
        queue_core::validate_count_cap(cap)?;
        let stats = self.queue_stats().await?;
        Ok(stats.into_iter().map(|s| s.capped_at(cap)).collect())
    }

    async fn get_job(&self, id: JobId) -> Result<Option<Job>> {
        self.read_job(id).await
    }

    async fn get_history(&self, id: JobId) -> Result<Option<HistoryRecord>> {
        self.read_history(id).await
    }

    async fn list_history(&self, filter: &HistoryFilter) -> Result<HistoryPage> {
        self.history_page(filter).await
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
        self.list_live(filter).await
    }

    async fn run_now(&self, filter: &JobFilter) -> Result<u64> {
        self.run_now_jobs(filter).await
    }

    async fn discard_jobs(&self, filter: &JobFilter) -> Result<u64> {
        self.discard_selected(filter).await
    }

    async fn retry_dead_letters(&self, filter: &HistoryFilter) -> Result<u64> {
        self.retry_selected(filter).await
    }

    async fn throughput(&self, window: Duration) -> Result<Vec<Throughput>> {
        self.throughput_series(window).await
    }
}

/// The `EVALSHA` of `script` with the single key `key`, its arguments to
/// be added (each goes straight into the command's one buffer); run it
/// with [`RedisStorage::run_script`].
pub(crate) fn script_cmd(script: &Script, key: &str) -> Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script.get_hash()).arg(1).arg(key);
    cmd
}

#[cfg(test)]
mod tests {
    use super::cluster_nodes;

    #[test]
    fn cluster_masters_are_read_from_cluster_nodes() {
        let listing = "a1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460\n\
                       b2 127.0.0.1:7002@17002 slave a1 0 0 1 connected\n\
                       c3 10.0.0.3:7003@17003 master - 0 0 3 connected 5461-16383\n";
        assert_eq!(
            super::cluster_masters(listing),
            vec![
                ("127.0.0.1".to_owned(), 7001),
                ("10.0.0.3".to_owned(), 7003)
            ]
        );
    }

    #[test]
    fn cluster_urls_name_every_node_with_the_plain_scheme() {
        assert_eq!(
            cluster_nodes("redis+cluster://:pw@10.0.0.1:7001,10.0.0.2:7002/0"),
            Some(vec![
                "redis://:pw@10.0.0.1:7001/0".to_owned(),
                "redis://:pw@10.0.0.2:7002/0".to_owned()
            ])
        );
        assert_eq!(cluster_nodes("redis://127.0.0.1:6379"), None);
    }
}
