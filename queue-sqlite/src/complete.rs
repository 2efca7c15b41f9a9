//! Ack, nack and release: finishing an attempt, in a write transaction of
//! the storage's own or in the caller's transaction.

use std::collections::HashSet;
use std::time::Duration;

use chrono::{DateTime, Utc};

use queue_core::backend::{LeaseKey, acked_one, first_mentions, json_text, stored_instant};
use queue_core::time::{duration_micros, validate_duration};
use queue_core::{Ack, FinalStatus, JobId, Lease, NackOutcome, QueueError, Result, Retry};
use serde_json::Value;
use sqlx::{AssertSqlSafe, Row, SqliteConnection};

use crate::workflow::{self, Released};
use crate::{SqliteStorage, interpret_error, sql};

impl SqliteStorage {
    /// Acks `lease` on `conn`, typically inside the caller's own
    /// transaction together with the handler's writes.
    pub async fn ack_in(
        &self,
        conn: &mut SqliteConnection,
        lease: &Lease,
        result: Option<Value>,
    ) -> Result<()> {
        let now = self.now_micros();
        let result = result.as_ref().map(json_text).transpose()?;
        // The jobs this releases wake workers at their next poll: the
        // caller's transaction may still roll back.
        let acked = ack_all(conn, now, &[(LeaseKey::of(lease), result)], &mut Vec::new())
            .await
            .map_err(interpret_error)?;
        acked_one(lease, &acked)
    }

    /// Nacks `lease` on `conn`, typically inside the caller's own transaction.
    pub async fn nack_in(
        &self,
        conn: &mut SqliteConnection,
        lease: &Lease,
        error: Value,
        retry: Retry,
    ) -> Result<NackOutcome> {
        retry.validate()?;
        let now = self.now_micros();
        let error = json_text(&error)?;
        nack_one(conn, now, lease, &error, retry, &mut Vec::new())
            .await
            .map_err(interpret_error)?
            .ok_or_else(|| QueueError::LeaseLost {
                lease: lease.clone(),
            })
    }

    pub(crate) async fn ack_pooled(&self, acks: &[Ack]) -> Result<Vec<bool>> {
        if acks.is_empty() {
            return Ok(Vec::new());
        }
        let acks: Vec<(LeaseKey, Option<String>)> = acks
            .iter()
            .map(|ack| {
                let result = ack.result.as_ref().map(json_text).transpose()?;
                Ok((LeaseKey::of(&ack.lease), result))
            })
            .collect::<Result<_>>()?;
        let (acked, released) = write_tx!(self, |conn, now| async {
            let mut released = Released::new();
            let acked = ack_all(conn, now, &acks, &mut released).await?;
            Ok::<_, sqlx::Error>((acked, released))
        })?;
        self.signal_all(&released);
        Ok(acked)
    }

    pub(crate) async fn nack_pooled(
        &self,
        lease: &Lease,
        error: &Value,
        retry: Retry,
    ) -> Result<NackOutcome> {
        retry.validate()?;
        let error = json_text(error)?;
        let (outcome, released) = write_tx!(self, |conn, now| async {
            let mut released = Released::new();
            let outcome = nack_one(conn, now, lease, &error, retry, &mut released).await?;
            Ok::<_, sqlx::Error>((outcome, released))
        })?;
        self.signal_all(&released);
        outcome.ok_or_else(|| QueueError::LeaseLost {
            lease: lease.clone(),
        })
    }

    pub(crate) async fn release_pooled(&self, lease: &Lease) -> Result<bool> {
        let key = &LeaseKey::of(lease);
        let released = write_tx!(self, |conn, now| async {
            let done = sqlx::query(sql::RELEASE)
                .bind(now)
                .bind(key.id)
                .bind(&key.worker)
                .bind(key.attempt)
                .execute(&mut *conn)
                .await?;
            Ok::<_, sqlx::Error>(done.rows_affected() == 1)
        })?;
        Ok(released)
    }
}

