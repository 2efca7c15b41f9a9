//! Flow control: the per-queue settings kept in `queue_config` beside the
//! paused flag, and the pure arithmetic every backend's claim applies to
//! them (a global concurrency limit and a token-bucket rate limit).
//!
//! A backend reads a queue's [`QueueLimits`], its held leases and its
//! [`Bucket`] while it holds the queue's config row (or its own lock), asks
//! [`QueueLimits::allowance`] how many jobs the claim may take, claims at
//! most that many, and stores [`Bucket::after`] in the same transaction.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{Backoff, GroupKey, MAX_LEASE, QueueError, QueueName, Result, validate_lease};

/// The largest concurrency limit, rate and burst a queue may be given.
pub const MAX_FLOW_LIMIT: u32 = 1_000_000;

/// The shortest priority aging period ([`QueueLimits::priority_aging`]).
pub const MIN_PRIORITY_AGING: Duration = Duration::from_secs(1);

/// The longest priority aging period: 30 days.
pub const MAX_PRIORITY_AGING: Duration = Duration::from_secs(30 * 24 * 3600);

/// A token-bucket rate limit: `per_second` tokens are added each second on
/// the storage's clock, up to `burst`; every claimed job takes one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateLimit {
    /// Jobs per second in the long run (may be fractional: 0.5 is one job
    /// every two seconds).
    pub per_second: f64,
    /// The most jobs that may start at once after a quiet spell.
    pub burst: u32,
}

/// Per-queue settings, enforced by every backend's claim (`concurrency`,
/// `rate`) or used by the worker (`lease`, `backoff`). `None` everywhere
/// (the default) is a queue without limits, which pays nothing for them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct QueueLimits {
    /// The most jobs of the queue holding a lease at once, across every
    /// worker and host. A lease counts until it is acked, nacked, released,
    /// reclaimed or its job removed: a stalled lease keeps its slot until
    /// reclaim frees it.
    pub concurrency: Option<u32>,
    /// The most jobs of one group ([`crate::NewJob::group_key`]) of the
    /// queue holding a lease at once, across every worker and host, for
    /// every group without a limit of its own ([`GroupLimit`],
    /// [`crate::Storage::set_group_limit`]). Leases count as for
    /// `concurrency`; jobs without a group key are never held back by it.
    /// A claim skips the jobs of a full group and takes the next eligible
    /// job, so one busy group does not stall the others.
    ///
    /// Only a storage that declares [`crate::Capability::GroupLimits`]
    /// takes it; the others refuse it with
    /// [`QueueError::NotSupported`] and change nothing.
    pub group_concurrency: Option<u32>,
    /// Priority aging: the period `P` after which a pending job is served
    /// as if one level higher, so that no priority level starves under
    /// sustained load. With it, a claim orders the queue's pending jobs by
    /// [`crate::backend::aged_priority`] (`priority + floor((now -
    /// available_at) / P)`, saturating at `i32::MAX`) descending, then
    /// `available_at`, then id; the job's stored priority never changes.
    /// `MIN_PRIORITY_AGING..=MAX_PRIORITY_AGING` (1 s to 30 days), stored
    /// to the millisecond. See [`crate::Storage::dequeue`].
    ///
    /// Only a storage that declares [`crate::Capability::PriorityAging`]
    /// takes it; the others refuse it with [`QueueError::NotSupported`]
    /// and change nothing.
    pub priority_aging: Option<Duration>,
    /// Fair claiming between groups: within each (effective) priority
    /// level, a claim serves the queue's groups in turn, one job each, the
    /// group served longest ago first; jobs without a group key are one
    /// group. One group's backlog then delays another group's next job by
    /// at most one job per other group with jobs waiting at that level.
    /// The order is stated in [`crate::Storage::dequeue`];
    /// [`crate::backend::fair_order`] computes it.
    ///
    /// Only a storage that declares [`crate::Capability::FairGroups`]
    /// takes it; the others refuse it with [`QueueError::NotSupported`]
    /// and change nothing.
    pub fair_groups: bool,
    /// How fast the queue's jobs may start.
    pub rate: Option<RateLimit>,
    /// The lease a worker asks for when it claims from this queue (stored
    /// to the millisecond).
    pub lease: Option<Duration>,
    /// The retry backoff a worker applies to this queue's failures (its
    /// durations stored to the millisecond).
    pub backoff: Option<Backoff>,
}

