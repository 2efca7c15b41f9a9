//! Durable writes: after a script that writes, `WAIT` until enough
//! replicas of the node that ran it have the write, or fail the call.
//!
//! Redis replicates asynchronously: a master that dies before its replica
//! has a write takes that write with it, and the replica promoted in its
//! place never saw it (an enqueue reported done is gone, an ack is undone
//! and its job runs again). With [`RedisStorage::with_durable_writes`] a
//! write is reported done only once `replicas` replicas acknowledged it;
//! one that they did not acknowledge within the timeout fails with
//! [`QueueError::Unavailable`] (it may or may not survive a failover, as
//! any call that failed: an enqueue is safe to repeat under its unique
//! key). `WAIT` covers every write sent before it on the node's
//! connection, which this storage's clones share, so concurrent calls
//! wait together rather than one after another.

use std::time::Duration;

use queue_core::{QueueError, Result};
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Arg, Cmd, FromRedisValue, Script};

use crate::connect::Conn;
use crate::{RedisStorage, interpret_error, scripts};

/// How many replicas must have a write, and how long to wait for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Durable {
    pub(crate) replicas: u32,
    pub(crate) timeout: Duration,
}

/// The longest wait [`RedisStorage::with_durable_writes`] accepts.
pub const MAX_DURABLE_TIMEOUT: Duration = Duration::from_secs(60);

impl RedisStorage {
    /// The same storage reporting a write done only once `replicas`
    /// replicas of the master that took it have it too (Redis `WAIT`),
    /// waiting at most `timeout` before failing the call with
    /// [`QueueError::Unavailable`]. Every script that writes (enqueue,
    /// claim, heartbeat, ack, nack and the others) pays one more round
    /// trip; reads do not.
    ///
    /// # Errors
    /// [`QueueError::InvalidInput`] for no replica, or a timeout of zero or
    /// above [`MAX_DURABLE_TIMEOUT`].
    pub fn with_durable_writes(mut self, replicas: u32, timeout: Duration) -> Result<Self> {
        if replicas == 0 {
            return Err(QueueError::invalid(
                "replicas",
                "durable writes wait for at least one replica",
            ));
        }
        // WAIT's timeout is in whole milliseconds, and 0 waits forever.
        if timeout < Duration::from_millis(1) || timeout > MAX_DURABLE_TIMEOUT {
            return Err(QueueError::invalid(
                "timeout",
                format!("between 1 ms and {} s", MAX_DURABLE_TIMEOUT.as_secs()),
            ));
        }
        self.durable = Some(Durable { replicas, timeout });
        Ok(self)
    }

    /// After `cmd` (an EVALSHA of `script`) succeeded: with durable writes
    /// on and a script that writes, waits for the replicas of the node
    /// that ran it.
    pub(crate) async fn after_write(&self, script: &Script, cmd: &Cmd) -> Result<()> {
        let Some(durable) = self.durable else {
            return Ok(());
        };
        if reads_only(script) {
            return Ok(());
        }
        let mut wait = redis::cmd("WAIT");
        wait.arg(durable.replicas)
            .arg(u64::try_from(durable.timeout.as_millis()).unwrap_or(u64::MAX));
        let acknowledged: i64 = match &self.conn {
            Conn::Cluster(conn) => {
                // EVALSHA sha 1 key …: wait on the master of the key's slot.
                let key = match cmd.args_iter().nth(3) {
                    Some(Arg::Simple(key)) => key,
                    _ => {
                        return Err(QueueError::backend(
                            "a script's command names no key to wait on",
                        ));
                    }
                };
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                    Route::with_key(key, SlotAddr::Master),
                ));
                let value = conn
                    .clone()
                    .route_command(wait, routing)
                    .await
                    .map_err(|e| interpret_error(&self.node, e))?;
                i64::from_redis_value(value)
                    .map_err(|e| interpret_error(&self.node, redis::RedisError::from(e)))?
            }
            _ => self.command(&wait).await?,
        };
        if acknowledged < i64::from(durable.replicas) {
            return Err(QueueError::unavailable(format!(
                "{acknowledged} of {} replicas acknowledged the write within {} ms: \
                 it was not made durable and may be lost in a failover",
                durable.replicas,
                durable.timeout.as_millis()
            )));
        }
        Ok(())
    }
}

/// Scripts that only read: no `WAIT` after them.
fn reads_only(script: &Script) -> bool {
    [
        &*scripts::DEQUEUE_PEEK,
        &*scripts::NEXT_DUE,
        &*scripts::RECLAIM_STALLED_PEEK,
        &*scripts::QUEUE_CONFIGS,
        &*scripts::GROUP_LIMITS,
        &*scripts::SCHEDULES,
        &*scripts::PRUNE_HISTORY_PEEK,
        &*scripts::LIST_HISTORY,
        &*scripts::LIST_JOBS,
        &*scripts::JOB_LINKS,
        &*scripts::LINK_STATUS,
        &*scripts::THROUGHPUT,
        &*scripts::COUNT,
        &*scripts::LIST_WORKERS,
    ]
    .iter()
    .any(|read| read.get_hash() == script.get_hash())
}
