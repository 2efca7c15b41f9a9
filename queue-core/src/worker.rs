//! The worker registry: what each running worker says about itself, and
//! how a listing tells the live ones from those gone silent.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::time::{to_time_delta, truncate_to_micros, validate_duration, validate_instant};
use crate::{QueueError, QueueName, Result, WorkerId, validate_name};

/// The most queues one worker registers.
pub const MAX_WORKER_QUEUES: usize = 64;

/// The highest concurrency a worker registers for one queue.
pub const MAX_WORKER_CONCURRENCY: u32 = 100_000;

/// The `silent_after` listings use unless told otherwise: four of
/// `queue-worker`'s registrations (every `reclaim_interval`, 15 s by
/// default) missed in a row.
pub const DEFAULT_SILENT_AFTER: Duration = Duration::from_secs(60);

/// The `forget_after` listings use unless told otherwise: a worker silent
/// this long is taken for dead and deleted.
pub const DEFAULT_FORGET_AFTER: Duration = Duration::from_secs(600);

/// One queue a worker consumes and how many of its jobs it runs at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerQueue {
    /// The queue.
    pub queue: QueueName,
    /// Jobs of it the worker runs at once, `1..=MAX_WORKER_CONCURRENCY`.
    pub concurrency: u32,
}

/// What a worker registers about itself ([`crate::Storage::register_worker`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerInfo {
    /// Its identity: the `locked_by` of every job it holds.
    pub id: WorkerId,
    /// The host it runs on (a name, as the host calls itself).
    pub host: String,
    /// Its process id on that host.
    pub pid: u32,
    /// The version of the worker library (or the application) it runs.
    pub version: String,
    /// The queues it consumes, each once, in the worker's order.
    pub queues: Vec<WorkerQueue>,
    /// When it started, by its own clock.
    pub started_at: DateTime<Utc>,
}

impl WorkerInfo {
    /// Checks every field and returns the info as backends store it
    /// (`started_at` to the microsecond).
    ///
    /// # Errors
    /// [`QueueError::InvalidInput`] naming the field: `host` or `version`
    /// breaking the name rules ([`validate_name`]), no queue, more than
    /// [`MAX_WORKER_QUEUES`], one listed twice, a concurrency of 0 or above
    /// [`MAX_WORKER_CONCURRENCY`], `started_at` outside 1970 ..= 9999.
    pub fn validate(&self) -> Result<WorkerInfo> {
        validate_name("host", &self.host)?;
        validate_name("version", &self.version)?;
        if self.queues.is_empty() {
            return Err(QueueError::invalid(
                "queues",
                "must name at least one queue",
            ));
        }
        if self.queues.len() > MAX_WORKER_QUEUES {
            return Err(QueueError::invalid(
                "queues",
                format!(
                    "names {} queues, at most {MAX_WORKER_QUEUES} are allowed",
                    self.queues.len()
                ),
            ));
        }
        for (i, entry) in self.queues.iter().enumerate() {
            if self.queues[..i].iter().any(|e| e.queue == entry.queue) {
                return Err(QueueError::invalid(
                    "queues",
                    format!("names {} twice", entry.queue),
                ));
            }
            if entry.concurrency == 0 || entry.concurrency > MAX_WORKER_CONCURRENCY {
                return Err(QueueError::invalid(
                    "concurrency",
                    format!(
                        "is {} for queue {}, it must be 1..={MAX_WORKER_CONCURRENCY}",
                        entry.concurrency, entry.queue
                    ),
                ));
            }
        }
        validate_instant("started_at", self.started_at)?;
        Ok(WorkerInfo {
            started_at: truncate_to_micros(self.started_at),
            ..self.clone()
        })
    }

    /// The queues as the JSON text SQL backends store in one column.
    pub fn queues_json(&self) -> String {
        serde_json::to_string(&self.queues).unwrap_or_else(|_| "[]".into())
    }

    /// A worker read back from a backend's columns, each checked: the
    /// queues as the JSON text of [`WorkerInfo::queues_json`], the pid as
    /// the integer the column holds.
    ///
    /// # Errors
    /// [`crate::backend::corrupt`] naming the column that holds what the
    /// queue never writes.
    pub fn from_columns(
        id: String,
        host: String,
        pid: i64,
        version: String,
        queues: &str,
        started_at: DateTime<Utc>,
    ) -> Result<WorkerInfo> {
        use crate::backend::{corrupt, stored};
        let queues: Vec<WorkerQueue> =
            serde_json::from_str(queues).map_err(|_| corrupt("queues", queues))?;
        Ok(WorkerInfo {
            id: stored("worker_id", id, WorkerId::new)?,
            host,
            pid: u32::try_from(pid).map_err(|_| corrupt("pid", pid))?,
            version,
            queues,
            started_at,
        })
    }
}

