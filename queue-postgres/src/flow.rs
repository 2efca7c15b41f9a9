//! Flow control: `configure_queue` and `queue_configs` on `queue_config`,
//! and the limited claim.
//!
//! A claim naming no limited queue (as `LimitedQueues` remembers them,
//! read at most once a second) is the plain one-statement claim of
//! `dequeue.rs`. One naming a limited queue is one statement too, the
//! plain claim with `sql.rs`'s `LOCKED` and `LIMITS_ONE` or `LIMITS_MANY` before it and
//! `CHARGE` after: it locks the limited queues' config rows in name order,
//! counts their held leases up to the limit (in `queue_held_leases`, whose
//! query sees the claims that committed while the lock was awaited),
//! narrows each queue's cap to [`QueueLimits::allowance`] (the same rule
//! in SQL), claims, and stores the buckets of rate-limited queues
//! ([`queue_core::Bucket::after`]). One round trip where it took five
//! (begin, lock, count, claim, commit): the dispatcher waits for each
//! claim, so their latency was the drain's.
//!
//! A claim of one queue whose only limits are its groups' (remembered as
//! the limited set is, [`ClaimPath::Grouped`]) takes a leaner statement:
//! the config row locked, `queue_pick_grouped` (migration 0024), the
//! lease; none of the caps, buckets, turns and merge it does not need. It
//! checks under the lock that the queue is still groups only; when it is
//! not, it claims nothing and says so, and the limited claim runs instead.

use std::collections::BTreeSet;
use std::time::Duration;

use queue_core::backend::{corrupt, stored, stored_count, stored_millis, unconfigured_queue};
use queue_core::{
    Backoff, DequeueRequest, GroupKey, GroupLimit, GroupWeight, QueueConfig, QueueLimits,
    QueueName, RateLimit, Result,
};
use sqlx::Row;
use sqlx::postgres::PgRow;

use crate::error::retrying;
use crate::{PgStorage, interpret_error};

/// Which claim statement a request takes (`PgStorage::dequeue_statement`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClaimPath {
    /// No queue of the request has limits: the plain claim.
    Plain,
    /// Some queue has limits: the limited claim (`LOCKED` … `CHARGE`),
    /// right for any queue whatever its config.
    Limited,
    /// One queue, whose only limits are its groups': the grouped claim
    /// (`DEQUEUE_GROUPED_ONE_QUEUE`), which falls back to the limited one
    /// when the config it was chosen for has changed.
    Grouped,
}

impl ClaimPath {
    /// The path of `request`, given whether it names a limited queue and
    /// whether it names a groups-only one.
    fn of(request: &DequeueRequest, limited: bool, groups_only: bool) -> Self {
        match (limited, groups_only && request.queues().len() == 1) {
            (false, _) => Self::Plain,
            (true, true) => Self::Grouped,
            (true, false) => Self::Limited,
        }
    }
}

impl PgStorage {
    /// The statement `request` takes: from the caches, or by reading the
    /// set of limited queues (and which of them are groups only) when
    /// either is stale.
    pub(crate) async fn claim_path(&self, request: &DequeueRequest) -> Result<ClaimPath> {
        if let (Some(limited), Some(groups_only)) = (
            self.limited.limits(request),
            self.groups_only.limits(request),
        ) {
            return Ok(ClaimPath::of(request, limited, groups_only));
        }
        let rows = retrying(true, || {
            self.db()
                .fetch_all(sqlx::query(self.sql.limited_queues.clone()))
        })
        .await?;
        let mut limited = BTreeSet::new();
        let mut groups_only = BTreeSet::new();
        for row in &rows {
            let name: String = row.try_get("queue_name").map_err(interpret_error)?;
            let name = stored("queue_name", name, QueueName::new)?;
            if row
                .try_get::<bool, _>("groups_only")
                .map_err(interpret_error)?
            {
                groups_only.insert(name.clone());
            }
            limited.insert(name);
        }
        let limited = self.limited.store(limited, request);
        let groups_only = self.groups_only.store(groups_only, request);
        Ok(ClaimPath::of(request, limited, groups_only))
    }

    /// Forgets which queues are limited and how: the next claim reads them
    /// again (a config written through this handle binds its next claim).
    pub(crate) fn forget_limited_queues(&self) {
        self.limited.invalidate();
        self.groups_only.invalidate();
    }

