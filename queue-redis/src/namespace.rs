//! The namespace: its key layout (`migrate`), the queue registry (each
//! queue's index, cached per process), and clearing it.

use std::collections::HashMap;
use std::sync::PoisonError;

use futures_util::future::try_join_all;
use queue_core::{JobId, QueueError, QueueName, Result};

use crate::connect::{Conn, cluster_masters};
use crate::keys::{self, MAX_QUEUES};
use crate::storage::LAYOUT_VERSION;
use crate::{RedisStorage, rows, scripts};

/// Queue names and their indexes, as far as this process has seen them
/// (an index never changes once given).
#[derive(Debug, Default)]
pub(crate) struct Registry {
    pub(crate) by_name: HashMap<QueueName, i64>,
    pub(crate) by_index: HashMap<i64, QueueName>,
}

impl RedisStorage {
    /// Checks that the namespace holds this version's key layout and
    /// records it in a new namespace (`{<namespace>}:layout`), upgrading an
    /// older layout in place; returns `[LAYOUT_VERSION]` when it recorded
    /// or upgraded it, else nothing. Redis has no schema to create: keys
    /// appear with the first job.
    ///
    /// Layout 1 also kept every pending job by available_at in
    /// `P:ready_at`; layout 2 keeps only each priority level's oldest in
    /// `P:levels` (one sorted-set write less per job); layout 3 adds the
    /// id indexes of the listings (`P:ids:ready`, `P:ids:delayed`,
    /// `P:ids:leased`). The upgrade from 1 or 2 builds the newer indexes
    /// from the ones every layout has (one script per queue, which holds
    /// the server for about a second per million live jobs) and deletes
    /// `P:ready_at`.
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
            Some(found) if found == "1" || found == "2" => {
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
}
