//! Connecting: to a standalone server or to a Redis Cluster (by seed
//! nodes or a `redis+cluster://` URL), and the check that the server
//! answers and runs scripts.

use std::sync::Arc;
use std::time::Duration;

use queue_core::{Clock, QueueError, Result, redact_secrets, redact_url};
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use crate::keys::Keys;
use crate::storage::DEFAULT_MAX_PAYLOAD_BYTES;
use crate::{RedisStorage, interpret_error};

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

    fn new(conn: Conn, node: String, pubsub: redis::Client) -> Self {
        Self {
            conn,
            keys: Keys::default(),
            clock: Clock::Database,
            node,
            pubsub,
            registry: Arc::default(),
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            durable: None,
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
}

/// The driver's refusal of `url`, with the URL's secrets hidden.
fn invalid_url(message: &str, url: &str) -> QueueError {
    QueueError::invalid("url", redact_secrets(message, url))
}

/// The node URLs of a `redis+cluster://[userinfo@]host:port,host:port[/…]`
/// (or `rediss+cluster://`) URL, each with the plain scheme; `None` for
/// any other URL.
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

/// The (host, port) of every master in a `CLUSTER NODES` listing.
pub(crate) fn cluster_masters(listing: &str) -> Vec<(String, u16)> {
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
