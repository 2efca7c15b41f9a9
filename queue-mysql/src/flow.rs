//! Flow control: `configure_queue` and `queue_configs` on `queue_config`,
//! and the limited claim path.
//!
//! A claim naming no limited queue (as `LimitedQueues` remembers them,
//! read at most once a second) is the plain claim of `dequeue.rs`. One
//! naming a limited queue adds, in the same transaction: a lock on the
//! limited queues' config rows in name order that also counts their held
//! leases (`sql::limits_lock`: at READ COMMITTED its count reads every
//! claim committed before the first lock was granted; when the request
//! names several queues a later statement counts again, `sql::held`), the
//! request narrowed to [`QueueLimits::allowance`], and the buckets of
//! rate-limited queues stored after the claim ([`Bucket::after`]).

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use chrono::NaiveDateTime;
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Datetime, Double, Integer, Nullable, Text};
use diesel_async::AsyncConnection;
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use queue_core::backend::{corrupt, stored, stored_count, stored_millis, unconfigured_queue};
use queue_core::{
    Backoff, Bucket, DequeueRequest, GroupKey, GroupLimit, GroupWeight, Job, QueueConfig,
    QueueLimits, QueueName, RateLimit, Result,
};

use crate::MySqlStorage;
use crate::bind::{Param, cached, naive, query};
use crate::dequeue::{Groups, Orders, TopLevels};
use crate::error::Failure;
use crate::fair::advance_turns;
use crate::group_slots::QueueSlots;
use crate::rows::utc;
use crate::sql::{self, BUCKET_STORE, CONFIGURE_QUEUE, LIMITED_QUEUES, QUEUE_CONFIGS};

#[derive(QueryableByName)]
struct NameRow {
    #[diesel(sql_type = Text)]
    queue_name: String,
}

/// A limited queue's config row, read under its lock.
#[derive(QueryableByName)]
struct LockedRow {
    #[diesel(sql_type = Text)]
    queue_name: String,
    #[diesel(sql_type = Nullable<Integer>)]
    concurrency_limit: Option<i32>,
    #[diesel(sql_type = Nullable<Double>)]
    rate_per_second: Option<f64>,
    #[diesel(sql_type = Nullable<Integer>)]
    rate_burst: Option<i32>,
    #[diesel(sql_type = Nullable<Double>)]
    tokens: Option<f64>,
    #[diesel(sql_type = Nullable<Datetime>)]
    refilled_at: Option<NaiveDateTime>,
    #[diesel(sql_type = Nullable<Integer>)]
    group_concurrency_limit: Option<i32>,
    #[diesel(sql_type = Nullable<BigInt>)]
    priority_aging_ms: Option<i64>,
    #[diesel(sql_type = BigInt)]
    fair_groups: i64,
    /// The jobs claims have taken from the queue while it was fair.
    #[diesel(sql_type = BigInt)]
    claim_count: i64,
    /// 1 when some group of the queue has a limit of its own.
    #[diesel(sql_type = BigInt)]
    overridden: i64,
    #[diesel(sql_type = Datetime)]
    now_ts: NaiveDateTime,
    #[diesel(sql_type = BigInt)]
    held: i64,
    #[diesel(sql_type = Nullable<Integer>)]
    top_priority: Option<i32>,
}

/// A group's own limit ([`sql::GROUP_OVERRIDES`], [`sql::GROUP_LIMITS`]).
#[derive(QueryableByName)]
pub(crate) struct GroupLimitRow {
    #[diesel(sql_type = Text)]
    pub(crate) queue_name: String,
    #[diesel(sql_type = Text)]
    pub(crate) group_key: String,
    #[diesel(sql_type = Integer)]
    pub(crate) concurrency_limit: i32,
}

#[derive(QueryableByName)]
struct GroupWeightRow {
    #[diesel(sql_type = Text)]
    queue_name: String,
    #[diesel(sql_type = Text)]
    group_key: String,
    #[diesel(sql_type = Integer)]
    weight: i32,
}

#[derive(QueryableByName)]
struct HeldRow {
    #[diesel(sql_type = Text)]
    queue_name: String,
    #[diesel(sql_type = BigInt)]
    held: i64,
}