impl QueueLimits {
    /// True when the claim must consult the queue's config row (priority
    /// aging and fair groups included: they change the claim's order).
    pub fn limits_claims(&self) -> bool {
        self.concurrency.is_some()
            || self.rate.is_some()
            || self.group_concurrency.is_some()
            || self.priority_aging.is_some()
            || self.fair_groups
    }

    /// Rejects limits no backend can honour.
    ///
    /// # Errors
    /// [`QueueError::InvalidInput`] naming the field: a concurrency, group
    /// concurrency, burst or rate of 0 or above [`MAX_FLOW_LIMIT`], a rate that is not a finite
    /// number, a lease outside 1 ms..=[`MAX_LEASE`], a priority aging
    /// period outside [`MIN_PRIORITY_AGING`]..=[`MAX_PRIORITY_AGING`].
    pub fn validate(&self) -> Result<()> {
        if let Some(limit) = self.concurrency {
            check_range("concurrency", f64::from(limit))?;
        }
        if let Some(limit) = self.group_concurrency {
            check_range("group_concurrency", f64::from(limit))?;
        }
        if let Some(rate) = &self.rate {
            if !rate.per_second.is_finite() {
                return Err(QueueError::invalid("rate", "must be a finite number"));
            }
            check_range("rate", rate.per_second)?;
            check_range("burst", f64::from(rate.burst))?;
        }
        if let Some(lease) = self.lease {
            validate_lease("lease", lease)?;
            debug_assert!(lease <= MAX_LEASE);
        }
        if let Some(period) = self.priority_aging
            && !(MIN_PRIORITY_AGING..=MAX_PRIORITY_AGING).contains(&period)
        {
            return Err(QueueError::invalid(
                "priority_aging",
                format!(
                    "is {period:?}, it must be at least {MIN_PRIORITY_AGING:?} and at most \
                     {MAX_PRIORITY_AGING:?} (30 days)"
                ),
            ));
        }
        Ok(())
    }

    /// How many jobs a claim may take from the queue at `now`, given the
    /// leases its jobs hold and its bucket (`None`: full).
    pub fn allowance(&self, held: u64, bucket: Option<Bucket>, now: DateTime<Utc>) -> u32 {
        let mut allowed = u64::from(u32::MAX);
        if let Some(limit) = self.concurrency {
            allowed = allowed.min(u64::from(limit).saturating_sub(held));
        }
        if let Some(rate) = &self.rate {
            allowed = allowed.min(Bucket::refill(rate, bucket, now).whole_tokens());
        }
        u32::try_from(allowed).unwrap_or(u32::MAX)
    }
}

impl std::fmt::Display for QueueLimits {
    /// `concurrency 5, group concurrency 1, priority aging 60s, fair groups, 50/s (burst 10),
    /// lease 45s, backoff 2s..3600s ±20%`, or `no limits`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(limit) = self.concurrency {
            parts.push(format!("concurrency {limit}"));
        }
        if let Some(limit) = self.group_concurrency {
            parts.push(format!("group concurrency {limit}"));
        }
        if let Some(period) = self.priority_aging {
            parts.push(format!("priority aging {period:?}"));
        }
        if self.fair_groups {
            parts.push("fair groups".to_owned());
        }
        if let Some(rate) = self.rate {
            parts.push(format!("{}/s (burst {})", rate.per_second, rate.burst));
        }
        if let Some(lease) = self.lease {
            parts.push(format!("lease {lease:?}"));
        }
        if let Some(backoff) = self.backoff {
            parts.push(format!(
                "backoff {:?}..{:?} ±{:.0}%",
                backoff.base(),
                backoff.max(),
                backoff.jitter() * 100.0
            ));
        }
        if parts.is_empty() {
            f.write_str("no limits")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

fn check_range(field: &'static str, value: f64) -> Result<()> {
    if value > 0.0 && value <= f64::from(MAX_FLOW_LIMIT) {
        Ok(())
    } else {
        Err(QueueError::invalid(
            field,
            format!("is {value}, it must be above 0 and at most {MAX_FLOW_LIMIT}"),
        ))
    }
}

/// One group's own concurrency limit in one queue: it replaces the queue's
/// [`QueueLimits::group_concurrency`] for that group (higher or lower), and
/// limits the group even when the queue sets no group concurrency. Set and
/// removed by [`crate::Storage::set_group_limit`], listed by
/// [`crate::Storage::group_limits`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GroupLimit {
    /// The queue; it must have a `queue_config` row (configured or paused)
    /// before a group of it can be given a limit.
    pub queue: QueueName,
    /// The group.
    pub group: GroupKey,
    /// The most jobs of the group in the queue holding a lease at once,
    /// `1..=`[`MAX_FLOW_LIMIT`].
    pub limit: u32,
}

