//! Turning what the scripts return (`[id, field, value, ...]` of a job or
//! history hash) into queue-core types; times are integer microseconds.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use queue_core::backend::{corrupt, stored, stored_count, stored_instant, stored_optional};
use queue_core::{
    FinalStatus, GroupKey, HistoryRecord, Job, JobId, QueueError, QueueName, Result, TraceContext,
    UniqueKey, WorkerId,
};
use serde_json::Value;

/// A queue name read back from the registry.
pub(crate) fn queue_name(raw: String) -> Result<QueueName> {
    stored("queue_name", raw, QueueName::new)
}

/// An integer the scripts wrote as decimal text.
pub(crate) fn integer(field: &str, raw: &str) -> Result<i64> {
    raw.parse().map_err(|_| corrupt(field, format!("{raw:?}")))
}

/// A job id as the scripts carry it.
pub(crate) fn job_id(raw: &str) -> Result<JobId> {
    integer("id", raw).map(JobId)
}

/// The fields of one hash, after its id.
struct Fields<'a> {
    map: HashMap<&'a str, &'a str>,
}

impl<'a> Fields<'a> {
    fn new(pairs: &'a [String]) -> Self {
        Self {
            map: pairs
                .chunks_exact(2)
                .map(|pair| (pair[0].as_str(), pair[1].as_str()))
                .collect(),
        }
    }

    fn optional(&self, field: &str) -> Option<&'a str> {
        self.map.get(field).copied()
    }

    fn required(&self, field: &str) -> Result<&'a str> {
        self.optional(field)
            .ok_or_else(|| corrupt(field, "nothing (the field is missing)"))
    }

    fn int(&self, field: &str) -> Result<i64> {
        integer(field, self.required(field)?)
    }

    fn count(&self, field: &str) -> Result<u32> {
        stored_count(field, self.int(field)?)
    }

    /// Absent until the first snooze.
    fn snoozes(&self) -> Result<u32> {
        match self.optional("snoozes") {
            Some(raw) => stored_count("snoozes", integer("snoozes", raw)?),
            None => Ok(0),
        }
    }

    fn priority(&self) -> Result<i32> {
        let raw = self.int("priority")?;
        i32::try_from(raw).map_err(|_| corrupt("priority", raw))
    }

    fn time(&self, field: &str) -> Result<DateTime<Utc>> {
        stored_instant(field, self.int(field)?)
    }

    fn optional_time(&self, field: &str) -> Result<Option<DateTime<Utc>>> {
        self.optional(field)
            .map(|raw| stored_instant(field, integer(field, raw)?))
            .transpose()
    }

    fn json(&self, field: &str) -> Result<Option<Value>> {
        self.optional(field)
            .map(|text| serde_json::from_str(text).map_err(QueueError::Serialization))
            .transpose()
    }

    fn payload(&self) -> Result<Value> {
        self.json("payload")?
            .ok_or_else(|| corrupt("payload", "nothing (the field is missing)"))
    }

    fn name<T>(&self, field: &str, parse: fn(String) -> Result<T>) -> Result<Option<T>> {
        stored_optional(field, self.optional(field).map(str::to_owned), parse)
    }
}

/// Splits `[id, field, value, ...]` into the id and the fields.
fn split(row: &[String]) -> Result<(JobId, Fields<'_>)> {
    let (id, pairs) = row
        .split_first()
        .ok_or_else(|| QueueError::backend("a script returned an empty row"))?;
    Ok((job_id(id)?, Fields::new(pairs)))
}

/// A live job of `queue` from `[id, field, value, ...]`.
pub(crate) fn job(queue: &QueueName, row: &[String]) -> Result<Job> {
    let (id, f) = split(row)?;
    Ok(Job {
        group_key: f.name("group_key", GroupKey::new)?,
        id,
        queue: queue.clone(),
        priority: f.priority()?,
        unique_key: f.name("unique_key", UniqueKey::new)?,
        payload: f.payload()?,
        attempts: f.count("attempts")?,
        max_attempts: f.count("max_attempts")?,
        snoozes: f.snoozes()?,
        available_at: f.time("available_at")?,
        lease_until: f.optional_time("lease_until")?,
        locked_by: f.name("locked_by", WorkerId::new)?,
        first_locked_at: f.optional_time("first_locked_at")?,
        last_error: f.json("last_error")?,
        created_at: f.time("created_at")?,
        updated_at: f.time("updated_at")?,
        trace_context: f.name("trace_context", TraceContext::from_stored)?,
    })
}

