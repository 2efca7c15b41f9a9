//! Rows as MySQL returns them, and their conversion to queue-core types.
//!
//! JSON columns are selected as `CAST(col AS CHAR)`: MySQL 8 sends native
//! JSON, MariaDB a LONGTEXT, and both read the same as text. DATETIME(6)
//! columns hold UTC and come back as naive values.

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Datetime, Integer, Nullable, Text};
use queue_core::backend::{corrupt, stored, stored_count, stored_optional};
use queue_core::{
    GroupKey, HistoryRecord, Job, JobId, QueueName, Result, TraceContext, UniqueKey, WorkerId,
};
use serde_json::Value;

/// The select list of a live job, matching [`JobRow`].
pub(crate) const JOB_SELECT: &str = "id, queue_name, priority, unique_key, \
     CAST(payload AS CHAR) AS payload, attempts, max_attempts, available_at, lease_until, \
     locked_by, first_locked_at, CAST(last_error AS CHAR) AS last_error, created_at, updated_at, \
     snoozes, trace_context, group_key";

/// The select list of a history row, matching [`HistoryRow`].
pub(crate) const HISTORY_SELECT: &str = "id, queue_name, priority, unique_key, \
     CAST(payload AS CHAR) AS payload, status_final, CAST(result AS CHAR) AS result, \
     CAST(last_error AS CHAR) AS last_error, attempts, max_attempts, processed_by, created_at, \
     started_at, finished_at, snoozes, trace_context, group_key";

#[derive(QueryableByName, Debug)]
pub(crate) struct JobRow {
    #[diesel(sql_type = BigInt)]
    pub(crate) id: i64,
    #[diesel(sql_type = Text)]
    pub(crate) queue_name: String,
    #[diesel(sql_type = Integer)]
    pub(crate) priority: i32,
    #[diesel(sql_type = Nullable<Text>)]
    pub(crate) unique_key: Option<String>,
    #[diesel(sql_type = Text)]
    pub(crate) payload: String,
    #[diesel(sql_type = Integer)]
    pub(crate) attempts: i32,
    #[diesel(sql_type = Integer)]
    pub(crate) max_attempts: i32,
    #[diesel(sql_type = Datetime)]
    pub(crate) available_at: NaiveDateTime,
    #[diesel(sql_type = Nullable<Datetime>)]
    pub(crate) lease_until: Option<NaiveDateTime>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(crate) locked_by: Option<String>,
    #[diesel(sql_type = Nullable<Datetime>)]
    pub(crate) first_locked_at: Option<NaiveDateTime>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(crate) last_error: Option<String>,
    #[diesel(sql_type = Datetime)]
    pub(crate) created_at: NaiveDateTime,
    #[diesel(sql_type = Datetime)]
    pub(crate) updated_at: NaiveDateTime,
    #[diesel(sql_type = Integer)]
    pub(crate) snoozes: i32,
    #[diesel(sql_type = Nullable<Text>)]
    pub(crate) trace_context: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(crate) group_key: Option<String>,
}

#[derive(QueryableByName, Debug)]
pub(crate) struct HistoryRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Text)]
    queue_name: String,
    #[diesel(sql_type = Integer)]
    priority: i32,
    #[diesel(sql_type = Nullable<Text>)]
    unique_key: Option<String>,
    #[diesel(sql_type = Text)]
    payload: String,
    #[diesel(sql_type = Text)]
    status_final: String,
    #[diesel(sql_type = Nullable<Text>)]
    result: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    last_error: Option<String>,
    #[diesel(sql_type = Integer)]
    attempts: i32,
    #[diesel(sql_type = Integer)]
    max_attempts: i32,
    #[diesel(sql_type = Nullable<Text>)]
    processed_by: Option<String>,
    #[diesel(sql_type = Datetime)]
    created_at: NaiveDateTime,
    #[diesel(sql_type = Nullable<Datetime>)]
    started_at: Option<NaiveDateTime>,
    #[diesel(sql_type = Datetime)]
    finished_at: NaiveDateTime,
    #[diesel(sql_type = Integer)]
    snoozes: i32,
    #[diesel(sql_type = Nullable<Text>)]
    trace_context: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    group_key: Option<String>,
}

/// A row holding one id.
#[derive(QueryableByName, Debug)]
pub(crate) struct IdRow {
    #[diesel(sql_type = BigInt)]
    pub(crate) id: i64,
}

/// A row holding one instant (`now_ts`).
#[derive(QueryableByName, Debug)]
pub(crate) struct NowRow {
    #[diesel(sql_type = Datetime)]
    pub(crate) now_ts: NaiveDateTime,
}

fn json(column: &str, raw: &str) -> Result<Value> {
    serde_json::from_str(raw).map_err(|e| corrupt(column, format!("invalid JSON ({e})")))
}

fn optional_json(column: &str, raw: Option<String>) -> Result<Option<Value>> {
    raw.map(|raw| json(column, &raw)).transpose()
}

/// A stored DATETIME(6), which holds UTC.
pub(crate) fn utc(at: NaiveDateTime) -> DateTime<Utc> {
    at.and_utc()
}

impl JobRow {
    pub(crate) fn into_job(self) -> Result<Job> {
        Ok(Job {
            group_key: stored_optional("group_key", self.group_key, GroupKey::new)?,
            id: JobId(self.id),
            queue: stored("queue_name", self.queue_name, QueueName::new)?,
            priority: self.priority,
            unique_key: stored_optional("unique_key", self.unique_key, UniqueKey::new)?,
            payload: json("payload", &self.payload)?,
            attempts: stored_count("attempts", self.attempts)?,
            max_attempts: stored_count("max_attempts", self.max_attempts)?,
            snoozes: stored_count("snoozes", self.snoozes)?,
            available_at: utc(self.available_at),
            lease_until: self.lease_until.map(utc),
            locked_by: stored_optional("locked_by", self.locked_by, WorkerId::new)?,
            first_locked_at: self.first_locked_at.map(utc),
            last_error: optional_json("last_error", self.last_error)?,
            created_at: utc(self.created_at),
            updated_at: utc(self.updated_at),
            trace_context: stored_optional(
                "trace_context",
                self.trace_context,
                TraceContext::from_stored,
            )?,
        })
    }
}

impl HistoryRow {
    pub(crate) fn into_record(self) -> Result<HistoryRecord> {
        Ok(HistoryRecord {
            group_key: stored_optional("group_key", self.group_key, GroupKey::new)?,
            id: JobId(self.id),
            queue: stored("queue_name", self.queue_name, QueueName::new)?,
            priority: self.priority,
            unique_key: stored_optional("unique_key", self.unique_key, UniqueKey::new)?,
            payload: json("payload", &self.payload)?,
            status: self
                .status_final
                .parse()
                .map_err(|_| corrupt("status_final", &self.status_final))?,
            result: optional_json("result", self.result)?,
            last_error: optional_json("last_error", self.last_error)?,
            attempts: stored_count("attempts", self.attempts)?,
            max_attempts: stored_count("max_attempts", self.max_attempts)?,
            snoozes: stored_count("snoozes", self.snoozes)?,
            processed_by: stored_optional("processed_by", self.processed_by, WorkerId::new)?,
            created_at: utc(self.created_at),
            started_at: self.started_at.map(utc),
            finished_at: utc(self.finished_at),
            trace_context: stored_optional(
                "trace_context",
                self.trace_context,
                TraceContext::from_stored,
            )?,
        })
    }
}