/// Whether a registered worker was heard from lately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerStatus {
    /// Registered or refreshed less than `silent_after` ago.
    Live,
    /// Not refreshed for `silent_after` or longer (killed, hung, cut
    /// off), but not yet forgotten.
    Silent,
}

impl WorkerStatus {
    /// `live` or `silent`.
    pub const fn name(self) -> &'static str {
        match self {
            WorkerStatus::Live => "live",
            WorkerStatus::Silent => "silent",
        }
    }
}

/// One registered worker as [`crate::Storage::list_workers`] answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerRecord {
    /// What it registered last.
    #[serde(flatten)]
    pub info: WorkerInfo,
    /// The storage's now at its last registration (its heartbeat).
    pub last_seen: DateTime<Utc>,
    /// Live or silent at the listing's now.
    pub status: WorkerStatus,
}

/// The two ages of a [`crate::Storage::list_workers`] call, checked, with
/// the cut-offs a backend compares `last_seen` against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerAges {
    /// `last_seen` at or before this: silent.
    pub silent_before: DateTime<Utc>,
    /// `last_seen` at or before this: forgotten (deleted, not listed).
    pub forget_before: DateTime<Utc>,
}

impl WorkerAges {
    /// The cut-offs at `now`.
    ///
    /// # Errors
    /// [`QueueError::InvalidInput`]: `silent_after` zero or too long
    /// ([`crate::time::validate_duration`]), `forget_after` shorter than
    /// `silent_after` or too long.
    pub fn at(now: DateTime<Utc>, silent_after: Duration, forget_after: Duration) -> Result<Self> {
        Self::validate(silent_after, forget_after)?;
        Ok(Self {
            silent_before: truncate_to_micros(now - to_time_delta(silent_after)),
            forget_before: truncate_to_micros(now - to_time_delta(forget_after)),
        })
    }

    /// Checks the ages alone, before a backend reads its now.
    ///
    /// # Errors
    /// As [`WorkerAges::at`].
    pub fn validate(silent_after: Duration, forget_after: Duration) -> Result<()> {
        validate_duration("silent_after", silent_after, false)?;
        validate_duration("forget_after", forget_after, false)?;
        if forget_after < silent_after {
            return Err(QueueError::invalid(
                "forget_after",
                "must be at least silent_after",
            ));
        }
        Ok(())
    }

    /// Whether a worker last seen at `last_seen` is forgotten.
    pub fn forgotten(&self, last_seen: DateTime<Utc>) -> bool {
        last_seen <= self.forget_before
    }

    /// The status of a worker last seen at `last_seen` (not forgotten).
    pub fn status(&self, last_seen: DateTime<Utc>) -> WorkerStatus {
        if last_seen <= self.silent_before {
            WorkerStatus::Silent
        } else {
            WorkerStatus::Live
        }
    }

    /// `info` listed with its `last_seen` and the status it gives.
    pub fn record(&self, info: WorkerInfo, last_seen: DateTime<Utc>) -> WorkerRecord {
        WorkerRecord {
            info,
            last_seen,
            status: self.status(last_seen),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> WorkerInfo {
        WorkerInfo {
            id: WorkerId::new("w").unwrap(),
            host: "h".into(),
            pid: 1,
            version: "0.1.0".into(),
            queues: vec![WorkerQueue {
                queue: QueueName::new("q").unwrap(),
                concurrency: 2,
            }],
            started_at: DateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn validation_names_the_field() {
        assert!(info().validate().is_ok());
        let field = |info: WorkerInfo| info.validate().unwrap_err().invalid_field();
        assert_eq!(
            field(WorkerInfo {
                host: String::new(),
                ..info()
            }),
            Some("host")
        );
        assert_eq!(
            field(WorkerInfo {
                version: " 1".into(),
                ..info()
            }),
            Some("version")
        );
        assert_eq!(
            field(WorkerInfo {
                queues: vec![],
                ..info()
            }),
            Some("queues")
        );
        let mut twice = info();
        twice.queues.push(twice.queues[0].clone());
        assert_eq!(field(twice), Some("queues"));
        let mut idle = info();
        idle.queues[0].concurrency = 0;
        assert_eq!(field(idle), Some("concurrency"));
    }

    #[test]
    fn ages_split_live_silent_and_forgotten() {
        let now = DateTime::UNIX_EPOCH + chrono::TimeDelta::hours(1);
        let ages = WorkerAges::at(now, Duration::from_secs(10), Duration::from_secs(60)).unwrap();
        let ago = |s| now - chrono::TimeDelta::seconds(s);
        assert_eq!(ages.status(ago(9)), WorkerStatus::Live);
        assert_eq!(ages.status(ago(10)), WorkerStatus::Silent);
        assert!(!ages.forgotten(ago(59)));
        assert!(ages.forgotten(ago(60)));
        let short = WorkerAges::at(now, Duration::from_secs(10), Duration::from_secs(9));
        assert_eq!(short.unwrap_err().invalid_field(), Some("forget_after"));
    }
}
