//! Running commands and scripts: on the storage's connection, on one
//! cluster node, and scripts by EVALSHA with a reload on NOSCRIPT.

use queue_core::Result;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, ErrorKind, FromRedisValue, Script, ServerErrorKind};

use crate::connect::Conn;
use crate::{RedisStorage, interpret_error};

impl RedisStorage {
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

    /// Runs `script` with the keys `keys` (queue prefixes: one on a
    /// cluster, where it routes the script to its slot; several only on
    /// standalone Redis) and `args`.
    pub(crate) async fn invoke_keys<T: FromRedisValue>(
        &self,
        script: &Script,
        keys: &[String],
        args: &[String],
    ) -> Result<T> {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.get_hash()).arg(keys.len()).arg(keys);
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
        let answer = answer.map_err(|e| interpret_error(&self.node, e))?;
        self.after_write(script, cmd).await?;
        Ok(answer)
    }

    /// Runs `cmd` on one cluster node (`Some((host, port))`), or on the
    /// standalone server.
    pub(crate) async fn command_on<T: FromRedisValue>(
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
}

/// The `EVALSHA` of `script` with the single key `key`, its arguments to
/// be added (each goes straight into the command's one buffer); run it
/// with [`RedisStorage::run_script`].
pub(crate) fn script_cmd(script: &Script, key: &str) -> Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script.get_hash()).arg(1).arg(key);
    cmd
}
