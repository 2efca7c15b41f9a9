//! Time rules shared by every backend: the representable range, microsecond
//! precision, and conversions between `std` durations and chrono.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};

use crate::{QueueError, Result};

/// The longest delay, lease or retention the queue accepts: 100 years.
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// The earliest instant a job may be scheduled at: the Unix epoch.
pub fn min_instant() -> DateTime<Utc> {
    DateTime::UNIX_EPOCH
}

/// The latest instant a job may be scheduled at: the end of year 9999, the
/// end of MySQL's `DATETIME` range.
pub fn max_instant() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59)
        .single()
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// Drops everything below a microsecond: both databases store microseconds.
pub fn truncate_to_micros(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(at.timestamp_micros()).unwrap_or(at)
}

/// A duration as whole microseconds, saturating at `i64::MAX`.
pub fn duration_micros(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

/// Converts to chrono's `TimeDelta`, saturating at its maximum.
pub fn to_time_delta(duration: Duration) -> TimeDelta {
    TimeDelta::from_std(duration).unwrap_or(TimeDelta::MAX)
}

/// Rejects a duration above [`MAX_DURATION`] (and zero unless `allow_zero`).
pub fn validate_duration(field: &'static str, value: Duration, allow_zero: bool) -> Result<()> {
    if !allow_zero && value.is_zero() {
        return Err(QueueError::invalid(field, "must be greater than zero"));
    }
    if value > MAX_DURATION {
        return Err(QueueError::invalid(
            field,
            format!(
                "is {}s, at most {}s (100 years) is allowed",
                value.as_secs(),
                MAX_DURATION.as_secs()
            ),
        ));
    }
    Ok(())
}

/// Rejects an instant outside `[min_instant(), max_instant()]`.
pub fn validate_instant(field: &'static str, value: DateTime<Utc>) -> Result<()> {
    if value < min_instant() || value > max_instant() {
        return Err(QueueError::invalid(
            field,
            format!("{value} is outside 1970-01-01 ..= 9999-12-31"),
        ));
    }
    Ok(())
}