#[derive(QueryableByName)]
struct ConfigRow {
    #[diesel(sql_type = Text)]
    queue_name: String,
    #[diesel(sql_type = BigInt)]
    paused: i64,
    #[diesel(sql_type = Nullable<Integer>)]
    concurrency_limit: Option<i32>,
    #[diesel(sql_type = Nullable<Double>)]
    rate_per_second: Option<f64>,
    #[diesel(sql_type = Nullable<Integer>)]
    rate_burst: Option<i32>,
    #[diesel(sql_type = Nullable<BigInt>)]
    lease_ms: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    backoff_base_ms: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    backoff_min_ms: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    backoff_max_ms: Option<i64>,
    #[diesel(sql_type = Nullable<Double>)]
    backoff_jitter: Option<f64>,
    #[diesel(sql_type = Nullable<Integer>)]
    group_concurrency_limit: Option<i32>,
    #[diesel(sql_type = Nullable<BigInt>)]
    priority_aging_ms: Option<i64>,
    #[diesel(sql_type = BigInt)]
    fair_groups: i64,
}

/// A limited queue as the claim sees it under the lock.
struct Locked {
    queue: QueueName,
    limits: QueueLimits,
    bucket: Option<Bucket>,
    /// Some group of the queue is limited.
    grouped: bool,
    /// Some group of the queue has a limit of its own.
    overridden: bool,
    /// The jobs claims have taken from it while it was fair.
    claim_count: i64,
}

impl MySqlStorage {
    /// Whether `request` must take the limited path: from the cache, or
    /// by reading the set of limited queues when the cache is stale.
    pub(crate) async fn claim_is_limited(&self, request: &DequeueRequest) -> Result<bool> {
        if let Some(limited) = self.limited.limits(request) {
            return Ok(limited);
        }
        let rows = self
            .retrying(true, || async {
                let mut conn = self.connection().await?;
                Ok(cached(LIMITED_QUEUES, Vec::new())
                    .load::<NameRow>(&mut conn)
                    .await?)
            })
            .await?;
        let limited = rows
            .into_iter()
            .map(|row| stored("queue_name", row.queue_name, QueueName::new))
            .collect::<Result<BTreeSet<_>>>()?;
        Ok(self.limited.store(limited, request))
    }