impl GroupLimit {
    /// Rejects a limit no backend can honour.
    ///
    /// # Errors
    /// [`QueueError::InvalidInput`] naming `limit`: 0 or above
    /// [`MAX_FLOW_LIMIT`].
    pub fn validate_limit(limit: u32) -> Result<()> {
        check_range("limit", f64::from(limit))
    }
}

/// The largest weight a group of a fair queue may be given.
pub const MAX_GROUP_WEIGHT: u32 = 1_000;

/// One group's weight in one fair queue ([`QueueLimits::fair_groups`]):
/// each time its turn comes, a claim serves up to `weight` of its jobs in
/// a row before its turn goes behind every other group's (a group without
/// one has weight 1). Set and removed by
/// [`crate::Storage::set_group_weight`], listed by
/// [`crate::Storage::group_weights`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GroupWeight {
    /// The queue; it must have a `queue_config` row (configured or paused)
    /// before a group of it can be given a weight.
    pub queue: QueueName,
    /// The group.
    pub group: GroupKey,
    /// Its weight, `1..=`[`MAX_GROUP_WEIGHT`].
    pub weight: u32,
}

impl GroupWeight {
    /// Rejects a weight no backend takes.
    ///
    /// # Errors
    /// [`QueueError::InvalidInput`] naming `weight`: 0 or above
    /// [`MAX_GROUP_WEIGHT`].
    pub fn validate_weight(weight: u32) -> Result<()> {
        if (1..=MAX_GROUP_WEIGHT).contains(&weight) {
            Ok(())
        } else {
            Err(QueueError::invalid(
                "weight",
                format!("is {weight}, it must be at least 1 and at most {MAX_GROUP_WEIGHT}"),
            ))
        }
    }
}

/// A rate-limited queue's token bucket, as stored in its config row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    /// Tokens left at `refilled_at` (fractional).
    pub tokens: f64,
    /// When `tokens` was computed, on the storage's clock.
    pub refilled_at: DateTime<Utc>,
}

impl Bucket {
    /// A full bucket at `now`: what configuring a rate stores.
    pub fn full(rate: &RateLimit, now: DateTime<Utc>) -> Self {
        Self {
            tokens: f64::from(rate.burst),
            refilled_at: now,
        }
    }

    /// The bucket at `now`: tokens added since `refilled_at`, capped at the
    /// burst. A clock that went back adds nothing.
    pub fn refill(rate: &RateLimit, bucket: Option<Self>, now: DateTime<Utc>) -> Self {
        let Some(bucket) = bucket else {
            return Self::full(rate, now);
        };
        let elapsed = (now - bucket.refilled_at)
            .to_std()
            .unwrap_or(Duration::ZERO)
            .as_secs_f64();
        let tokens = (bucket.tokens + elapsed * rate.per_second).min(f64::from(rate.burst));
        Self {
            tokens: tokens.max(0.0),
            refilled_at: now.max(bucket.refilled_at),
        }
    }

    /// The bucket to store after a claim at `now` took `taken` jobs.
    pub fn after(rate: &RateLimit, bucket: Option<Self>, now: DateTime<Utc>, taken: u32) -> Self {
        let refilled = Self::refill(rate, bucket, now);
        Self {
            tokens: (refilled.tokens - f64::from(taken)).max(0.0),
            refilled_at: refilled.refilled_at,
        }
    }

    /// Whole tokens available (a hair of float error is forgiven, so that
    /// 50/s over 20 ms yields one token).
    fn whole_tokens(&self) -> u64 {
        (self.tokens + 1e-9).floor().max(0.0) as u64
    }
}