    pub(crate) async fn configure_queue_pooled(
        &self,
        queue: &QueueName,
        limits: &QueueLimits,
    ) -> Result<()> {
        limits.validate()?;
        if limits.fair_groups {
            self.ensure_fair_index().await?;
        }
        let backoff = limits.backoff;
        retrying(true, || {
            self.db().execute(
                sqlx::query(self.sql.configure_queue.clone())
                    .bind(self.now_override())
                    .bind(queue.as_str())
                    .bind(limits.concurrency.map(limit_int))
                    .bind(limits.rate.map(|r| r.per_second))
                    .bind(limits.rate.map(|r| limit_int(r.burst)))
                    .bind(limits.lease.map(millis))
                    .bind(backoff.map(|b| millis(b.base())))
                    .bind(backoff.map(|b| millis(b.min())))
                    .bind(backoff.map(|b| millis(b.max())))
                    .bind(backoff.map(|b| b.jitter()))
                    .bind(limits.group_concurrency.map(limit_int))
                    .bind(limits.priority_aging.map(millis))
                    .bind(limits.fair_groups),
            )
        })
        .await?;
        self.forget_limited_queues();
        Ok(())
    }

    /// Builds `job_queue_fair` if the schema has no valid one (migration
    /// 0020): in a transaction of its own, one build at a time per schema,
    /// waiting at most 5 s for `job_queue`'s lock. The build blocks writes
    /// to `job_queue` while it reads the table (docs/operations.md, "Fair
    /// groups on PostgreSQL": build it beforehand on a large table).
    async fn ensure_fair_index(&self) -> Result<()> {
        let exists = |row: PgRow| row.try_get::<bool, _>(0);
        let present = retrying(true, || {
            self.db()
                .fetch_one(sqlx::query(self.sql.fair_index_exists.clone()))
        })
        .await
        .map(exists)?
        .map_err(interpret_error)?;
        if present {
            return Ok(());
        }
        retrying(true, || async {
            let mut tx = self.pool.begin().await?;
            self.on(&mut tx)
                .execute(sqlx::query(self.sql.fair_index_lock.clone()))
                .await?;
            let row = self
                .on(&mut tx)
                .fetch_one(sqlx::query(self.sql.fair_index_exists.clone()))
                .await?;
            if !exists(row)? {
                self.on(&mut tx)
                    .execute(sqlx::query(self.sql.fair_index_drop.clone()))
                    .await?;
                self.on(&mut tx)
                    .execute(sqlx::query(self.sql.fair_index_create.clone()))
                    .await?;
            }
            tx.commit().await?;
            Ok::<_, crate::error::Failure>(())
        })
        .await
    }

    pub(crate) async fn set_group_limit_pooled(
        &self,
        queue: &QueueName,
        group: &GroupKey,
        limit: Option<u32>,
    ) -> Result<()> {
        if let Some(limit) = limit {
            GroupLimit::validate_limit(limit)?;
        }
        let row = retrying(true, || {
            self.db().fetch_one(
                sqlx::query(self.sql.set_group_limit.clone())
                    .bind(queue.as_str())
                    .bind(group.as_str())
                    .bind(limit.map(limit_int)),
            )
        })
        .await?;
        if !get::<bool>(&row, "configured")? {
            return Err(unconfigured_queue(queue));
        }
        self.forget_limited_queues();
        Ok(())
    }

    pub(crate) async fn group_limits_pooled(&self) -> Result<Vec<GroupLimit>> {
        let rows = retrying(true, || {
            self.db()
                .fetch_all(sqlx::query(self.sql.group_limits.clone()))
        })
        .await?;
        rows.iter()
            .map(|row| {
                Ok(GroupLimit {
                    queue: stored("queue_name", get(row, "queue_name")?, QueueName::new)?,
                    group: stored("group_key", get(row, "group_key")?, GroupKey::new)?,
                    limit: stored_count(
                        "concurrency_limit",
                        get::<i32>(row, "concurrency_limit")?,
                    )?,
                })
            })
            .collect()
    }

    pub(crate) async fn set_group_weight_pooled(
        &self,
        queue: &QueueName,
        group: &GroupKey,
        weight: Option<u32>,
    ) -> Result<()> {
        if let Some(weight) = weight {
            GroupWeight::validate_weight(weight)?;
        }
        let row = retrying(true, || {
            self.db().fetch_one(
                sqlx::query(self.sql.set_group_weight.clone())
                    .bind(queue.as_str())
                    .bind(group.as_str())
                    .bind(weight.map(limit_int)),
            )
        })
        .await?;
        if !get::<bool>(&row, "configured")? {
            return Err(unconfigured_queue(queue));
        }
        Ok(())
    }

