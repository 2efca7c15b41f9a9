//! Flow control: `configure_queue` and `queue_configs` on `queue_config`,
//! and the limited claim path.
//!
//! A claim naming no limited queue (as `LimitedQueues` remembers them,
//! read at most once a second) is the plain one-statement claim of
//! `dequeue.rs`. One naming a limited queue runs in one transaction: lock
//! the limited queues' config rows in name order (`sql.rs`'s
//! `LIMITS_LOCK`), count their held leases up to the limit in a later
//! statement (`HELD`: READ COMMITTED gives each statement its own
//! snapshot, and the lock statement's predates the lock it waited for),
//! narrow the request to
//! [`QueueLimits::allowance`], run the plain claim statement, store the
//! buckets of rate-limited queues ([`Bucket::after`]), commit.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};
use queue_core::backend::{claim_order, corrupt, stored, stored_count, stored_millis};
use queue_core::{
    Backoff, Bucket, DequeueRequest, Job, QueueConfig, QueueLimits, QueueName, RateLimit, Result,
};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use crate::dequeue::ClaimBinds;
use crate::error::{Failure, retrying};
use crate::{PgStorage, interpret_error, rows};

/// A limited queue's config row, read under its lock.
struct Locked {
    queue: QueueName,
    limits: QueueLimits,
    bucket: Option<Bucket>,
}

impl PgStorage {
    /// Whether `request` must take the limited path: from the cache, or
    /// by reading the set of limited queues when the cache is stale.
    pub(crate) async fn claim_is_limited(&self, request: &DequeueRequest) -> Result<bool> {
        if let Some(limited) = self.limited.limits(request) {
            return Ok(limited);
        }
        let names: Vec<String> = retrying(true, || {
            sqlx::query_scalar(self.sql.limited_queues.clone()).fetch_all(&self.pool)
        })
        .await?;
        let limited = names
            .into_iter()
            .map(|name| stored("queue_name", name, QueueName::new))
            .collect::<Result<BTreeSet<_>>>()?;
        Ok(self.limited.store(limited, request))
    }

    /// The limited claim, in one transaction (see the module docs).
    pub(crate) async fn dequeue_limited(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        let jobs = retrying(false, || async {
            let mut tx = self.pool.begin().await?;
            let jobs = self.dequeue_limited_on(&mut tx, request).await?;
            tx.commit().await?;
            Ok::<_, Failure>(jobs)
        })
        .await?;
        Ok(jobs)
    }

    async fn dequeue_limited_on(
        &self,
        conn: &mut PgConnection,
        request: &DequeueRequest,
    ) -> Result<Vec<Job>, Failure> {
        let names: Vec<&str> = request.queues().iter().map(QueueName::as_str).collect();
        let locked_rows = sqlx::query(self.sql.limits_lock.clone())
            .bind(self.now_override())
            .bind(&names)
            .fetch_all(&mut *conn)
            .await?;
        let Some(now) = locked_rows
            .first()
            .map(|row| row.try_get::<DateTime<Utc>, _>("now"))
            .transpose()?
        else {
            // The limits were removed since the cache was read.
            return self.claim_on(conn, request).await;
        };
        let locked = locked_rows
            .iter()
            .map(locked_limits)
            .collect::<Result<Vec<_>>>()?;
        let (counted, caps): (Vec<&str>, Vec<i64>) = locked
            .iter()
            .filter_map(|l| Some((l.queue.as_str(), i64::from(l.limits.concurrency?))))
            .unzip();
        let mut held: HashMap<String, i64> = HashMap::new();
        if !counted.is_empty() {
            for row in sqlx::query(self.sql.held.clone())
                .bind(&counted)
                .bind(&caps)
                .fetch_all(&mut *conn)
                .await?
            {
                held.insert(row.try_get("queue_name")?, row.try_get("held")?);
            }
        }
        let allowances: Vec<(QueueName, u32)> = locked
            .iter()
            .map(|l| {
                let held = held.get(l.queue.as_str()).copied().unwrap_or(0);
                let held = u64::try_from(held).unwrap_or(0);
                (l.queue.clone(), l.limits.allowance(held, l.bucket, now))
            })
            .collect();
        let Some(narrowed) = request.narrowed(&allowances) else {
            return Ok(Vec::new());
        };
        let jobs = self.claim_on(conn, &narrowed).await?;
        let rated: Vec<(&Locked, RateLimit)> = locked
            .iter()
            .filter_map(|l| Some((l, l.limits.rate?)))
            .collect();
        if !rated.is_empty() {
            let mut queues = Vec::with_capacity(rated.len());
            let mut tokens = Vec::with_capacity(rated.len());
            let mut refilled = Vec::with_capacity(rated.len());
            for (l, rate) in rated {
                let taken = jobs.iter().filter(|job| job.queue == l.queue).count();
                let taken = u32::try_from(taken).unwrap_or(u32::MAX);
                let after = Bucket::after(&rate, l.bucket, now, taken);
                queues.push(l.queue.as_str());
                tokens.push(after.tokens);
                refilled.push(after.refilled_at);
            }
            sqlx::query(self.sql.bucket_store.clone())
                .bind(&queues)
                .bind(&tokens)
                .bind(&refilled)
                .execute(&mut *conn)
                .await?;
        }
        Ok(jobs)
    }

    /// The plain claim statement of `dequeue.rs`, on `conn`.
    async fn claim_on(
        &self,
        conn: &mut PgConnection,
        request: &DequeueRequest,
    ) -> Result<Vec<Job>, Failure> {
        let binds = ClaimBinds::of(request);
        let rows = self
            .bind_claim(
                sqlx::query(self.dequeue_statement(request)),
                request,
                &binds,
            )
            .fetch_all(&mut *conn)
            .await?;
        let mut jobs = rows.iter().map(rows::job).collect::<Result<Vec<_>>>()?;
        jobs.sort_by_key(|job| claim_order(job.priority, job.available_at, job.id.get()));
        Ok(jobs)
    }

    pub(crate) async fn configure_pooled(
        &self,
        queue: &QueueName,
        limits: &QueueLimits,
    ) -> Result<()> {
        limits.validate()?;
        let backoff = limits.backoff;
        retrying(true, || {
            sqlx::query(self.sql.configure.clone())
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
                .execute(&self.pool)
        })
        .await?;
        self.limited.invalidate();
        Ok(())
    }

    pub(crate) async fn queue_configs_pooled(&self) -> Result<Vec<QueueConfig>> {
        let rows = retrying(true, || {
            sqlx::query(self.sql.queue_configs.clone()).fetch_all(&self.pool)
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
        ..QueueLimits::default()
    })
}

fn locked_limits(row: &PgRow) -> Result<Locked> {
    let tokens: Option<f64> = get(row, "tokens")?;
    let refilled_at: Option<DateTime<Utc>> = get(row, "refilled_at")?;
    Ok(Locked {
        queue: stored("queue_name", get(row, "queue_name")?, QueueName::new)?,
        limits: claim_limits(row)?,
        bucket: tokens.zip(refilled_at).map(|(tokens, refilled_at)| Bucket {
            tokens,
            refilled_at,
        }),
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