/// A queue's row of `queue_config`: whether it is paused and its limits.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueConfig {
    /// The queue.
    pub queue: QueueName,
    /// Set by [`crate::Storage::pause_queue`], cleared by `resume_queue`.
    pub paused: bool,
    /// Set by [`crate::Storage::configure_queue`].
    pub limits: QueueLimits,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(1_900_000_000_000 + ms).unwrap()
    }

    const RATE: RateLimit = RateLimit {
        per_second: 50.0,
        burst: 10,
    };

    #[test]
    fn an_empty_bucket_refills_at_the_rate_up_to_the_burst() {
        let limits = QueueLimits {
            rate: Some(RATE),
            ..QueueLimits::default()
        };
        assert_eq!(limits.allowance(0, None, at(0)), 10, "starts full");
        let empty = Bucket::after(&RATE, None, at(0), 10);
        assert_eq!(limits.allowance(0, Some(empty), at(0)), 0);
        assert_eq!(limits.allowance(0, Some(empty), at(19)), 0);
        assert_eq!(limits.allowance(0, Some(empty), at(20)), 1);
        assert_eq!(limits.allowance(0, Some(empty), at(100)), 5);
        assert_eq!(limits.allowance(0, Some(empty), at(60_000)), 10);
    }

    #[test]
    fn concurrency_counts_held_leases_and_the_tighter_limit_wins() {
        let limits = QueueLimits {
            concurrency: Some(5),
            rate: Some(RATE),
            ..QueueLimits::default()
        };
        assert_eq!(limits.allowance(0, None, at(0)), 5);
        assert_eq!(limits.allowance(3, None, at(0)), 2);
        assert_eq!(limits.allowance(7, None, at(0)), 0);
        let two_left = Bucket::after(&RATE, None, at(0), 8);
        assert_eq!(limits.allowance(0, Some(two_left), at(0)), 2);
        assert_eq!(QueueLimits::default().allowance(9, None, at(0)), u32::MAX);
    }

    #[test]
    fn a_clock_that_goes_back_adds_no_tokens() {
        let empty = Bucket::after(&RATE, None, at(1_000), 10);
        let back = Bucket::refill(&RATE, Some(empty), at(0));
        assert_eq!(back.tokens, 0.0);
        assert_eq!(back.refilled_at, at(1_000));
    }

    #[test]
    fn limits_print_on_one_line() {
        let limits = QueueLimits {
            concurrency: Some(5),
            group_concurrency: Some(1),
            priority_aging: Some(Duration::from_secs(60)),
            fair_groups: true,
            rate: Some(RATE),
            lease: Some(Duration::from_secs(45)),
            backoff: None,
        };
        assert_eq!(
            limits.to_string(),
            "concurrency 5, group concurrency 1, priority aging 60s, fair groups, 50/s (burst 10), \
             lease 45s"
        );
        assert_eq!(QueueLimits::default().to_string(), "no limits");
    }

    #[test]
    fn invalid_limits_name_their_field() {
        let field = |limits: QueueLimits| match limits.validate() {
            Err(QueueError::InvalidInput { field, .. }) => field,
            other => panic!("expected invalid input, got {other:?}"),
        };
        let rate = |per_second, burst| QueueLimits {
            rate: Some(RateLimit { per_second, burst }),
            ..QueueLimits::default()
        };
        assert_eq!(
            field(QueueLimits {
                concurrency: Some(0),
                ..QueueLimits::default()
            }),
            "concurrency"
        );
        assert_eq!(
            field(QueueLimits {
                group_concurrency: Some(0),
                ..QueueLimits::default()
            }),
            "group_concurrency"
        );
        assert_eq!(
            field(QueueLimits {
                group_concurrency: Some(MAX_FLOW_LIMIT + 1),
                ..QueueLimits::default()
            }),
            "group_concurrency"
        );
        assert!(
            QueueLimits {
                group_concurrency: Some(1),
                ..QueueLimits::default()
            }
            .limits_claims()
        );
        assert_eq!(
            GroupLimit::validate_limit(0)
                .expect_err("zero")
                .invalid_field(),
            Some("limit")
        );
        assert_eq!(field(rate(f64::NAN, 1)), "rate");
        assert_eq!(field(rate(0.0, 1)), "rate");
        assert_eq!(field(rate(1.0, 0)), "burst");
        assert_eq!(
            field(QueueLimits {
                lease: Some(Duration::ZERO),
                ..QueueLimits::default()
            }),
            "lease"
        );
        assert!(rate(0.5, 1).validate().is_ok());
        let aging = |period| QueueLimits {
            priority_aging: Some(period),
            ..QueueLimits::default()
        };
        assert_eq!(field(aging(Duration::from_millis(999))), "priority_aging");
        assert_eq!(field(aging(Duration::ZERO)), "priority_aging");
        assert_eq!(
            field(aging(MAX_PRIORITY_AGING + Duration::from_millis(1))),
            "priority_aging"
        );
        assert!(aging(MIN_PRIORITY_AGING).validate().is_ok());
        assert!(aging(MAX_PRIORITY_AGING).validate().is_ok());
        assert!(aging(Duration::from_secs(60)).limits_claims());
    }
}