    /// The limited claim, inside the caller's transaction (see the module
    /// docs).
    pub(crate) async fn dequeue_limited_on(
        &self,
        conn: &mut AsyncMysqlConnection,
        request: &DequeueRequest,
    ) -> Result<Vec<Job>, Failure> {
        let names: Vec<String> = request
            .queues()
            .iter()
            .map(|q| q.as_str().to_owned())
            .collect();
        let mut params = vec![Param::OptTime(self.now_override())];
        params.extend(names.iter().map(|n| Param::Text(n.clone())));
        let rows = cached(sql::limits_lock(names.len()), params)
            .load::<LockedRow>(conn)
            .await?;
        let Some(mut now) = <[LockedRow]>::first(&rows).map(|row| row.now_ts) else {
            // The limits were removed since the cache was read.
            let mut groups = Groups::new();
            let (top, orders) = (TopLevels::new(), Orders::default());
            return self
                .dequeue_on(conn, request, &top, &mut groups, &orders)
                .await;
        };
        if rows.iter().any(|row| row.rate_per_second.is_some()) {
            // UTC_TIMESTAMP is the lock statement's start, before any wait
            // for the lock: a bucket refilled on it would count the wait as
            // time passed while the jobs' claims are stamped after it, and
            // more than rate + burst could start within one second.
            now = query(sql::NOW, vec![Param::OptTime(self.now_override())])
                .get_result::<crate::rows::NowRow>(conn)
                .await?
                .now_ts;
        }
        if self.server_traits(conn).await?.galera {
            let params = rows
                .iter()
                .map(|row| Param::Text(row.queue_name.clone()))
                .collect();
            cached(sql::claim_seq_bump(rows.len()), params)
                .execute(conn)
                .await?;
        }
        let mut held: HashMap<String, i64> = rows
            .iter()
            .map(|row| (row.queue_name.clone(), row.held))
            .collect();
        let top: TopLevels = rows
            .iter()
            .map(|row| (row.queue_name.clone(), row.top_priority))
            .collect();
        // The lock statement's read view opens at its first consistent
        // read: the count of the first locked row, unless the scan met a
        // config row of the request before it (a paused queue without
        // limits, whose WHERE runs a subquery), which opens it before the
        // lock is awaited. So with several queues named, the leases are
        // counted again: a claim over a paused queue and one limited to 2
        // took a third job while a racer's 2 committed during its wait.
        let several = names.len() > 1;
        let locked = rows
            .into_iter()
            .map(LockedRow::into_locked)
            .collect::<Result<Vec<_>, _>>()?;
        let counted: Vec<&str> = locked
            .iter()
            .filter(|l| l.limits.concurrency.is_some())
            .map(|l| l.queue.as_str())
            .collect();
        if several && !counted.is_empty() {
            let params = counted
                .iter()
                .map(|q| Param::Text((*q).to_owned()))
                .collect();
            held.clear();
            for row in cached(sql::held(counted.len()), params)
                .load::<HeldRow>(conn)
                .await?
            {
                held.insert(row.queue_name, row.held);
            }
        }
        let allowances: Vec<(QueueName, u32)> = locked
            .iter()
            .map(|l| {
                let held = held.get(l.queue.as_str()).copied().unwrap_or(0);
                let held = u64::try_from(held).unwrap_or(0);
                (
                    l.queue.clone(),
                    l.limits.allowance(held, l.bucket, utc(now)),
                )
            })
            .collect();
        let Some(narrowed) = request.narrowed(&allowances) else {
            return Ok(Vec::new());
        };
        let mut groups = Groups::new();
        for l in locked.iter().filter(|l| l.grouped) {
            let slots = QueueSlots::read(
                conn,
                &l.queue,
                l.limits.group_concurrency,
                l.overridden,
                l.limits.fair_groups,
            )
            .await?;
            groups.insert(l.queue.as_str().to_owned(), slots);
        }
        let periods = (locked.iter())
            .filter_map(|l| Some((l.queue.as_str().to_owned(), l.limits.priority_aging?)))
            .collect();
        let fair = (locked.iter())
            .filter(|l| l.limits.fair_groups)
            .map(|l| l.queue.as_str().to_owned())
            .collect();
        let orders = Orders::new(periods, fair, now);
        let jobs = self
            .dequeue_on(conn, &narrowed, &top, &mut groups, &orders)
            .await?;
        let taken = orders.fair_taken();
        for l in locked.iter().filter(|l| l.limits.fair_groups) {
            advance_turns(conn, &l.queue, l.claim_count, &jobs, &taken).await?;
        }
        for l in &locked {
            let Some(rate) = l.limits.rate else {
                continue;
            };
            let taken = jobs.iter().filter(|job| job.queue == l.queue).count();
            let taken = u32::try_from(taken).unwrap_or(u32::MAX);
            let after = Bucket::after(&rate, l.bucket, utc(now), taken);
            let params = vec![
                Param::OptDouble(Some(after.tokens)),
                Param::Time(naive(after.refilled_at)),
                Param::Text(l.queue.as_str().to_owned()),
            ];
            cached(BUCKET_STORE, params).execute(conn).await?;
        }
        Ok(jobs)
    }

