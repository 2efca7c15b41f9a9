//! Turning PostgreSQL rows into queue-core types.

use chrono::{DateTime, Utc};
use queue_core::backend::{corrupt, stored, stored_count, stored_optional};
use queue_core::{
    GroupKey, HistoryRecord, Job, JobId, QueueName, Result, TraceContext, UniqueKey, WorkerId,
};
use serde_json::Value;
use sqlx::Row;
use sqlx::postgres::PgRow;

use crate::interpret_error;

fn get<'r, T>(row: &'r PgRow, column: &str) -> Result<T>
where
    T: sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    row.try_get(column).map_err(interpret_error)
}

/// A count column that the schema keeps non-negative.
pub(crate) fn count(row: &PgRow, column: &str) -> Result<u32> {
    stored_count(column, get::<i32>(row, column)?)
}

fn name<T>(row: &PgRow, column: &str, parse: fn(String) -> Result<T>) -> Result<T> {
    stored(column, get(row, column)?, parse)
}

fn optional_name<T>(
    row: &PgRow,
    column: &str,
    parse: fn(String) -> Result<T>,
) -> Result<Option<T>> {
    stored_optional(column, get(row, column)?, parse)
}

/// A `job_queue` row.
pub(crate) fn job(row: &PgRow) -> Result<Job> {
    Ok(Job {
        group_key: optional_name(row, "group_key", GroupKey::new)?,
        id: JobId(get(row, "id")?),
        queue: name(row, "queue_name", QueueName::new)?,
        priority: get(row, "priority")?,
        unique_key: optional_name(row, "unique_key", UniqueKey::new)?,
        payload: get::<Value>(row, "payload")?,
        attempts: count(row, "attempts")?,
        max_attempts: count(row, "max_attempts")?,
        snoozes: count(row, "snoozes")?,
        available_at: get::<DateTime<Utc>>(row, "available_at")?,
        lease_until: get(row, "lease_until")?,
        locked_by: optional_name(row, "locked_by", WorkerId::new)?,
        first_locked_at: get(row, "first_locked_at")?,
        last_error: get(row, "last_error")?,
        created_at: get(row, "created_at")?,
        updated_at: get(row, "updated_at")?,
        trace_context: optional_name(row, "trace_context", TraceContext::from_stored)?,
    })
}

/// A `job_history` row.
pub(crate) fn record(row: &PgRow) -> Result<HistoryRecord> {
    let status: String = get(row, "status_final")?;
    Ok(HistoryRecord {
        group_key: optional_name(row, "group_key", GroupKey::new)?,
        id: JobId(get(row, "id")?),
        queue: name(row, "queue_name", QueueName::new)?,
        priority: get(row, "priority")?,
        unique_key: optional_name(row, "unique_key", UniqueKey::new)?,
        payload: get(row, "payload")?,
        status: status
            .parse()
            .map_err(|_| corrupt("status_final", &status))?,
        result: get(row, "result")?,
        last_error: get(row, "last_error")?,
        attempts: count(row, "attempts")?,
        max_attempts: count(row, "max_attempts")?,
        snoozes: count(row, "snoozes")?,
        processed_by: optional_name(row, "processed_by", WorkerId::new)?,
        created_at: get(row, "created_at")?,
        started_at: get(row, "started_at")?,
        finished_at: get(row, "finished_at")?,
        trace_context: optional_name(row, "trace_context", TraceContext::from_stored)?,
    })
}