impl SqliteStorage {
    pub(crate) async fn snooze_pooled(
        &self,
        lease: &Lease,
        delay: Duration,
    ) -> Result<DateTime<Utc>> {
        validate_duration("delay", delay, true)?;
        let key = &LeaseKey::of(lease);
        let at = write_tx!(self, |conn, now| async {
            let at = now.saturating_add(duration_micros(delay));
            let done = sqlx::query(sql::SNOOZE)
                .bind(now)
                .bind(key.id)
                .bind(&key.worker)
                .bind(key.attempt)
                .bind(at)
                .execute(&mut *conn)
                .await?;
            Ok::<_, sqlx::Error>((done.rows_affected() == 1).then_some(at))
        })?;
        let at = at.ok_or_else(|| QueueError::LeaseLost {
            lease: lease.clone(),
        })?;
        stored_instant("time", at)
    }
}

/// Attempts left on the current `lease`, or `None` when it is lost.
async fn current(conn: &mut SqliteConnection, lease: &Lease) -> Result<Option<i64>, sqlx::Error> {
    let key = LeaseKey::of(lease);
    sqlx::query_scalar(sql::COMPLETE_FIND_LEASE)
        .bind(key.id)
        .bind(&key.worker)
        .bind(key.attempt)
        .fetch_optional(conn)
        .await
}

/// Moves live job `id` to history as `status`, and lets the jobs waiting
/// on it know ([`workflow::finish`]; the queues of those it released go
/// to `released`); false when it is not live.
pub(crate) async fn archive(
    conn: &mut SqliteConnection,
    now: i64,
    id: JobId,
    leaving: Leaving<'_>,
    released: &mut Released,
) -> Result<bool, sqlx::Error> {
    let Leaving {
        status,
        result,
        last_error,
        processed_by,
    } = leaving;
    let moved = move_to_history(conn, now, id, status, result, last_error, processed_by).await?;
    if moved {
        workflow::finish(conn, now, &[id.get()], status, released).await?;
    }
    Ok(moved)
}

/// [`archive`] for several jobs: all of them move to history first, then
/// the jobs waiting on them hear of the finishes, one step per final
/// status, so a job cancelled by several at once names the lowest id
/// (`queue_core::dependency_failed`). The jobs that were live.
pub(crate) async fn archive_all(
    conn: &mut SqliteConnection,
    now: i64,
    jobs: &[(JobId, Leaving<'_>)],
    released: &mut Released,
) -> Result<u64, sqlx::Error> {
    let mut finished: Vec<(FinalStatus, Vec<i64>)> = Vec::new();
    for (id, leaving) in jobs {
        let moved = move_to_history(
            conn,
            now,
            *id,
            leaving.status,
            leaving.result,
            leaving.last_error,
            leaving.processed_by,
        )
        .await?;
        if !moved {
            continue;
        }
        match finished
            .iter_mut()
            .find(|(status, _)| *status == leaving.status)
        {
            Some((_, ids)) => ids.push(id.get()),
            None => finished.push((leaving.status, vec![id.get()])),
        }
    }
    let mut moved = 0;
    for (status, ids) in &finished {
        moved += ids.len() as u64;
        workflow::finish(conn, now, ids, *status, released).await?;
    }
    Ok(moved)
}

/// How a job leaves the live table ([`archive`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Leaving<'a> {
    /// Its final status.
    pub(crate) status: FinalStatus,
    /// The handler's result (completed jobs).
    pub(crate) result: Option<&'a str>,
    /// Replaces the job's last error when set.
    pub(crate) last_error: Option<&'a str>,
    /// The worker that finished it.
    pub(crate) processed_by: Option<&'a str>,
}

impl Leaving<'_> {
    /// An operator's discard or cancel (`status`).
    pub(crate) fn removed(status: FinalStatus) -> Self {
        Self {
            status,
            result: None,
            last_error: None,
            processed_by: None,
        }
    }
}

