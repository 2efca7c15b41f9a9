//! Samples as rows: what every storage writes for
//! [`crate::Storage::record_samples`] and reads back for
//! [`crate::Storage::samples`], so that none keeps its own copy of the
//! merge rules.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::{Depth, QueueError, QueueName, QueueSample, Result, validate_samples, validate_window};

/// One lag bucket of one queue and minute: a row of a storage's lag table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LagRow {
    /// The queue.
    pub queue: QueueName,
    /// The minute.
    pub minute: DateTime<Utc>,
    /// The bucket ([`crate::lag_bucket`]).
    pub bucket: u8,
    /// Jobs in it (to add to what the row holds).
    pub jobs: i64,
}

/// The depth of one queue in one minute: a row of a storage's depth table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepthRow {
    /// The queue.
    pub queue: QueueName,
    /// The minute.
    pub minute: DateTime<Utc>,
    /// [`Depth::pending`].
    pub pending: i64,
    /// [`Depth::scheduled`].
    pub scheduled: i64,
    /// [`Depth::running`].
    pub running: i64,
}

/// A batch of samples as rows: at most one row per key, sorted by key, so
/// that one statement never names a row twice and two writers lock rows
/// in the same order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SampleRows {
    /// Lag rows, by queue, minute, bucket.
    pub lags: Vec<LagRow>,
    /// Depth rows, by queue, minute.
    pub depths: Vec<DepthRow>,
}

/// Merges samples of the same queue and minute in the order given (lags
/// add up, a later depth replaces an earlier one), drops those that say
/// nothing, and sorts by queue, then minute.
pub fn coalesce_samples(samples: &[QueueSample]) -> Vec<QueueSample> {
    let mut merged: BTreeMap<(QueueName, DateTime<Utc>), QueueSample> = BTreeMap::new();
    for sample in samples.iter().filter(|s| !s.is_empty()) {
        merged
            .entry((sample.queue.clone(), sample.minute))
            .and_modify(|into| into.merge(sample))
            .or_insert_with(|| sample.clone());
    }
    merged.into_values().collect()
}

/// Validates a batch ([`validate_samples`]), coalesces it
/// ([`coalesce_samples`]) and turns it into rows; a count that does not fit
/// a signed 64-bit column is `InvalidInput`. Nothing is written before this
/// returns, so an invalid batch writes nothing.
pub fn sample_rows(samples: &[QueueSample]) -> Result<SampleRows> {
    validate_samples(samples)?;
    let column = |field: &'static str, n: u64| {
        i64::try_from(n).map_err(|_| {
            QueueError::invalid(
                field,
                format!("counts {n}, more than a 64-bit column holds"),
            )
        })
    };
    let mut rows = SampleRows::default();
    for sample in coalesce_samples(samples) {
        for (bucket, jobs) in sample.lag.buckets() {
            rows.lags.push(LagRow {
                queue: sample.queue.clone(),
                minute: sample.minute,
                bucket,
                jobs: column("lag", jobs)?,
            });
        }
        if let Some(depth) = sample.depth {
            rows.depths.push(DepthRow {
                queue: sample.queue.clone(),
                minute: sample.minute,
                pending: column("pending", depth.pending)?,
                scheduled: column("scheduled", depth.scheduled)?,
                running: column("running", depth.running)?,
            });
        }
    }
    Ok(rows)
}

impl SampleRows {
    /// The rows read back as samples, sorted by queue, then minute (rows
    /// may come in any order; a negative count, which no storage writes,
    /// reads as 0).
    pub fn into_samples(self) -> Vec<QueueSample> {
        let mut samples: BTreeMap<(QueueName, DateTime<Utc>), QueueSample> = BTreeMap::new();
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        for row in self.lags {
            sample_of(&mut samples, row.queue, row.minute)
                .lag
                .add_to_bucket(row.bucket, count(row.jobs));
        }
        for row in self.depths {
            sample_of(&mut samples, row.queue, row.minute).depth = Some(Depth {
                pending: count(row.pending),
                scheduled: count(row.scheduled),
                running: count(row.running),
            });
        }
        samples.into_values().filter(|s| !s.is_empty()).collect()
    }
}

