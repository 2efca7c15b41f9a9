//! Flow control: `configure_queue`, `queue_configs`, and the limited claim
//! path (a claim naming a queue whose config row limits claims).
//!
//! The limited claim runs in one `BEGIN IMMEDIATE` transaction, SQLite's
//! one writer at a time, so nothing else claims, acks or refills between
//! its reads and its writes: it reads the limits and buckets of the
//! request's limited queues, counts each one's held leases, asks
//! [`QueueLimits::allowance`], claims the [`DequeueRequest::narrowed`]
//! request and stores each rate-limited queue's [`Bucket::after`].
//! Claims naming no limited queue keep the plain path; which queues are
//! limited is remembered for a second
//! ([`queue_core::backend::LimitedQueues`]).
//!
//! Group concurrency rides the same path: a queue with a group
//! concurrency or a group's own limit is limited. For such a queue the
//! claim counts each group's held leases (the `job_queue_group_leased`
//! index), then walks its claimable jobs in claim order a page at a time,
//! leaving out the groups already full, and keeps the jobs
//! [`GroupSlots::take`] accepts; a job of a group that fills up on the way
//! is skipped and the walk goes on, so a full group never stalls the
//! queue. Counting leased rows rather than keeping a counter means every
//! way a lease ends gives its slot back by itself.
//!
//! A claim of one queue whose only limits are its groups' first tries
//! one statement ([`sql::GROUP_CLAIM_QUEUE`]: the same count and the same
//! order over a short page of the queue's top level, in SQLite's
//! autocommit); the transaction above takes only what it left (a head of
//! full groups, the levels below). The transaction costs seven round trips
//! to the connection's thread where the statement costs one, and a drain
//! of many small claims pays that on each.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use queue_core::backend::{
    GroupSlots, LimitedQueues, aged_claim_order, claim_order, corrupt, merge_by_next, stored,
    stored_count, stored_instant, stored_millis, unconfigured_queue,
};
use queue_core::{
    Backoff, Bucket, DequeueRequest, GroupKey, GroupLimit, GroupWeight, QueueConfig, QueueError,
    QueueLimits, QueueName, RateLimit, Result,
};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};

use crate::dequeue::{Candidate, candidate_of, claim_any, claim_candidates, pick_queue};
use crate::fair::{advance_turns, fair_candidates};
use crate::{SqliteStorage, interpret_error, sql};

impl SqliteStorage {
    /// Whether `request` names a queue with claim limits, from the set read
    /// at most `LimitedQueues::TTL` ago (read again when older).
    pub(crate) async fn names_limited_queue(&self, request: &DequeueRequest) -> Result<bool> {
        self.names_queue_of(&self.limited, sql::LIMITED_QUEUES, request)
            .await
    }

    /// Whether `request` names a queue whose only claim limits are its
    /// groups', read as [`SqliteStorage::names_limited_queue`] reads its set.
    /// A stale answer costs time, never correctness:
    /// [`sql::GROUP_CLAIM_QUEUE`] checks the queue's config itself.
    pub(crate) async fn names_groups_only_queue(&self, request: &DequeueRequest) -> Result<bool> {
        self.names_queue_of(&self.groups_only, sql::GROUPS_ONLY_QUEUES, request)
            .await
    }

    /// Whether `request` names a queue of the set `statement` lists, as
    /// `cache` remembers it (read again when older than its TTL).
    async fn names_queue_of(
        &self,
        cache: &LimitedQueues,
        statement: &'static str,
        request: &DequeueRequest,
    ) -> Result<bool> {
        if let Some(answer) = cache.limits(request) {
            return Ok(answer);
        }
        let names: Vec<String> = sqlx::query_scalar(statement)
            .fetch_all(&self.pool)
            .await
            .map_err(interpret_error)?;
        // A stored name the type refuses cannot be named by a request.
        let named: BTreeSet<QueueName> = names
            .into_iter()
            .filter_map(|name| QueueName::new(name).ok())
            .collect();
        Ok(cache.store(named, request))
    }

    /// Forgets which queues are limited and how: a config written through
    /// this storage binds its next claim.
    fn forget_limited_queues(&self) {
        self.limited.invalidate();
        self.groups_only.invalidate();
    }

    /// The limited claim path: see the module docs.
    pub(crate) async fn dequeue_limited(&self, request: &DequeueRequest) -> Result<LimitedClaim> {
        write_tx!(self, |conn, now| claim_limited(conn, now, request))
    }

