//! What the Redis test binaries share: a storage in a fresh namespace per
//! case (removed afterwards), on a standalone server or a cluster.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use queue_core::Clock;
use queue_redis::RedisStorage;
use queue_testkit::suite::{Fixture, StorageFactory};

/// The standalone server, from `QUEUE_TEST_REDIS_URL`.
pub(crate) fn standalone_url() -> String {
    std::env::var("QUEUE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A node of the cluster, from `QUEUE_TEST_REDIS_CLUSTER_URL`.
pub(crate) fn cluster_url() -> String {
    std::env::var("QUEUE_TEST_REDIS_CLUSTER_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:7001".into())
}

/// A namespace no other case (in this or another process) uses.
pub(crate) fn fresh_namespace() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "qt-{}-{nanos:x}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Connects to the standalone server or the cluster; panics with one line
/// naming the variable to set when it cannot.
pub(crate) async fn connect(cluster: bool) -> RedisStorage {
    let (url, variable, hint) = if cluster {
        (
            cluster_url(),
            "QUEUE_TEST_REDIS_CLUSTER_URL",
            "start one with scripts/redis-cluster.sh start",
        )
    } else {
        (
            standalone_url(),
            "QUEUE_TEST_REDIS_URL",
            "start redis-server",
        )
    };
    let connected = if cluster {
        RedisStorage::connect_cluster(&[url.as_str()]).await
    } else {
        RedisStorage::connect(&url).await
    };
    connected.unwrap_or_else(|error| {
        panic!("Redis at {url} is unreachable ({error}): {hint}, or set {variable}")
    })
}

/// A storage on the standalone server in `namespace`.
pub(crate) async fn standalone_in(namespace: &str) -> RedisStorage {
    connect(false)
        .await
        .with_namespace(namespace)
        .expect("a valid namespace")
}

/// A plain connection to the standalone server, for what a test reads or
/// plants beside the storage.
pub(crate) async fn raw_connection() -> redis::aio::MultiplexedConnection {
    redis::Client::open(standalone_url().as_str())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

/// The key holding `namespace`'s layout version.
pub(crate) fn layout_key(namespace: &str) -> String {
    format!("{{{namespace}}}:layout")
}

/// Asserts that `namespace` records the current layout version.
pub(crate) async fn assert_current_layout(
    conn: &mut redis::aio::MultiplexedConnection,
    namespace: &str,
) {
    let version: String = redis::cmd("GET")
        .arg(layout_key(namespace))
        .query_async(conn)
        .await
        .expect("layout");
    assert_eq!(version, queue_redis::LAYOUT_VERSION.to_string());
}

/// Deletes every key of `namespace` on every master.
pub(crate) async fn purge(cluster: bool, namespace: String) {
    connect(cluster)
        .await
        .with_namespace(&namespace)
        .expect("a valid namespace")
        .clear()
        .await
        .expect("clear the namespace");
}

/// Makes a `RedisStorage` in a fresh namespace, removed after the case.
pub(crate) struct RedisFactory {
    /// Against the cluster instead of the standalone server.
    pub(crate) cluster: bool,
}

impl RedisFactory {
    /// On the standalone server.
    pub(crate) const STANDALONE: Self = Self { cluster: false };
    /// On the cluster.
    pub(crate) const CLUSTER: Self = Self { cluster: true };
}

#[async_trait]
impl StorageFactory for RedisFactory {
    type Storage = RedisStorage;

    async fn create(&self, clock: Clock) -> Fixture<RedisStorage> {
        let namespace = fresh_namespace();
        let cluster = self.cluster;
        let open = |clock: Clock, namespace: String| async move {
            connect(cluster)
                .await
                .with_namespace(&namespace)
                .expect("a valid namespace")
                .with_clock(clock)
        };
        let storage = open(clock.clone(), namespace.clone()).await;
        Fixture::new(storage)
            .with_teardown(purge(cluster, namespace.clone()))
            .with_second_handle(open(clock, namespace))
    }
}
