//! What workers observe per queue and minute, for the operator's charts:
//! how long jobs waited to start (a [`LagHistogram`]) and how deep the
//! queue was ([`Depth`]). Workers record them ([`crate::Storage::record_samples`]);
//! the dashboard reads them back ([`crate::Storage::samples`]).

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Timelike, Utc};
use serde::{Deserialize, Serialize};

use crate::{QueueError, QueueName, Result};

/// The highest bucket of a [`LagHistogram`]: lags of `2^(100/4)` ms (about
/// 9 hours 19 minutes) and longer all fall in it.
pub const MAX_LAG_BUCKET: u8 = 100;

/// The most samples one [`crate::Storage::record_samples`] call takes.
pub const MAX_SAMPLES_PER_CALL: usize = 1_000;

/// How long a storage keeps samples at least: 7 days, the longest window
/// [`crate::Storage::samples`] answers. Older ones may be forgotten.
pub const SAMPLE_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The upper bound of lag bucket `bucket`, in milliseconds: `2^(bucket/4)`
/// rounded down, and 0 for bucket 0. Each bucket is a quarter of a
/// doubling wider than the one below, so a percentile read from the
/// histogram is at most 19% (`2^(1/4)`) above the true lag.
pub fn lag_bucket_upper_ms(bucket: u8) -> u64 {
    if bucket == 0 {
        return 0;
    }
    2f64.powf(f64::from(bucket.min(MAX_LAG_BUCKET)) / 4.0) as u64
}

/// The bucket a lag falls in: the lowest whose upper bound is at least the
/// lag in whole milliseconds, [`MAX_LAG_BUCKET`] for longer lags.
pub fn lag_bucket(lag: Duration) -> u8 {
    let ms = u64::try_from(lag.as_millis()).unwrap_or(u64::MAX);
    (0..MAX_LAG_BUCKET)
        .find(|&bucket| lag_bucket_upper_ms(bucket) >= ms)
        .unwrap_or(MAX_LAG_BUCKET)
}

/// How many jobs started after waiting how long: jobs per lag bucket
/// (see [`lag_bucket`]). Histograms of several workers add up exactly.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LagHistogram {
    buckets: BTreeMap<u8, u64>,
}

impl LagHistogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one job that waited `lag` to start.
    pub fn record(&mut self, lag: Duration) {
        self.add_to_bucket(lag_bucket(lag), 1);
    }

    /// Adds `jobs` to `bucket` (a bucket above [`MAX_LAG_BUCKET`] is
    /// refused by [`validate_samples`], not here).
    pub fn add_to_bucket(&mut self, bucket: u8, jobs: u64) {
        if jobs > 0 {
            let count = self.buckets.entry(bucket).or_default();
            *count = count.saturating_add(jobs);
        }
    }

    /// Adds every job of `other`.
    pub fn merge(&mut self, other: &LagHistogram) {
        for (&bucket, &jobs) in &other.buckets {
            self.add_to_bucket(bucket, jobs);
        }
    }

    /// The non-empty buckets, lowest first, with their job counts.
    pub fn buckets(&self) -> impl Iterator<Item = (u8, u64)> + '_ {
        self.buckets.iter().map(|(&bucket, &jobs)| (bucket, jobs))
    }

    /// Jobs counted.
    pub fn total(&self) -> u64 {
        self.buckets
            .values()
            .fold(0, |sum, &n| sum.saturating_add(n))
    }

    /// Whether no job is counted.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// The lag under which `quantile` (0.0..=1.0) of the jobs started: the
    /// upper bound of the bucket holding that job. `None` when empty.
    pub fn quantile(&self, quantile: f64) -> Option<Duration> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let rank = ((quantile.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (bucket, jobs) in self.buckets() {
            seen = seen.saturating_add(jobs);
            if seen >= rank {
                return Some(Duration::from_millis(lag_bucket_upper_ms(bucket)));
            }
        }
        None
    }
}

/// A queue's live jobs at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Depth {
    /// Jobs that could be claimed now.
    pub pending: u64,
    /// Jobs waiting for their time (delayed, or a retry's backoff).
    pub scheduled: u64,
    /// Jobs held by a lease.
    pub running: u64,
}

/// What was observed of one queue in one minute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueSample {
    /// The queue.
    pub queue: QueueName,
    /// The start of the minute (UTC, whole minute: [`crate::minute_of`]).
    pub minute: DateTime<Utc>,
    /// Jobs started in that minute, by how long they waited.
    pub lag: LagHistogram,
    /// The queue's depth at some moment of that minute, if measured.
    pub depth: Option<Depth>,
}