    pub(crate) async fn configure_queue_pooled(
        &self,
        queue: &QueueName,
        limits: &QueueLimits,
    ) -> Result<()> {
        limits.validate()?;
        let millis = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let backoff = limits.backoff.as_ref();
        write_tx!(self, |conn, now| async {
            sqlx::query(sql::CONFIGURE_QUEUE)
                .bind(now)
                .bind(queue.as_str())
                .bind(limits.concurrency.map(i64::from))
                .bind(limits.rate.map(|r| r.per_second))
                .bind(limits.rate.map(|r| i64::from(r.burst)))
                .bind(limits.lease.map(millis))
                .bind(backoff.map(|b| millis(b.base())))
                .bind(backoff.map(|b| millis(b.min())))
                .bind(backoff.map(|b| millis(b.max())))
                .bind(backoff.map(Backoff::jitter))
                .bind(limits.rate.map(|r| f64::from(r.burst)))
                .bind(limits.group_concurrency.map(i64::from))
                .bind(limits.priority_aging.map(millis))
                .bind(limits.fair_groups)
                .execute(&mut *conn)
                .await?;
            Ok::<_, sqlx::Error>(())
        })?;
        self.forget_limited_queues();
        // Lifted or raised limits may make jobs claimable.
        self.signal(queue);
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

    /// Writes one group's own setting of a configured queue: `set` (the
    /// statement and its value: queue ?1, group ?2, value ?3, which writes
    /// nothing without a config row), or `delete`'s removal.
    async fn set_group_setting(
        &self,
        queue: &QueueName,
        group: &GroupKey,
        set: Option<(&'static str, u32)>,
        delete: &'static str,
    ) -> Result<()> {
        let configured = write_tx!(self, |conn, _now| async {
            let known: Option<i64> = sqlx::query_scalar(sql::QUEUE_CONFIGURED)
                .bind(queue.as_str())
                .fetch_optional(&mut *conn)
                .await?;
            if known.is_none() {
                return Ok::<_, sqlx::Error>(false);
            }
            let statement = match set {
                Some((statement, value)) => sqlx::query(statement)
                    .bind(queue.as_str())
                    .bind(group.as_str())
                    .bind(i64::from(value)),
                None => sqlx::query(delete)
                    .bind(queue.as_str())
                    .bind(group.as_str()),
            };
            statement.execute(&mut *conn).await?;
            Ok(true)
        })?;
        if !configured {
            return Err(unconfigured_queue(queue));
        }
        self.forget_limited_queues();
        // A lifted or raised limit may make jobs claimable.
        self.signal(queue);
        Ok(())
    }

    pub(crate) async fn group_limits_pooled(&self) -> Result<Vec<GroupLimit>> {
        let rows = self
            .group_settings(sql::GROUP_LIMITS, "concurrency_limit")
            .await?;
        Ok(rows
            .into_iter()
            .map(|(queue, group, limit)| GroupLimit {
                queue,
                group,
                limit,
            })
            .collect())
    }

    pub(crate) async fn group_weights_pooled(&self) -> Result<Vec<GroupWeight>> {
        let rows = self.group_settings(sql::GROUP_WEIGHTS, "weight").await?;
        Ok(rows
            .into_iter()
            .map(|(queue, group, weight)| GroupWeight {
                queue,
                group,
                weight,
            })
            .collect())
    }

    /// Every group's own setting `statement` lists: its queue, group and
    /// `column`.
    async fn group_settings(
        &self,
        statement: &'static str,
        column: &str,
    ) -> Result<Vec<(QueueName, GroupKey, u32)>> {
        let rows = sqlx::query(statement)
            .fetch_all(&self.pool)
            .await
            .map_err(interpret_error)?;
        rows.iter()
            .map(|row| {
                let get = |column: &str| -> Result<String> {
                    row.try_get(column).map_err(interpret_error)
                };
                let value: i64 = row.try_get(column).map_err(interpret_error)?;
                Ok((
                    stored("queue_name", get("queue_name")?, QueueName::new)?,
                    stored("group_key", get("group_key")?, GroupKey::new)?,
                    stored_count(column, value)?,
                ))
            })
            .collect()
    }

    pub(crate) async fn queue_configs_pooled(&self) -> Result<Vec<QueueConfig>> {
        let rows = sqlx::query(sql::QUEUE_CONFIGS)
            .fetch_all(&self.pool)
            .await
            .map_err(interpret_error)?;
        rows.iter().map(config).collect()
    }
}

/// What the limited claim leased, with what its caller needs to put the
/// rows in claim order.
pub(crate) struct LimitedClaim {
    /// The leased rows, in no particular order (RETURNING).
    pub(crate) rows: Vec<SqliteRow>,
    /// The ids in the order the claim returns them, when it picked them
    /// (a queue with group limits, priority aging or fair groups): by
    /// effective priority, a fair queue's jobs in its fair order. Empty:
    /// the plain claim order.
    pub(crate) order: Vec<i64>,
}

/// Reads the request's limited queues, claims what they allow, and takes
/// their tokens; every statement in the caller's write transaction.
async fn claim_limited(
    conn: &mut SqliteConnection,
    now: i64,
    request: &DequeueRequest,
) -> Result<LimitedClaim, sqlx::Error> {
    let at = stored_instant("time", now).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
    let names: Vec<&str> = request.queues().iter().map(QueueName::as_str).collect();
    let names = serde_json::to_string(&names).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    let rows = sqlx::query(sql::FLOW_CLAIM_LIMITS)
        .bind(names)
        .fetch_all(&mut *conn)
        .await?;
    let mut allowances: Vec<(QueueName, u32)> = Vec::with_capacity(rows.len());
    let mut buckets: Vec<(QueueName, RateLimit, Option<Bucket>)> = Vec::new();
    let mut grouped: Vec<(QueueName, Option<u32>)> = Vec::new();
    let mut aging: Vec<(QueueName, Duration)> = Vec::new();
    let mut fair: Vec<QueueName> = Vec::new();
    for row in &rows {
        let queue = QueueName::new(row.try_get::<String, _>("queue_name")?)
            .map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
        let (limits, bucket) = claim_limits(row)?;
        if row.try_get::<bool, _>("grouped")? {
            grouped.push((queue.clone(), limits.group_concurrency));
        }
        if let Some(period) = limits.priority_aging {
            aging.push((queue.clone(), period));
        }
        if limits.fair_groups {
            fair.push(queue.clone());
        }
        let held = u64::try_from(row.try_get::<i64, _>("held")?).unwrap_or(0);
        allowances.push((queue.clone(), limits.allowance(held, bucket, at)));
        if let Some(rate) = limits.rate {
            buckets.push((queue, rate, bucket));
        }
    }
    let Some(narrowed) = request.narrowed(&allowances) else {
        return Ok(LimitedClaim {
            rows: Vec::new(),
            order: Vec::new(),
        });
    };
    let (claimed, order) = if grouped.is_empty() && aging.is_empty() && fair.is_empty() {
        (claim_any(conn, now, &narrowed).await?, Vec::new())
    } else {
        let picks = Picks {
            grouped: &grouped,
            aging: &aging,
            fair: &fair,
        };
        claim_picked(conn, now, &narrowed, &picks).await?
    };
    for (queue, rate, bucket) in buckets {
        let mut taken = 0_u32;
        for row in &claimed {
            if row.try_get::<&str, _>("queue_name")? == queue.as_str() {
                taken += 1;
            }
        }
        if taken == 0 {
            // Refilling alone changes nothing a later read would not compute.
            continue;
        }
        let after = Bucket::after(&rate, bucket, at, taken);
        sqlx::query(sql::FLOW_TAKE_TOKENS)
            .bind(queue.as_str())
            .bind(after.tokens)
            .bind(after.refilled_at.timestamp_micros())
            .execute(&mut *conn)
            .await?;
    }
    Ok(LimitedClaim {
        rows: claimed,
        order,
    })
}

/// How a limited claim picks each queue's jobs: the grouped queues with
/// their group concurrency, the aging queues with their period, the fair
/// queues.
struct Picks<'a> {
    grouped: &'a [(QueueName, Option<u32>)],
    aging: &'a [(QueueName, Duration)],
    fair: &'a [QueueName],
}

/// Rows per page of a grouped queue's walk: enough that a few full groups
/// in the way cost one read, few enough that a claim of one job reads
/// little.
const GROUP_PAGE: usize = 64;

/// Leases the jobs of a request naming a queue whose groups are limited,
/// whose priorities age or whose groups are served fairly: each queue's
/// best jobs in its own order (a grouped queue's within its groups'
/// slots, an aging queue's by effective priority, a fair queue's in its
/// fair order), merged job by job by the claim order of each queue's next
/// job up to the limit, leased in one statement; a fair queue's groups'
/// turns advance with what it took. Answers the rows and their ids in
/// that order.
async fn claim_picked(
    conn: &mut SqliteConnection,
    now: i64,
    request: &DequeueRequest,
    picks: &Picks<'_>,
) -> Result<(Vec<SqliteRow>, Vec<i64>), sqlx::Error> {
    let mut lists: Vec<Vec<Candidate>> = Vec::with_capacity(request.queues().len());
    let mut fair_groups = HashMap::new();
    for queue in request.queues() {
        let cap = request.queue_limit(queue).min(request.limit()) as usize;
        let groups = picks.grouped.iter().find(|(q, _)| q == queue);
        let period = (picks.aging.iter())
            .find(|(q, _)| q == queue)
            .map(|(_, p)| *p);
        let slots = match groups {
            Some((_, default)) => group_slots(conn, queue, *default).await?,
            None => GroupSlots::new(None, []),
        };
        let list = if picks.fair.contains(queue) {
            let picked = fair_candidates(conn, now, queue, cap, slots, period).await?;
            let mut list = Vec::with_capacity(picked.len());
            for (candidate, group, taken) in picked {
                fair_groups.insert(candidate.2, (queue.clone(), group, taken));
                list.push(candidate);
            }
            list
        } else {
            match (groups, period) {
                (_, Some(period)) => pick_aged(conn, now, queue, cap, slots, period).await?,
                (Some(_), None) => pick_grouped(conn, now, queue, cap, slots).await?,
                (None, None) => pick_queue(conn, now, queue, cap).await?,
            }
        };
        lists.push(list);
    }
    let limit = usize::try_from(request.limit()).unwrap_or(usize::MAX);
    let merged = merge_by_next(lists, limit, |&(priority, available_at, id)| {
        claim_order(priority, available_at, id)
    });
    let rows = claim_candidates(conn, now, request, &merged).await?;
    advance_turns(conn, &merged, &fair_groups).await?;
    Ok((rows, merged.iter().map(|&(_, _, id)| id).collect()))
}

/// The group slots of `queue` in this claim: the groups' limits
/// (`default`, or a group's own) less the leases each group holds, counted
/// in this transaction.
async fn group_slots(
    conn: &mut SqliteConnection,
    queue: &QueueName,
    default: Option<u32>,
) -> Result<GroupSlots, sqlx::Error> {
    let decode = |e: QueueError| sqlx::Error::Decode(Box::new(e));
    let group = |name: String| GroupKey::new(name).map_err(decode);
    let overrides = sqlx::query(sql::GROUP_OVERRIDES)
        .bind(queue.as_str())
        .fetch_all(&mut *conn)
        .await?;
    let mut limits = Vec::with_capacity(overrides.len());
    for row in &overrides {
        let limit = stored_count(
            "concurrency_limit",
            row.try_get::<i64, _>("concurrency_limit")?,
        );
        limits.push((group(row.try_get("group_key")?)?, limit.map_err(decode)?));
    }
    let mut slots = GroupSlots::new(default, limits);
    let held = sqlx::query(sql::GROUP_HELD)
        .bind(queue.as_str())
        .fetch_all(&mut *conn)
        .await?;
    for row in &held {
        let count: i64 = row.try_get("held")?;
        slots.hold(
            group(row.try_get("group_key")?)?,
            u64::try_from(count).unwrap_or(0),
        );
    }
    Ok(slots)
}

/// The group key of a picked row.
fn group_of(row: &SqliteRow) -> Result<Option<GroupKey>, sqlx::Error> {
    let key: Option<String> = row.try_get("group_key")?;
    key.map(|name| GroupKey::new(name).map_err(|e| sqlx::Error::Decode(Box::new(e))))
        .transpose()
}

/// The best `cap` claimable jobs of `queue` within its groups' `slots`.
async fn pick_grouped(
    conn: &mut SqliteConnection,
    now: i64,
    queue: &QueueName,
    cap: usize,
    mut slots: GroupSlots,
) -> Result<Vec<Candidate>, sqlx::Error> {
    let mut picked: Vec<Candidate> = Vec::new();
    // Above every priority: the first page starts at the best job.
    let mut after: (i64, i64, i64) = (i64::from(i32::MAX) + 1, 0, 0);
    while picked.len() < cap {
        let page = (cap - picked.len()).max(GROUP_PAGE);
        let full: Vec<&str> = slots
            .full_groups()
            .into_iter()
            .map(GroupKey::as_str)
            .collect();
        let full = serde_json::to_string(&full).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
        let rows = sqlx::query(sql::GROUP_PICK)
            .bind(queue.as_str())
            .bind(now)
            .bind(full)
            .bind(after.0)
            .bind(after.1)
            .bind(after.2)
            .bind(i64::try_from(page).unwrap_or(i64::MAX))
            .fetch_all(&mut *conn)
            .await?;
        let read = rows.len();
        for row in rows {
            let candidate = candidate_of(&row)?;
            after = (i64::from(candidate.0), candidate.1, candidate.2);
            let key = group_of(&row)?;
            // A job of a group that filled up on this page is skipped.
            if picked.len() < cap && slots.take(key.as_ref()) {
                picked.push(candidate);
            }
        }
        if read < page {
            break;
        }
    }
    Ok(picked)
}

/// One priority level of an aging queue during the claim's merge.
struct Level {
    priority: i32,
    /// Rows read and not merged yet, in the level's order.
    rows: VecDeque<(Candidate, Option<GroupKey>)>,
    /// `(available_at, id)` of the last row read: the next page starts
    /// after it.
    after: (i64, i64),
    /// Every claimable row of the level has been read.
    done: bool,
}

/// The best `cap` claimable jobs of aging `queue` (period `period`) by
/// effective priority, within its groups' `slots`; each candidate carries
/// its effective priority, so that the claim's merge across queues sorts
/// it by that.
///
/// Within one level the claim order (`available_at`, then id) is also the
/// order by effective priority, so the best jobs are a merge of the
/// levels' heads: every level is read from its best job a page at a time
/// (a range of the dequeue index), and the best head of all is taken next.
/// Costs two index probes per level present in the queue, and the rows
/// taken or skipped (a full group's jobs are left out of the pages, and a
/// job of a group that fills up during the merge is skipped).
async fn pick_aged(
    conn: &mut SqliteConnection,
    now: i64,
    queue: &QueueName,
    cap: usize,
    mut slots: GroupSlots,
    period: Duration,
) -> Result<Vec<Candidate>, sqlx::Error> {
    let decode = |e: QueueError| sqlx::Error::Decode(Box::new(e));
    let at = stored_instant("time", now).map_err(decode)?;
    let aged = |&(priority, available_at, id): &Candidate| {
        let due = stored_instant("available_at", available_at).map_err(decode)?;
        Ok::<_, sqlx::Error>(aged_claim_order(priority, due, id, at, Some(period)))
    };
    if cap == 0 {
        return Ok(Vec::new());
    }
    let page_floor = if slots.limits_any() { GROUP_PAGE } else { 1 };
    let mut levels: Vec<Level> = Vec::new();
    // Above every priority: the first step finds the highest level.
    let mut bound = i64::from(i32::MAX) + 1;
    loop {
        let level: Option<i32> = sqlx::query_scalar(sql::DEQUEUE_LEVEL)
            .bind(queue.as_str())
            .bind(bound)
            .fetch_optional(&mut *conn)
            .await?;
        let Some(priority) = level else { break };
        bound = i64::from(priority);
        levels.push(Level {
            priority,
            rows: VecDeque::new(),
            after: (i64::MIN, i64::MIN),
            done: false,
        });
    }
    let mut picked: Vec<Candidate> = Vec::new();
    while picked.len() < cap {
        for level in levels.iter_mut().filter(|l| l.rows.is_empty() && !l.done) {
            let page = (cap - picked.len()).max(page_floor);
            let full: Vec<&str> = (slots.full_groups().into_iter())
                .map(GroupKey::as_str)
                .collect();
            let full =
                serde_json::to_string(&full).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
            let rows = sqlx::query(sql::AGED_LEVEL_PICK)
                .bind(queue.as_str())
                .bind(now)
                .bind(full)
                .bind(level.priority)
                .bind(level.after.0)
                .bind(level.after.1)
                .bind(i64::try_from(page).unwrap_or(i64::MAX))
                .fetch_all(&mut *conn)
                .await?;
            level.done = rows.len() < page;
            for row in rows {
                let candidate = candidate_of(&row)?;
                level.after = (candidate.1, candidate.2);
                level.rows.push_back((candidate, group_of(&row)?));
            }
        }
        let mut best: Option<(_, usize)> = None;
        for (i, level) in levels.iter().enumerate() {
            if let Some((head, _)) = level.rows.front() {
                let key = aged(head)?;
                if best.as_ref().is_none_or(|(b, _)| key < *b) {
                    best = Some((key, i));
                }
            }
        }
        let Some((key, i)) = best else { break };
        let Some(((_, available_at, id), group)) = levels[i].rows.pop_front() else {
            break;
        };
        // A job of a group that filled up during the merge is skipped.
        if slots.take(group.as_ref()) {
            picked.push((key.0.0, available_at, id));
        }
    }
    Ok(picked)
}

/// A row of `FLOW_CLAIM_LIMITS`: the claim limits and the bucket.
fn claim_limits(row: &SqliteRow) -> Result<(QueueLimits, Option<Bucket>), sqlx::Error> {
    let concurrency: Option<i64> = row.try_get("concurrency_limit")?;
    let per_second: Option<f64> = row.try_get("rate_per_second")?;
    let burst: Option<i64> = row.try_get("rate_burst")?;
    let tokens: Option<f64> = row.try_get("tokens")?;
    let refilled_at: Option<i64> = row.try_get("refilled_at")?;
    let decode = |e: queue_core::QueueError| sqlx::Error::Decode(Box::new(e));
    let limits = QueueLimits {
        concurrency: concurrency
            .map(|c| stored_count("concurrency_limit", c))
            .transpose()
            .map_err(decode)?,
        rate: rate(per_second, burst).map_err(decode)?,
        group_concurrency: (row.try_get::<Option<i64>, _>("group_concurrency_limit")?)
            .map(|c| stored_count("group_concurrency_limit", c))
            .transpose()
            .map_err(decode)?,
        fair_groups: row.try_get("fair_groups")?,
        priority_aging: (row.try_get::<Option<i64>, _>("priority_aging_ms")?)
            .map(|ms| stored_millis("priority_aging_ms", ms))
            .transpose()
            .map_err(decode)?,
        ..QueueLimits::default()
    };
    let bucket = match (tokens, refilled_at) {
        (Some(tokens), Some(at)) => Some(Bucket {
            tokens,
            refilled_at: stored_instant("time", at).map_err(decode)?,
        }),
        _ => None,
    };
    Ok((limits, bucket))
}

/// A stored rate: both columns or neither.
fn rate(per_second: Option<f64>, burst: Option<i64>) -> Result<Option<RateLimit>> {
    match (per_second, burst) {
        (Some(per_second), Some(burst)) => Ok(Some(RateLimit {
            per_second,
            burst: stored_count("rate_burst", burst)?,
        })),
        (None, None) => Ok(None),
        (per_second, _) => Err(corrupt("rate_per_second", format!("{per_second:?}"))),
    }
}

/// A row of `QUEUE_CONFIGS`.
fn config(row: &SqliteRow) -> Result<QueueConfig> {
    let get =
        |column: &str| -> Result<Option<i64>> { row.try_get(column).map_err(interpret_error) };
    let name: String = row.try_get("queue_name").map_err(interpret_error)?;
    let queue = queue_core::backend::stored("queue_name", name, QueueName::new)?;
    let per_second: Option<f64> = row.try_get("rate_per_second").map_err(interpret_error)?;
    let jitter: Option<f64> = row.try_get("backoff_jitter").map_err(interpret_error)?;
    let backoff = match (
        get("backoff_base_ms")?,
        get("backoff_min_ms")?,
        get("backoff_max_ms")?,
        jitter,
    ) {
        (Some(base), Some(min), Some(max), Some(jitter)) => Some(
            Backoff::new(
                stored_millis("backoff_base_ms", base)?,
                stored_millis("backoff_min_ms", min)?,
                stored_millis("backoff_max_ms", max)?,
                jitter,
            )
            .map_err(|e| corrupt("backoff_base_ms", e))?,
        ),
        (None, None, None, None) => None,
        (base, ..) => return Err(corrupt("backoff_base_ms", format!("{base:?}"))),
    };
    Ok(QueueConfig {
        queue,
        paused: row.try_get("paused").map_err(interpret_error)?,
        limits: QueueLimits {
            concurrency: get("concurrency_limit")?
                .map(|c| stored_count("concurrency_limit", c))
                .transpose()?,
            group_concurrency: get("group_concurrency_limit")?
                .map(|c| stored_count("group_concurrency_limit", c))
                .transpose()?,
            rate: rate(per_second, get("rate_burst")?)?,
            lease: get("lease_ms")?
                .map(|ms| stored_millis("lease_ms", ms))
                .transpose()?,
            backoff,
            fair_groups: row.try_get("fair_groups").map_err(interpret_error)?,
            priority_aging: get("priority_aging_ms")?
                .map(|ms| stored_millis("priority_aging_ms", ms))
                .transpose()?,
        },
    })
}
