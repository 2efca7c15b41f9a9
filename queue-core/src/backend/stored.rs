//! Values read back from a backend's own columns, checked on the way in,
//! and the JSON text a backend without a JSON type writes.

use std::fmt::Display;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::{QueueError, Result};

/// The error for a column holding something the queue never writes (a
/// hand edit, another program, or a bug): [`QueueError::Backend`] naming
/// the column and the value.
pub fn corrupt(column: &str, value: impl Display) -> QueueError {
    QueueError::backend(format!(
        "column {column} holds {value}, which the queue never writes"
    ))
}

/// A validated name read from `column` (queue name, unique key, worker id):
/// `parse` is the type's constructor, e.g. `QueueName::new`.
///
/// # Errors
/// [`corrupt`] when `raw` is not a valid name.
pub fn stored<T>(column: &str, raw: String, parse: fn(String) -> Result<T>) -> Result<T> {
    parse(raw.clone()).map_err(|_| corrupt(column, format!("{raw:?}")))
}

/// [`stored`] for a nullable column.
///
/// # Errors
/// [`corrupt`] when `raw` is set but not a valid name.
pub fn stored_optional<T>(
    column: &str,
    raw: Option<String>,
    parse: fn(String) -> Result<T>,
) -> Result<Option<T>> {
    raw.map(|raw| stored(column, raw, parse)).transpose()
}

/// A count column the schema keeps non-negative (attempts, max attempts).
///
/// # Errors
/// [`corrupt`] when `value` is negative or above `u32::MAX`.
pub fn stored_count<V>(column: &str, value: V) -> Result<u32>
where
    V: TryInto<u32> + Display + Copy,
{
    value.try_into().map_err(|_| corrupt(column, value))
}

/// An instant a backend stores as microseconds since the Unix epoch, UTC
/// (SQLite's and Redis's time columns).
///
/// # Errors
/// [`corrupt`] when `micros` is outside what [`DateTime`] represents.
pub fn stored_instant(column: &str, micros: i64) -> Result<DateTime<Utc>> {
    DateTime::from_timestamp_micros(micros).ok_or_else(|| corrupt(column, micros))
}

/// A payload, result or error as JSON text, for a backend that stores JSON
/// as text (SQLite, Redis).
///
/// # Errors
/// [`QueueError::Serialization`] when `value` does not serialize (a map
/// with non-string keys cannot come from a `Value`, so in practice never).
pub fn json_text(value: &Value) -> Result<String> {
    serde_json::to_string(value).map_err(QueueError::Serialization)
}

/// A millisecond column the schema keeps non-negative (a queue's lease and
/// backoff in `queue_config`).
///
/// # Errors
/// [`corrupt`] when `value` is negative.
pub fn stored_millis(column: &str, value: i64) -> Result<std::time::Duration> {
    u64::try_from(value)
        .map(std::time::Duration::from_millis)
        .map_err(|_| corrupt(column, value))
}

#[cfg(test)]
mod tests {
    use super::{stored, stored_count, stored_millis, stored_optional};
    use crate::{QueueError, QueueName};

    #[test]
    fn millis_are_durations_and_negatives_are_corrupt() {
        assert_eq!(
            stored_millis("lease_ms", 45_000).ok(),
            Some(std::time::Duration::from_secs(45))
        );
        assert!(stored_millis("lease_ms", -1).is_err());
    }

    #[test]
    fn valid_values_pass_and_others_name_their_column() {
        assert_eq!(
            stored("queue_name", "emails".into(), QueueName::new)
                .map(|q| q.into_string())
                .ok(),
            Some("emails".into())
        );
        let err = stored("queue_name", String::new(), QueueName::new).expect_err("empty");
        assert!(
            matches!(err, QueueError::Backend(_)) && err.to_string().contains("queue_name"),
            "{err}"
        );
        assert!(
            stored_optional("unique_key", None, QueueName::new)
                .expect("null")
                .is_none()
        );
        assert_eq!(stored_count("attempts", 3_i64).ok(), Some(3));
        assert!(
            stored_count("attempts", -1_i32)
                .expect_err("negative")
                .to_string()
                .contains("-1")
        );
    }
}
