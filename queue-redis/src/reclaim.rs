//! Reclaim: recovering jobs whose holder died. Over several queues a peek
//! per queue finds the oldest expired leases, and the reclaim script then
//! takes each queue's share of the oldest `limit` (one script for all on
//! standalone Redis, one per queue on a cluster).

use futures_util::future::try_join_all;
use queue_core::{MAX_BATCH, QueueError, QueueName, ReclaimOutcome, Result, validate_limit};

use crate::rows::integer;
use crate::{RedisStorage, scripts};

impl RedisStorage {
    pub(crate) async fn reclaim_stalled_scripted(&self, limit: u32) -> Result<ReclaimOutcome> {
        validate_limit("limit", limit, MAX_BATCH)?;
        let queues = self.all_queues().await?;
        let now = self.now_arg();
        let counts = self
            .oldest_first(
                &queues,
                &scripts::RECLAIM_STALLED_PEEK,
                &[now.clone(), limit.to_string()],
                limit,
            )
            .await?;
        let shares: Vec<(String, u32)> = queues
            .iter()
            .zip(counts)
            .filter(|(_, n)| *n > 0)
            .map(|(queue, n)| (self.keys.queue(queue.as_str()), n))
            .collect();
        // One script for every queue on standalone Redis (the dependants of
        // the jobs it dead-letters learn of it in ascending id order), one
        // per queue on a cluster.
        let calls: Vec<&[(String, u32)]> = if self.is_cluster() {
            shares.chunks(1).collect()
        } else {
            vec![&shares[..]]
        };
        let calls = calls
            .into_iter()
            .filter(|share| !share.is_empty())
            .map(|share| {
                let keys: Vec<String> = share.iter().map(|(key, _)| key.clone()).collect();
                let mut args = vec![now.clone()];
                args.extend(share.iter().map(|(_, n)| n.to_string()));
                async move {
                    self.invoke_keys::<Vec<u64>>(&scripts::RECLAIM_STALLED, &keys, &args)
                        .await
                }
            });
        let mut outcome = ReclaimOutcome::default();
        for answer in try_join_all(calls).await? {
            let [requeued, dead] = answer.as_slice() else {
                return Err(QueueError::backend("the reclaim script answered badly"));
            };
            outcome.requeued += requeued;
            outcome.dead_lettered += dead;
        }
        Ok(outcome)
    }

    /// How many of each queue's entries to take so that the `limit` oldest
    /// over all queues are taken: `peek` answers `{id, score, ...}` oldest
    /// first for one queue; ties of score go to the lower id. With one
    /// queue nothing is peeked.
    pub(crate) async fn oldest_first(
        &self,
        queues: &[QueueName],
        peek: &redis::Script,
        args: &[String],
        limit: u32,
    ) -> Result<Vec<u32>> {
        if queues.len() <= 1 {
            return Ok(vec![limit; queues.len()]);
        }
        let peeks = queues.iter().map(|queue| async move {
            self.invoke::<Vec<String>>(peek, &self.keys.queue(queue.as_str()), args)
                .await
        });
        let mut entries: Vec<(f64, i64, usize)> = Vec::new();
        for (slot, answer) in try_join_all(peeks).await?.into_iter().enumerate() {
            for pair in answer.chunks_exact(2) {
                let score = pair[1].parse::<f64>().map_err(|_| {
                    QueueError::backend(format!("score {:?} is not a number", pair[1]))
                })?;
                entries.push((score, integer("id", &pair[0])?, slot));
            }
        }
        entries.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        entries.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        let mut counts = vec![0_u32; queues.len()];
        for (_, _, slot) in entries {
            counts[slot] += 1;
        }
        Ok(counts)
    }
}
