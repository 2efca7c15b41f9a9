//! Flow control: `configure_queue` and `queue_configs`, the groups'
//! own limits (`set_group_limit`, `group_limits`, in `P:group_limits`;
//! the claim keeps each group within its slots: `group_slots` and
//! `pick_ready` in `scripts/common.lua`), and their own weights in fair
//! queues (`set_group_weight`, `group_weights`, in `P:group_weights`;
//! the fair pick reads them: `pick_fair` in `scripts/fair.lua`). The
//! limits live in the queue's `P:config` hash, beside its `P:paused`
//! flag; the claim enforces them inside the dequeue script itself
//! (`allowance` and `take_tokens` in `scripts/common.lua`: the queue's
//! held leases are its `P:leased` set, the bucket two fields of the
//! hash), so a claim and the limits it obeys are one atomic step on the
//! queue's slot. A queue
//! without limits costs that script one `HMGET` of a missing key.

use std::time::Duration;

use futures_util::future::try_join_all;
use queue_core::backend::{corrupt, stored, unconfigured_queue};
use queue_core::{
    Backoff, GroupKey, GroupLimit, GroupWeight, QueueConfig, QueueError, QueueLimits, QueueName,
    RateLimit, Result,
};
use redis::Script;

use crate::rows::integer;
use crate::{RedisStorage, scripts};

impl RedisStorage {
    pub(crate) async fn configure_queue_scripted(
        &self,
        queue: &QueueName,
        limits: &QueueLimits,
    ) -> Result<()> {
        limits.validate()?;
        // A configured queue is listed by queue_configs even without jobs.
        self.register(&[queue], 0).await?;
        let millis = |d: Duration| d.as_millis().to_string();
        let text = |value: Option<String>| value.unwrap_or_default();
        let backoff = limits.backoff.as_ref();
        let args = [
            self.now_arg(),
            self.keys.channel(),
            queue.as_str().to_owned(),
            text(limits.concurrency.map(|c| c.to_string())),
            text(limits.rate.map(|r| r.per_second.to_string())),
            text(limits.rate.map(|r| r.burst.to_string())),
            text(limits.lease.map(millis)),
            text(backoff.map(|b| millis(b.base()))),
            text(backoff.map(|b| millis(b.min()))),
            text(backoff.map(|b| millis(b.max()))),
            text(backoff.map(|b| b.jitter().to_string())),
            text(limits.group_concurrency.map(|c| c.to_string())),
            text(limits.priority_aging.map(millis)),
            if limits.fair_groups { "1" } else { "" }.to_owned(),
        ];
        let _: i64 = self
            .invoke(
                &scripts::CONFIGURE_QUEUE,
                &self.keys.queue(queue.as_str()),
                &args,
            )
            .await?;
        Ok(())
    }

    pub(crate) async fn queue_configs_scripted(&self) -> Result<Vec<QueueConfig>> {
        let queues = self.all_queues().await?;
        let calls = queues.iter().map(|queue| async move {
            self.invoke::<Vec<String>>(
                &scripts::QUEUE_CONFIGS,
                &self.keys.queue(queue.as_str()),
                &[],
            )
            .await
        });
        let answers = try_join_all(calls).await?;
        let mut configs = Vec::new();
        for (queue, answer) in queues.into_iter().zip(answers) {
            let (paused, fields) = answer
                .split_first()
                .ok_or_else(|| QueueError::backend("the queue_config script answered nothing"))?;
            let paused = paused == "1";
            // A hash holding only `configured` (limits all lifted) is no
            // setting to list.
            if !paused && fields.chunks_exact(2).all(|pair| pair[0] == CONFIGURED) {
                continue;
            }
            configs.push(QueueConfig {
                queue,
                paused,
                limits: limits(fields)?,
            });
        }
        Ok(configs)
    }
}

/// The field `configure_queue.lua` keeps in every `P:config` hash it
/// writes, whatever limits are set.
const CONFIGURED: &str = "configured";

impl RedisStorage {
    pub(crate) async fn set_group_limit_scripted(
        &self,
        queue: &QueueName,
        group: &GroupKey,
        limit: Option<u32>,
    ) -> Result<()> {
        if let Some(limit) = limit {
            GroupLimit::validate_limit(limit)?;
        }
        let args = [
            self.now_arg(),
            self.keys.channel(),
            queue.as_str().to_owned(),
            group.as_str().to_owned(),
            limit.map(|l| l.to_string()).unwrap_or_default(),
        ];
        let set: i64 = self
            .invoke(
                &scripts::SET_GROUP_LIMIT,
                &self.keys.queue(queue.as_str()),
                &args,
            )
            .await?;
        if set == 0 {
            return Err(unconfigured_queue(queue));
        }
        Ok(())
    }