    pub(crate) async fn group_weights_pooled(&self) -> Result<Vec<GroupWeight>> {
        let rows = retrying(true, || {
            self.db()
                .fetch_all(sqlx::query(self.sql.group_weights.clone()))
        })
        .await?;
        rows.iter()
            .map(|row| {
                Ok(GroupWeight {
                    queue: stored("queue_name", get(row, "queue_name")?, QueueName::new)?,
                    group: stored("group_key", get(row, "group_key")?, GroupKey::new)?,
                    weight: stored_count("weight", get::<i32>(row, "weight")?)?,
                })
            })
            .collect()
    }

    pub(crate) async fn queue_configs_pooled(&self) -> Result<Vec<QueueConfig>> {
        let rows = retrying(true, || {
            self.db()
                .fetch_all(sqlx::query(self.sql.queue_configs.clone()))
        })
        .await?;
        let mut configs = rows.iter().map(queue_config).collect::<Result<Vec<_>>>()?;
        configs.sort_by(|a, b| a.queue.cmp(&b.queue));
        Ok(configs)
    }
}

/// A limit validated by `QueueLimits::validate` (at most a million) as
/// the INTEGER column holding it.
fn limit_int(limit: u32) -> i32 {
    i32::try_from(limit).unwrap_or(i32::MAX)
}

/// A duration as the milliseconds stored for it.
fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

fn get<'r, T>(row: &'r PgRow, column: &str) -> Result<T>
where
    T: sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    row.try_get(column).map_err(interpret_error)
}

/// A nullable limit column, which the schema keeps positive.
fn positive(column: &str, value: Option<i32>) -> Result<Option<u32>> {
    value.map(|v| stored_count(column, v)).transpose()
}

/// A nullable millisecond column.
fn read_millis(column: &str, value: Option<i64>) -> Result<Option<Duration>> {
    value.map(|v| stored_millis(column, v)).transpose()
}

/// The claim limits of a config row (`LIMITS_LOCK`, `QUEUE_CONFIGS`).
fn claim_limits(row: &PgRow) -> Result<QueueLimits> {
    let per_second: Option<f64> = get(row, "rate_per_second")?;
    let burst = positive("rate_burst", get(row, "rate_burst")?)?;
    let rate = match (per_second, burst) {
        (Some(per_second), Some(burst)) => Some(RateLimit { per_second, burst }),
        (None, None) => None,
        _ => return Err(corrupt("rate_burst", "set without rate_per_second")),
    };
    Ok(QueueLimits {
        concurrency: positive("concurrency_limit", get(row, "concurrency_limit")?)?,
        rate,
        group_concurrency: positive(
            "group_concurrency_limit",
            get(row, "group_concurrency_limit")?,
        )?,
        fair_groups: get(row, "fair_groups")?,
        priority_aging: read_millis("priority_aging_ms", get(row, "priority_aging_ms")?)?,
        ..QueueLimits::default()
    })
}

fn queue_config(row: &PgRow) -> Result<QueueConfig> {
    let base = read_millis("backoff_base_ms", get(row, "backoff_base_ms")?)?;
    let min = read_millis("backoff_min_ms", get(row, "backoff_min_ms")?)?;
    let max = read_millis("backoff_max_ms", get(row, "backoff_max_ms")?)?;
    let jitter: Option<f64> = get(row, "backoff_jitter")?;
    let backoff = match (base, min, max, jitter) {
        (Some(base), Some(min), Some(max), Some(jitter)) => Some(
            Backoff::new(base, min, max, jitter)
                .map_err(|e| corrupt("backoff_base_ms", e.to_string()))?,
        ),
        (None, None, None, None) => None,
        _ => return Err(corrupt("backoff_base_ms", "backoff columns partly set")),
    };
    Ok(QueueConfig {
        queue: stored("queue_name", get(row, "queue_name")?, QueueName::new)?,
        paused: get(row, "paused")?,
        limits: QueueLimits {
            lease: read_millis("lease_ms", get(row, "lease_ms")?)?,
            backoff,
            ..claim_limits(row)?
        },
    })
}