/// Moves live job `id` to history as `status`; false when it is not live.
pub(crate) async fn move_to_history(
    conn: &mut SqliteConnection,
    now: i64,
    id: JobId,
    status: FinalStatus,
    result: Option<&str>,
    last_error: Option<&str>,
    processed_by: Option<&str>,
) -> Result<bool, sqlx::Error> {
    let moved = sqlx::query(sql::ARCHIVE)
        .bind(now)
        .bind(id.get())
        .bind(status.as_str())
        .bind(result)
        .bind(last_error)
        .bind(processed_by)
        .execute(&mut *conn)
        .await?;
    sqlx::query(sql::DELETE_LIVE)
        .bind(id.get())
        .execute(&mut *conn)
        .await?;
    Ok(moved.rows_affected() == 1)
}

/// Archives each current lease of `acks` as `completed` with its result,
/// then deletes the live rows, a chunk of leases per statement; true for
/// each lease that was current. A lease named twice counts once.
async fn ack_all(
    conn: &mut SqliteConnection,
    now: i64,
    acks: &[(LeaseKey, Option<String>)],
    released: &mut Released,
) -> Result<Vec<bool>, sqlx::Error> {
    let firsts: Vec<&(LeaseKey, Option<String>)> = acks
        .iter()
        .zip(first_mentions(acks.iter().map(|(key, _)| key)))
        .filter_map(|(ack, first)| first.then_some(ack))
        .collect();
    let mut archived: HashSet<LeaseKey> = HashSet::with_capacity(firsts.len());
    for chunk in firsts.chunks(sql::ROWS_PER_STATEMENT) {
        let mut query = sqlx::query(AssertSqlSafe(sql::ack_many(chunk.len())));
        for (key, result) in chunk {
            query = query
                .bind(key.id)
                .bind(key.worker.clone())
                .bind(key.attempt)
                .bind(result.clone());
        }
        let rows = query.bind(now).fetch_all(&mut *conn).await?;
        let mut ids = Vec::with_capacity(rows.len());
        for row in rows {
            let id: i64 = row.try_get("id")?;
            let worker: Option<String> = row.try_get("processed_by")?;
            if let Some(key) = LeaseKey::of_row(id, worker.as_deref(), row.try_get("attempts")?) {
                archived.insert(key);
            }
            ids.push(id);
        }
        if !ids.is_empty() {
            let listed =
                serde_json::to_string(&ids).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
            sqlx::query(sql::DELETE_LIVE_IDS)
                .bind(listed)
                .execute(&mut *conn)
                .await?;
            workflow::finish(conn, now, &ids, FinalStatus::Completed, released).await?;
        }
    }
    // The first ack of an archived lease took it; a repeat finds it gone.
    Ok(acks.iter().map(|(key, _)| archived.remove(key)).collect())
}

async fn nack_one(
    conn: &mut SqliteConnection,
    now: i64,
    lease: &Lease,
    error: &str,
    retry: Retry,
    released: &mut Released,
) -> Result<Option<NackOutcome>, sqlx::Error> {
    let Some(left) = current(conn, lease).await? else {
        return Ok(None);
    };
    match retry {
        Retry::After(delay) if left > 0 => {
            let at = now.saturating_add(duration_micros(delay));
            sqlx::query(sql::NACK_RETRY)
                .bind(now)
                .bind(lease.job_id.get())
                .bind(at)
                .bind(error)
                .execute(&mut *conn)
                .await?;
            let at = stored_instant("time", at).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
            Ok(Some(NackOutcome::Retrying { at }))
        }
        _ => {
            let leaving = Leaving {
                status: FinalStatus::DeadLetter,
                result: None,
                last_error: Some(error),
                processed_by: Some(lease.worker_id.as_str()),
            };
            archive(conn, now, lease.job_id, leaving, released).await?;
            Ok(Some(NackOutcome::DeadLettered))
        }
    }
}