    pub(crate) async fn configure_queue_pooled(
        &self,
        queue: &QueueName,
        limits: &QueueLimits,
    ) -> Result<()> {
        limits.validate()?;
        let now = self.now_override();
        let backoff = limits.backoff;
        let int = |v: Option<u32>| Param::OptInt(v.map(i64::from));
        let ms = |v: Option<Duration>| Param::OptInt(v.map(millis));
        self.retrying(true, || async {
            let mut conn = self.connection().await?;
            let now = match now {
                Some(now) => now,
                None => self.resolve_now(&mut conn).await?,
            };
            let params = vec![
                Param::Text(queue.as_str().to_owned()),
                Param::Time(now),
                int(limits.concurrency),
                Param::OptDouble(limits.rate.map(|r| r.per_second)),
                int(limits.rate.map(|r| r.burst)),
                Param::OptDouble(limits.rate.map(|r| f64::from(r.burst))),
                Param::OptTime(limits.rate.map(|_| now)),
                ms(limits.lease),
                ms(backoff.map(|b| b.base())),
                ms(backoff.map(|b| b.min())),
                ms(backoff.map(|b| b.max())),
                Param::OptDouble(backoff.map(|b| b.jitter())),
                int(limits.group_concurrency),
                ms(limits.priority_aging),
                Param::Int(i64::from(limits.fair_groups)),
            ];
            query(CONFIGURE_QUEUE, params).execute(&mut conn).await?;
            Ok(())
        })
        .await?;
        self.limited.invalidate();
        Ok(())
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
        let set = limit.map(|limit| (sql::SET_GROUP_LIMIT, limit));
        self.set_group_setting(queue, group, set, sql::DELETE_GROUP_LIMIT)
            .await
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
        let set = weight.map(|weight| (sql::SET_GROUP_WEIGHT, weight));
        self.set_group_setting(queue, group, set, sql::DELETE_GROUP_WEIGHT)
            .await
    }