/// The jobs a dequeue script claimed from `queue` for `worker`, each with
/// its effective priority in the claim (its priority but on an aging
/// queue): the answer (see `scripts/dequeue.lua`) is empty, or a header
/// `[now, lease_until]` followed by one positional row per job.
pub(crate) fn claimed(
    queue: &QueueName,
    worker: &WorkerId,
    answer: &[Vec<String>],
) -> Result<Vec<(i64, Job)>> {
    let Some((header, rows)) = answer.split_first() else {
        return Ok(Vec::new());
    };
    let [now, until] = header.as_slice() else {
        return Err(QueueError::backend(format!(
            "the dequeue script answered a header of {} fields",
            header.len()
        )));
    };
    let updated_at = stored_instant("updated_at", integer("updated_at", now)?)?;
    let lease_until = stored_instant("lease_until", integer("lease_until", until)?)?;
    rows.iter()
        .map(|row| {
            let [
                id,
                priority,
                unique_key,
                payload,
                attempts,
                max_attempts,
                snoozes,
                available_at,
                first_locked_at,
                last_error,
                created_at,
                trace_context,
                group_key,
                effective,
            ] = row.as_slice()
            else {
                return Err(QueueError::backend(format!(
                    "the dequeue script answered a row of {} fields",
                    row.len()
                )));
            };
            let time = |field: &str, raw: &str| stored_instant(field, integer(field, raw)?);
            let count = |field: &str, raw: &str| stored_count(field, integer(field, raw)?);
            let priority = integer("priority", priority)?;
            let effective = integer("effective priority", effective)?;
            let job = Job {
                group_key: stored_optional(
                    "group_key",
                    (!group_key.is_empty()).then(|| group_key.clone()),
                    GroupKey::new,
                )?,
                id: job_id(id)?,
                queue: queue.clone(),
                priority: i32::try_from(priority).map_err(|_| corrupt("priority", priority))?,
                unique_key: stored_optional(
                    "unique_key",
                    (!unique_key.is_empty()).then(|| unique_key.clone()),
                    UniqueKey::new,
                )?,
                payload: serde_json::from_str(payload).map_err(QueueError::Serialization)?,
                attempts: count("attempts", attempts)?,
                max_attempts: count("max_attempts", max_attempts)?,
                snoozes: count("snoozes", snoozes)?,
                available_at: time("available_at", available_at)?,
                lease_until: Some(lease_until),
                locked_by: Some(worker.clone()),
                first_locked_at: Some(time("first_locked_at", first_locked_at)?),
                last_error: (!last_error.is_empty())
                    .then(|| serde_json::from_str(last_error).map_err(QueueError::Serialization))
                    .transpose()?,
                created_at: time("created_at", created_at)?,
                updated_at,
                trace_context: stored_optional(
                    "trace_context",
                    (!trace_context.is_empty()).then(|| trace_context.clone()),
                    TraceContext::from_stored,
                )?,
            };
            Ok((effective, job))
        })
        .collect()
}

/// A history row of `queue` from `[id, field, value, ...]`.
pub(crate) fn record(queue: &QueueName, row: &[String]) -> Result<HistoryRecord> {
    let (id, f) = split(row)?;
    let status = f.required("status")?;
    Ok(HistoryRecord {
        group_key: f.name("group_key", GroupKey::new)?,
        id,
        queue: queue.clone(),
        priority: f.priority()?,
        unique_key: f.name("unique_key", UniqueKey::new)?,
        payload: f.payload()?,
        status: status
            .parse::<FinalStatus>()
            .map_err(|_| corrupt("status", format!("{status:?}")))?,
        result: f.json("result")?,
        last_error: f.json("last_error")?,
        attempts: f.count("attempts")?,
        max_attempts: f.count("max_attempts")?,
        snoozes: f.snoozes()?,
        processed_by: f.name("processed_by", WorkerId::new)?,
        created_at: f.time("created_at")?,
        // A history row is the job's hash renamed: started_at is its first claim.
        started_at: f.optional_time("first_locked_at")?,
        finished_at: f.time("finished_at")?,
        trace_context: f.name("trace_context", TraceContext::from_stored)?,
    })
}
