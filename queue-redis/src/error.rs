//! Mapping the `redis` crate's errors to [`QueueError`], naming the node.

use std::fmt;

use queue_core::QueueError;
use redis::{ErrorKind, ServerErrorKind};

/// An error from the Redis server or connection at `node` (a URL with
/// any password redacted, or the cluster's seed nodes).
#[derive(Debug)]
pub struct NodeError {
    node: String,
    source: redis::RedisError,
}

impl NodeError {
    /// The node (or cluster seed list) the error came from.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The client's error.
    pub fn redis_error(&self) -> &redis::RedisError {
        &self.source
    }
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redis at {}: {}", self.node, self.source)
    }
}

impl std::error::Error for NodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// True for errors worth retrying: the connection, a cluster in motion,
/// a server loading its data set or busy with a script.
fn is_transient(error: &redis::RedisError) -> bool {
    if error.is_io_error()
        || error.is_connection_refusal()
        || error.is_connection_dropped()
        || error.is_timeout()
    {
        return true;
    }
    match error.kind() {
        ErrorKind::Io | ErrorKind::ClusterConnectionNotFound => true,
        ErrorKind::Server(kind) => matches!(
            kind,
            ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::MasterDown
                | ServerErrorKind::BusyLoading
                | ServerErrorKind::Moved
                | ServerErrorKind::Ask
                | ServerErrorKind::ReadOnly
        ),
        _ => false,
    }
}

/// Maps an error met talking to `node`: connection trouble and a cluster
/// in motion are [`QueueError::Unavailable`] (worth retrying), the rest
/// (a wrong password, a server without scripting, out of memory, ...)
/// [`QueueError::Backend`]. Both carry a [`NodeError`] naming the node.
pub fn interpret_error(node: &str, error: redis::RedisError) -> QueueError {
    let transient = is_transient(&error);
    let error = NodeError {
        node: node.to_owned(),
        source: error,
    };
    if transient {
        QueueError::unavailable(error)
    } else {
        QueueError::backend(error)
    }
}
