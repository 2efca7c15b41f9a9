//! Identifiers: job ids and the validated names of queues, keys and workers.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{QueueError, Result};

/// The longest queue name, unique key or worker id, in bytes.
///
/// 191 bytes of utf8mb4 is the most a MySQL InnoDB index prefix takes in
/// every row format, so the limit is the same on every backend.
pub const MAX_NAME_BYTES: usize = 191;

/// The longest group key ([`GroupKey`]), in bytes of UTF-8.
pub const MAX_GROUP_KEY_BYTES: usize = 255;

/// The identity of a job, assigned by the storage at enqueue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub i64);

impl JobId {
    /// The raw database id.
    pub fn get(self) -> i64 {
        self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<i64> for JobId {
    fn from(id: i64) -> Self {
        Self(id)
    }
}

/// Checks one name-like value against the shared rules.
///
/// Rules: not empty, at most [`MAX_NAME_BYTES`] bytes, no control characters,
/// no leading or trailing white space. The last rule exists because MySQL's
/// `utf8mb4_bin` collation ignores trailing spaces when comparing while
/// PostgreSQL does not; forbidding them keeps both backends identical.
pub fn validate_name(field: &'static str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(QueueError::invalid(field, "must not be empty"));
    }
    if value.len() > MAX_NAME_BYTES {
        return Err(QueueError::invalid(
            field,
            format!(
                "is {} bytes long, at most {MAX_NAME_BYTES} are allowed",
                value.len()
            ),
        ));
    }
    if let Some(c) = value.chars().find(|c| c.is_control()) {
        return Err(QueueError::invalid(
            field,
            format!("contains the control character {c:?}"),
        ));
    }
    if value.starts_with(char::is_whitespace) || value.ends_with(char::is_whitespace) {
        return Err(QueueError::invalid(
            field,
            "must not start or end with white space",
        ));
    }
    Ok(())
}

macro_rules! validated_name {
    ($(#[$doc:meta])* $name:ident, $field:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Validates `value` (see [`validate_name`]) and wraps it.
            pub fn new(value: impl Into<String>) -> Result<Self> {
                let value = value.into();
                validate_name($field, &value)?;
                Ok(Self(value))
            }

            /// The name as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The name as an owned string.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<&str> for $name {
            type Error = QueueError;
            fn try_from(value: &str) -> Result<Self> {
                Self::new(value)
            }
        }

        impl TryFrom<String> for $name {
            type Error = QueueError;
            fn try_from(value: String) -> Result<Self> {
                Self::new(value)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                let raw = String::deserialize(d)?;
                Self::new(raw).map_err(serde::de::Error::custom)
            }
        }
    };
}

validated_name!(
    /// The name of a queue: jobs are enqueued into one and workers dequeue from some.
    QueueName,
    "queue"
);
validated_name!(
    /// A caller-chosen key that makes enqueue idempotent within one queue
    /// while a job with that key is live.
    UniqueKey,
    "unique_key"
);
validated_name!(
    /// The name of a periodic schedule: the key under which its fire times
    /// are recorded, so that each one yields exactly one job.
    ScheduleName,
    "schedule"
);
validated_name!(
    /// The identity of a worker process; it holds the leases it claims.
    WorkerId,
    "worker_id"
);

/// The key of the group a job belongs to (a tenant, a customer, an
/// account): a queue's group concurrency limit
/// ([`crate::QueueLimits::group_concurrency`], [`crate::GroupLimit`])
/// caps how many jobs of one group hold a lease at once.
///
/// Rules: not empty, at most [`MAX_GROUP_KEY_BYTES`] bytes of UTF-8, and no
/// NUL character (U+0000), which PostgreSQL's `text` cannot store. Any
/// other character is allowed, white space included, and compared byte for
/// byte.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct GroupKey(String);

impl GroupKey {
    /// Validates `value` (see [`GroupKey`]) and wraps it.
    ///
    /// # Errors
    /// [`QueueError::InvalidInput`] naming `group_key`.
    pub fn new(value: impl Into<String>) -> Result<Self> {
        let value = value.into();
        if value.is_empty() {
            return Err(QueueError::invalid("group_key", "must not be empty"));
        }
        if value.len() > MAX_GROUP_KEY_BYTES {
            return Err(QueueError::invalid(
                "group_key",
                format!(
                    "is {} bytes long, at most {MAX_GROUP_KEY_BYTES} are allowed",
                    value.len()
                ),
            ));
        }
        if value.contains('\0') {
            return Err(QueueError::invalid(
                "group_key",
                "contains the NUL character (U+0000), which PostgreSQL cannot store",
            ));
        }
        Ok(Self(value))
    }

    /// [`GroupKey::new`] from raw bytes, as a command line or a form
    /// receives them: bytes that are not valid UTF-8 are refused.
    ///
    /// # Errors
    /// [`QueueError::InvalidInput`] naming `group_key`.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self> {
        let value = String::from_utf8(bytes)
            .map_err(|e| QueueError::invalid("group_key", format!("is not valid UTF-8: {e}")))?;
        Self::new(value)
    }

    /// The key as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key as an owned string.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for GroupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl AsRef<str> for GroupKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for GroupKey {
    type Error = QueueError;
    fn try_from(value: &str) -> Result<Self> {
        Self::new(value)
    }
}

impl TryFrom<String> for GroupKey {
    type Error = QueueError;
    fn try_from(value: String) -> Result<Self> {
        Self::new(value)
    }
}

impl<'de> Deserialize<'de> for GroupKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::new(raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_key_is_non_empty_utf8_of_at_most_255_bytes_without_nul() {
        let field = |r: Result<GroupKey>| r.expect_err("refused").invalid_field();
        assert_eq!(field(GroupKey::new("")), Some("group_key"));
        assert_eq!(field(GroupKey::new("x".repeat(256))), Some("group_key"));
        assert_eq!(field(GroupKey::new("a\0b")), Some("group_key"));
        assert_eq!(
            field(GroupKey::from_bytes(vec![0xff, 0x41])),
            Some("group_key")
        );
        // 85 three-byte characters: 255 bytes, the most allowed.
        assert!(GroupKey::new("€".repeat(85)).is_ok());
        assert!(GroupKey::new("€".repeat(86)).is_err());
        assert_eq!(
            GroupKey::new(" tenant 7 ").expect("kept").as_str(),
            " tenant 7 "
        );
    }
}