impl QueueSample {
    /// A sample with nothing observed yet.
    pub fn new(queue: QueueName, minute: DateTime<Utc>) -> Self {
        Self {
            queue,
            minute,
            lag: LagHistogram::new(),
            depth: None,
        }
    }

    /// Whether it says nothing: no lag counted and no depth.
    pub fn is_empty(&self) -> bool {
        self.lag.is_empty() && self.depth.is_none()
    }

    /// Folds `later` (same queue and minute) in, as the storage does: lags
    /// add up, a depth replaces the one before.
    pub fn merge(&mut self, later: &QueueSample) {
        self.lag.merge(&later.lag);
        if later.depth.is_some() {
            self.depth = later.depth;
        }
    }
}

/// Checks a [`crate::Storage::record_samples`] batch: at most
/// [`MAX_SAMPLES_PER_CALL`] samples, each minute whole, each bucket at most
/// [`MAX_LAG_BUCKET`]. `InvalidInput` names what is wrong.
pub fn validate_samples(samples: &[QueueSample]) -> Result<()> {
    if samples.len() > MAX_SAMPLES_PER_CALL {
        return Err(QueueError::invalid(
            "samples",
            format!(
                "holds {} samples, at most {MAX_SAMPLES_PER_CALL} per call",
                samples.len()
            ),
        ));
    }
    for sample in samples {
        if sample.minute.second() != 0 || sample.minute.nanosecond() != 0 {
            return Err(QueueError::invalid(
                "minute",
                format!(
                    "is {}, it must be the start of a minute",
                    sample.minute.to_rfc3339()
                ),
            ));
        }
        if let Some((bucket, _)) = sample.lag.buckets().find(|&(b, _)| b > MAX_LAG_BUCKET) {
            return Err(QueueError::invalid(
                "lag",
                format!("has bucket {bucket}, the highest is {MAX_LAG_BUCKET}"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_a_quarter_doubling_wide() {
        assert_eq!(lag_bucket(Duration::ZERO), 0);
        assert_eq!(lag_bucket(Duration::from_millis(1)), 1);
        assert_eq!(lag_bucket(Duration::from_millis(2)), 4);
        assert_eq!(lag_bucket(Duration::from_millis(1024)), 40);
        assert_eq!(lag_bucket(Duration::from_millis(1025)), 41);
        assert_eq!(
            lag_bucket(Duration::from_secs(365 * 86_400)),
            MAX_LAG_BUCKET
        );
        for ms in [3u64, 17, 250, 999, 60_000, 3_600_000] {
            let upper = lag_bucket_upper_ms(lag_bucket(Duration::from_millis(ms)));
            assert!(
                upper >= ms && upper as f64 <= ms as f64 * 1.19 + 1.0,
                "{ms} -> {upper}"
            );
        }
    }

    #[test]
    fn quantiles_read_the_bucket_of_the_ranked_job() {
        let mut lag = LagHistogram::new();
        assert_eq!(lag.quantile(0.5), None);
        for ms in [1u64, 1, 1, 1, 1, 1, 1, 1, 1, 1000] {
            lag.record(Duration::from_millis(ms));
        }
        assert_eq!(lag.quantile(0.5), Some(Duration::from_millis(1)));
        assert_eq!(lag.quantile(0.99), Some(Duration::from_millis(1024)));
        let mut twice = lag.clone();
        twice.merge(&lag);
        assert_eq!(twice.total(), 20);
    }

    #[test]
    fn a_depth_replaces_and_lags_add() {
        let queue = QueueName::new("q").unwrap();
        let minute = crate::minute_of(Utc::now());
        let mut first = QueueSample::new(queue.clone(), minute);
        first.lag.record(Duration::from_millis(5));
        first.depth = Some(Depth {
            pending: 1,
            scheduled: 2,
            running: 3,
        });
        let mut later = QueueSample::new(queue, minute);
        later.lag.record(Duration::from_millis(5));
        first.merge(&later);
        assert_eq!(first.lag.total(), 2);
        assert_eq!(first.depth.map(|d| d.running), Some(3));
        later.depth = Some(Depth::default());
        first.merge(&later);
        assert_eq!(first.depth, Some(Depth::default()));
    }

    #[test]
    fn a_minute_that_is_not_whole_is_refused() {
        let queue = QueueName::new("q").unwrap();
        let at = DateTime::from_timestamp(120, 5).unwrap();
        let err = validate_samples(&[QueueSample::new(queue, at)]).unwrap_err();
        assert!(err.to_string().contains("minute"), "{err}");
    }
}
