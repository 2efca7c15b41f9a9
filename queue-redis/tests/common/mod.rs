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
