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

use std::collections::BTreeSet;
use std::time::Duration;

use queue_core::backend::{corrupt, stored_count, stored_instant, stored_millis};
use queue_core::{
    Backoff, Bucket, DequeueRequest, QueueConfig, QueueLimits, QueueName, RateLimit, Result,
};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};

use crate::dequeue::claim_any;
use crate::{SqliteStorage, interpret_error, sql};

impl SqliteStorage {
    /// Whether `request` names a queue with claim limits, from the set read
    /// at most `LimitedQueues::TTL` ago (read again when older).
    pub(crate) async fn names_limited_queue(&self, request: &DequeueRequest) -> Result<bool> {
        if let Some(answer) = self.limited.limits(request) {
            return Ok(answer);
        }
        let names: Vec<String> = sqlx::query_scalar(sql::LIMITED_QUEUES)
            .fetch_all(&self.pool)
            .await
            .map_err(interpret_error)?;
        // A stored name the type refuses cannot be named by a request.
        let limited: BTreeSet<QueueName> = names
            .into_iter()
            .filter_map(|name| QueueName::new(name).ok())
            .collect();
        Ok(self.limited.store(limited, request))
    }

    /// The limited claim path: see the module docs.
    pub(crate) async fn dequeue_limited(&self, request: &DequeueRequest) -> Result<Vec<SqliteRow>> {
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
                .execute(&mut *conn)
                .await?;
            Ok::<_, sqlx::Error>(())
        })?;
        self.limited.invalidate();
        // Lifted or raised limits may make jobs claimable.
        self.signal(queue);
        Ok(())
    }

    pub(crate) async fn queue_configs_pooled(&self) -> Result<Vec<QueueConfig>> {
        let rows = sqlx::query(sql::QUEUE_CONFIGS)
            .fetch_all(&self.pool)
            .await
            .map_err(interpret_error)?;
        rows.iter().map(config).collect()
    }
}

/// Reads the request's limited queues, claims what they allow, and takes
/// their tokens; every statement in the caller's write transaction.
async fn claim_limited(
    conn: &mut SqliteConnection,
    now: i64,
    request: &DequeueRequest,
) -> Result<Vec<SqliteRow>, sqlx::Error> {
    let at = stored_instant("time", now).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
    let names: Vec<&str> = request.queues().iter().map(QueueName::as_str).collect();
    let names = serde_json::to_string(&names).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    let rows = sqlx::query(sql::FLOW_CLAIM_LIMITS)
        .bind(names)
        .fetch_all(&mut *conn)
        .await?;
    let mut allowances: Vec<(QueueName, u32)> = Vec::with_capacity(rows.len());
    let mut buckets: Vec<(QueueName, RateLimit, Option<Bucket>)> = Vec::new();
    for row in &rows {
        let queue = QueueName::new(row.try_get::<String, _>("queue_name")?)
            .map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
        let (limits, bucket) = claim_limits(row)?;
        let held = u64::try_from(row.try_get::<i64, _>("held")?).unwrap_or(0);
        allowances.push((queue.clone(), limits.allowance(held, bucket, at)));
        if let Some(rate) = limits.rate {
            buckets.push((queue, rate, bucket));
        }
    }
    let Some(narrowed) = request.narrowed(&allowances) else {
        return Ok(Vec::new());
    };
    let claimed = claim_any(conn, now, &narrowed).await?;
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
    Ok(claimed)
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
            rate: rate(per_second, get("rate_burst")?)?,
            lease: get("lease_ms")?
                .map(|ms| stored_millis("lease_ms", ms))
                .transpose()?,
            backoff,
        },
    })
}