fn sample_of(
    samples: &mut BTreeMap<(QueueName, DateTime<Utc>), QueueSample>,
    queue: QueueName,
    minute: DateTime<Utc>,
) -> &mut QueueSample {
    samples
        .entry((queue, minute))
        .or_insert_with_key(|(queue, minute)| QueueSample::new(queue.clone(), *minute))
}

/// One queue's lags of one minute as text: `bucket:jobs` pairs in the
/// order given, separated by spaces (`3:12 7:1`). The form in which a
/// storage keeps or reads a whole histogram as one value (Redis keeps it,
/// SQLite's read aggregates its rows into it), so that a day of samples is
/// a row per queue and minute rather than a row per bucket.
pub fn lag_text(rows: &[LagRow]) -> String {
    let pairs: Vec<String> = rows
        .iter()
        .map(|row| format!("{}:{}", row.bucket, row.jobs))
        .collect();
    pairs.join(" ")
}

impl SampleRows {
    /// Adds the lag rows of `queue` and `minute` that `text` holds in
    /// [`lag_text`]'s form; `None` (and nothing added) when it is not
    /// that form.
    pub fn push_lag_text(
        &mut self,
        queue: &QueueName,
        minute: DateTime<Utc>,
        text: &str,
    ) -> Option<()> {
        let mut rows = Vec::new();
        for pair in text.split(' ') {
            let (bucket, jobs) = pair.split_once(':')?;
            rows.push(LagRow {
                queue: queue.clone(),
                minute,
                bucket: bucket.parse().ok()?,
                jobs: jobs.parse().ok()?,
            });
        }
        self.lags.append(&mut rows);
        Some(())
    }
}

/// The minutes [`crate::Storage::samples`] answers for `window` at `now`:
/// those after the first returned and at most the second. Validates the
/// window as [`crate::Storage::throughput`] does (1 minute to 7 days).
pub fn sample_window(
    now: DateTime<Utc>,
    window: Duration,
) -> Result<(DateTime<Utc>, DateTime<Utc>)> {
    validate_window(window)?;
    let span = chrono::Duration::from_std(window)
        .map_err(|_| QueueError::invalid("window", format!("is {window:?}, too long")))?;
    Ok((now - span, now))
}

/// Samples older than this at `now` may be forgotten
/// ([`crate::SAMPLE_RETENTION`]).
pub fn samples_expire_before(now: DateTime<Utc>) -> DateTime<Utc> {
    now - chrono::Duration::from_std(crate::SAMPLE_RETENTION).unwrap_or(chrono::Duration::days(7))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_text_reads_back_as_the_rows_it_was_written_from() {
        let queue = QueueName::new("q").expect("name");
        let minute = crate::minute_of(Utc::now());
        let row = |bucket, jobs| LagRow {
            queue: queue.clone(),
            minute,
            bucket,
            jobs,
        };
        let rows = vec![row(0, 3), row(17, i64::MAX), row(100, 1)];
        let text = lag_text(&rows);
        assert_eq!(text, format!("0:3 17:{} 100:1", i64::MAX));
        let mut read = SampleRows::default();
        assert_eq!(read.push_lag_text(&queue, minute, &text), Some(()));
        assert_eq!(read.lags, rows);
        for bad in ["", "3", "3:", ":3", "3:x", "300:1", "1:2  3:4", "1:2 3:4 "] {
            let mut read = SampleRows::default();
            assert_eq!(read.push_lag_text(&queue, minute, bad), None, "{bad:?}");
            assert!(read.lags.is_empty(), "{bad:?} adds nothing");
        }
    }
}