    pub(crate) async fn group_limits_scripted(&self) -> Result<Vec<GroupLimit>> {
        let rows = self.group_settings(&scripts::GROUP_LIMITS, "limit").await?;
        let mut all: Vec<GroupLimit> = (rows.into_iter())
            .map(|(queue, group, limit)| GroupLimit {
                queue,
                group,
                limit,
            })
            .collect();
        all.sort();
        Ok(all)
    }

    /// Stores one group's own weight in `P:group_weights` (read by the
    /// fair pick, `pick_fair` in `scripts/fair.lua`), or removes it.
    pub(crate) async fn set_group_weight_scripted(
        &self,
        queue: &QueueName,
        group: &GroupKey,
        weight: Option<u32>,
    ) -> Result<()> {
        if let Some(weight) = weight {
            GroupWeight::validate_weight(weight)?;
        }
        let args = [
            self.now_arg(),
            group.as_str().to_owned(),
            weight.map(|w| w.to_string()).unwrap_or_default(),
        ];
        let set: i64 = self
            .invoke(
                &scripts::SET_GROUP_WEIGHT,
                &self.keys.queue(queue.as_str()),
                &args,
            )
            .await?;
        if set == 0 {
            return Err(unconfigured_queue(queue));
        }
        Ok(())
    }

    pub(crate) async fn group_weights_scripted(&self) -> Result<Vec<GroupWeight>> {
        let rows = self
            .group_settings(&scripts::GROUP_WEIGHTS, "weight")
            .await?;
        let mut all: Vec<GroupWeight> = (rows.into_iter())
            .map(|(queue, group, weight)| GroupWeight {
                queue,
                group,
                weight,
            })
            .collect();
        all.sort();
        Ok(all)
    }

    /// Every group's own setting that `script` lists per queue (`{group
    /// key, value, ...}`, a hash of the queue's slot), read from every
    /// registered queue: its queue, group and value (named `name`).
    async fn group_settings(
        &self,
        script: &Script,
        name: &str,
    ) -> Result<Vec<(QueueName, GroupKey, u32)>> {
        let queues = self.all_queues().await?;
        let calls = queues.iter().map(|queue| async move {
            self.invoke::<Vec<String>>(script, &self.keys.queue(queue.as_str()), &[])
                .await
        });
        let answers = try_join_all(calls).await?;
        let mut all = Vec::new();
        for (queue, answer) in queues.into_iter().zip(answers) {
            for pair in answer.chunks_exact(2) {
                let value =
                    u32::try_from(integer(name, &pair[1])?).map_err(|_| corrupt(name, &pair[1]))?;
                all.push((
                    queue.clone(),
                    stored("group_key", pair[0].clone(), GroupKey::new)?,
                    value,
                ));
            }
        }
        Ok(all)
    }
}

/// The limits of a `P:config` hash, as `[field, value, ...]`.
fn limits(fields: &[String]) -> Result<QueueLimits> {
    let get = |name: &str| {
        fields
            .chunks_exact(2)
            .find(|pair| pair[0] == name)
            .map(|pair| pair[1].as_str())
    };
    let count = |name: &str| -> Result<Option<u32>> {
        get(name)
            .map(|raw| u32::try_from(integer(name, raw)?).map_err(|_| corrupt(name, raw)))
            .transpose()
    };
    let float = |name: &str| -> Result<Option<f64>> {
        get(name)
            .map(|raw| raw.parse::<f64>().map_err(|_| corrupt(name, raw)))
            .transpose()
    };
    let millis = |name: &str| -> Result<Option<Duration>> {
        get(name)
            .map(|raw| {
                u64::try_from(integer(name, raw)?)
                    .map(Duration::from_millis)
                    .map_err(|_| corrupt(name, raw))
            })
            .transpose()
    };
    let rate = match (float("rate")?, count("burst")?) {
        (Some(per_second), Some(burst)) => Some(RateLimit { per_second, burst }),
        (None, None) => None,
        (rate, _) => return Err(corrupt("rate", format!("{rate:?}"))),
    };
    let backoff = match (
        millis("backoff_base_ms")?,
        millis("backoff_min_ms")?,
        millis("backoff_max_ms")?,
        float("backoff_jitter")?,
    ) {
        (Some(base), Some(min), Some(max), Some(jitter)) => {
            Some(Backoff::new(base, min, max, jitter).map_err(|e| corrupt("backoff_base_ms", e))?)
        }
        (None, None, None, None) => None,
        (base, ..) => return Err(corrupt("backoff_base_ms", format!("{base:?}"))),
    };
    Ok(QueueLimits {
        concurrency: count("concurrency")?,
        rate,
        lease: millis("lease_ms")?,
        backoff,
        group_concurrency: count("group_concurrency")?,
        fair_groups: get("fair_groups").is_some(),
        priority_aging: millis("priority_aging_ms")?,
    })
}