    /// Writes one group's own setting of a configured queue under its
    /// config row's lock: `set` (the statement, binding queue, group and
    /// the value), or `delete`'s removal.
    async fn set_group_setting(
        &self,
        queue: &QueueName,
        group: &GroupKey,
        set: Option<(&'static str, u32)>,
        delete: &'static str,
    ) -> Result<()> {
        let configured = self
            .retrying(true, || async {
                let mut conn = self.connection().await?;
                conn.transaction(async |conn| {
                    let known = cached(
                        sql::QUEUE_CONFIGURED,
                        vec![Param::Text(queue.as_str().to_owned())],
                    )
                    .load::<NameRow>(conn)
                    .await?;
                    if known.is_empty() {
                        return Ok::<_, Failure>(false);
                    }
                    let name = Param::Text(queue.as_str().to_owned());
                    let key = Param::Text(group.as_str().to_owned());
                    let statement = match set {
                        Some((statement, value)) => {
                            cached(statement, vec![name, key, Param::Int(i64::from(value))])
                        }
                        None => cached(delete, vec![name, key]),
                    };
                    statement.execute(conn).await?;
                    Ok(true)
                })
                .await
            })
            .await?;
        if !configured {
            return Err(unconfigured_queue(queue));
        }
        self.limited.invalidate();
        Ok(())
    }

    pub(crate) async fn group_limits_pooled(&self) -> Result<Vec<GroupLimit>> {
        let rows = self
            .retrying(true, || async {
                let mut conn = self.connection().await?;
                Ok(cached(sql::GROUP_LIMITS, Vec::new())
                    .load::<GroupLimitRow>(&mut conn)
                    .await?)
            })
            .await?;
        rows.into_iter()
            .map(|row| {
                Ok(GroupLimit {
                    queue: stored("queue_name", row.queue_name, QueueName::new)?,
                    group: stored("group_key", row.group_key, GroupKey::new)?,
                    limit: stored_count("concurrency_limit", row.concurrency_limit)?,
                })
            })
            .collect()
    }

    pub(crate) async fn group_weights_pooled(&self) -> Result<Vec<GroupWeight>> {
        let rows = self
            .retrying(true, || async {
                let mut conn = self.connection().await?;
                Ok(cached(sql::GROUP_WEIGHTS, Vec::new())
                    .load::<GroupWeightRow>(&mut conn)
                    .await?)
            })
            .await?;
        rows.into_iter()
            .map(|row| {
                Ok(GroupWeight {
                    queue: stored("queue_name", row.queue_name, QueueName::new)?,
                    group: stored("group_key", row.group_key, GroupKey::new)?,
                    weight: stored_count("weight", row.weight)?,
                })
            })
            .collect()
    }

    pub(crate) async fn queue_configs_pooled(&self) -> Result<Vec<QueueConfig>> {
        let rows = self
            .retrying(true, || async {
                let mut conn = self.connection().await?;
                Ok(query(QUEUE_CONFIGS, Vec::new())
                    .load::<ConfigRow>(&mut conn)
                    .await?)
            })
            .await?;
        let mut configs = rows
            .into_iter()
            .map(ConfigRow::into_config)
            .collect::<Result<Vec<_>>>()?;
        configs.sort_by(|a, b| a.queue.cmp(&b.queue));
        Ok(configs)
    }
}

/// A duration as the milliseconds stored for it.
fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// A nullable limit column, which the schema keeps positive.
fn positive(column: &str, value: Option<i32>) -> Result<Option<u32>> {
    value.map(|v| stored_count(column, v)).transpose()
}

/// A nullable millisecond column.
fn read_millis(column: &str, value: Option<i64>) -> Result<Option<Duration>> {
    value.map(|v| stored_millis(column, v)).transpose()
}

/// The claim limits of a config row.
fn claim_limits(
    concurrency: Option<i32>,
    per_second: Option<f64>,
    burst: Option<i32>,
) -> Result<QueueLimits> {
    let rate = match (per_second, positive("rate_burst", burst)?) {
        (Some(per_second), Some(burst)) => Some(RateLimit { per_second, burst }),
        (None, None) => None,
        _ => return Err(corrupt("rate_burst", "set without rate_per_second")),
    };
    Ok(QueueLimits {
        concurrency: positive("concurrency_limit", concurrency)?,
        rate,
        ..QueueLimits::default()
    })
}

impl LockedRow {
    fn into_locked(self) -> Result<Locked, Failure> {
        let read = || -> Result<Locked> {
            Ok(Locked {
                queue: stored("queue_name", self.queue_name, QueueName::new)?,
                limits: QueueLimits {
                    group_concurrency: positive(
                        "group_concurrency_limit",
                        self.group_concurrency_limit,
                    )?,
                    fair_groups: self.fair_groups != 0,
                    priority_aging: read_millis("priority_aging_ms", self.priority_aging_ms)?,
                    ..claim_limits(
                        self.concurrency_limit,
                        self.rate_per_second,
                        self.rate_burst,
                    )?
                },
                // Some group is limited: the queue's group concurrency,
                // or a group's own limit.
                grouped: self.group_concurrency_limit.is_some() || self.overridden != 0,
                overridden: self.overridden != 0,
                claim_count: self.claim_count,
                bucket: self
                    .tokens
                    .zip(self.refilled_at)
                    .map(|(tokens, refilled_at)| Bucket {
                        tokens,
                        refilled_at: utc(refilled_at),
                    }),
            })
        };
        read().map_err(|_| {
            Failure::Invariant("a queue_config row holds limits the queue never writes")
        })
    }
}

impl ConfigRow {
    fn into_config(self) -> Result<QueueConfig> {
        let base = read_millis("backoff_base_ms", self.backoff_base_ms)?;
        let min = read_millis("backoff_min_ms", self.backoff_min_ms)?;
        let max = read_millis("backoff_max_ms", self.backoff_max_ms)?;
        let backoff = match (base, min, max, self.backoff_jitter) {
            (Some(base), Some(min), Some(max), Some(jitter)) => Some(
                Backoff::new(base, min, max, jitter)
                    .map_err(|e| corrupt("backoff_base_ms", e.to_string()))?,
            ),
            (None, None, None, None) => None,
            _ => return Err(corrupt("backoff_base_ms", "backoff columns partly set")),
        };
        Ok(QueueConfig {
            queue: stored("queue_name", self.queue_name, QueueName::new)?,
            paused: self.paused != 0,
            limits: QueueLimits {
                lease: read_millis("lease_ms", self.lease_ms)?,
                backoff,
                group_concurrency: positive(
                    "group_concurrency_limit",
                    self.group_concurrency_limit,
                )?,
                fair_groups: self.fair_groups != 0,
                priority_aging: read_millis("priority_aging_ms", self.priority_aging_ms)?,
                ..claim_limits(
                    self.concurrency_limit,
                    self.rate_per_second,
                    self.rate_burst,
                )?
            },
        })
    }
}
