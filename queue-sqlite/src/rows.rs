//! Turning SQLite rows into queue-core types; times are integer microseconds.

use chrono::{DateTime, Utc};
use queue_core::backend::{corrupt, stored, stored_count, stored_instant, stored_optional};
use queue_core::{
    GroupKey, HistoryRecord, Job, JobId, QueueError, QueueName, Result, TraceContext, UniqueKey,
    WorkerId,
};
use serde_json::Value;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use crate::interpret_error;

fn get<'r, T>(row: &'r SqliteRow, column: &str) -> Result<T>
where
    T: sqlx::Decode<'r, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite>,
{
    row.try_get(column).map_err(interpret_error)
}

fn time(row: &SqliteRow, column: &str) -> Result<DateTime<Utc>> {
    stored_instant(column, get(row, column)?)
}

fn optional_time(row: &SqliteRow, column: &str) -> Result<Option<DateTime<Utc>>> {
    get::<Option<i64>>(row, column)?
        .map(|micros| stored_instant("time", micros))
        .transpose()
}

fn count(row: &SqliteRow, column: &str) -> Result<u32> {
    stored_count(column, get::<i64>(row, column)?)
}

fn json(row: &SqliteRow, column: &str) -> Result<Option<Value>> {
    get::<Option<String>>(row, column)?
        .map(|text| serde_json::from_str(&text).map_err(QueueError::Serialization))
        .transpose()
}

fn name<T>(row: &SqliteRow, column: &str, parse: fn(String) -> Result<T>) -> Result<T> {
    stored(column, get(row, column)?, parse)
}

fn optional_name<T>(
    row: &SqliteRow,
    column: &str,
    parse: fn(String) -> Result<T>,
) -> Result<Option<T>> {
    stored_optional(column, get(row, column)?, parse)
}

/// A `job_queue` row.
pub(crate) fn job(row: &SqliteRow) -> Result<Job> {
    Ok(Job {
        id: JobId(get(row, "id")?),
        queue: name(row, "queue_name", QueueName::new)?,
        priority: get(row, "priority")?,
        unique_key: optional_name(row, "unique_key", UniqueKey::new)?,
        group_key: optional_name(row, "group_key", GroupKey::new)?,
        payload: json(row, "payload")?.unwrap_or(Value::Null),
        attempts: count(row, "attempts")?,
        max_attempts: count(row, "max_attempts")?,
        snoozes: count(row, "snoozes")?,
        available_at: time(row, "available_at")?,
        lease_until: optional_time(row, "lease_until")?,
        locked_by: optional_name(row, "locked_by", WorkerId::new)?,
        first_locked_at: optional_time(row, "first_locked_at")?,
        last_error: json(row, "last_error")?,
        created_at: time(row, "created_at")?,
        updated_at: time(row, "updated_at")?,
        trace_context: optional_name(row, "trace_context", TraceContext::from_stored)?,
    })
}

/// A `job_history` row.
pub(crate) fn record(row: &SqliteRow) -> Result<HistoryRecord> {
    let status: String = get(row, "status_final")?;
    Ok(HistoryRecord {
        id: JobId(get(row, "id")?),
        queue: name(row, "queue_name", QueueName::new)?,
        priority: get(row, "priority")?,
        unique_key: optional_name(row, "unique_key", UniqueKey::new)?,
        group_key: optional_name(row, "group_key", GroupKey::new)?,
        payload: json(row, "payload")?.unwrap_or(Value::Null),
        status: status
            .parse()
            .map_err(|_| corrupt("status_final", &status))?,
        result: json(row, "result")?,
        last_error: json(row, "last_error")?,
        attempts: count(row, "attempts")?,
        max_attempts: count(row, "max_attempts")?,
        snoozes: count(row, "snoozes")?,
        processed_by: optional_name(row, "processed_by", WorkerId::new)?,
        created_at: time(row, "created_at")?,
        started_at: optional_time(row, "started_at")?,
        finished_at: time(row, "finished_at")?,
        trace_context: optional_name(row, "trace_context", TraceContext::from_stored)?,
    })
}
