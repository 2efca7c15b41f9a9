//! Ack, nack, release and snooze: finishing or putting off an attempt, in a
//! transaction of ours or nested (as a savepoint) in the caller's, together
//! with the handler's writes.

use std::collections::HashSet;

use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use queue_core::time::validate_duration;
use queue_core::{Ack, FinalStatus, Lease, NackOutcome, QueueError, Result, Retry};
use serde_json::Value;

use queue_core::backend::{LeaseKey, acked_one, first_mentions, one_ack};

use crate::bind::{Param, bucket, cached, id_list, query};
use crate::error::{Failure, interpret_failure};
use crate::lease::{HeldRow, later, lock_leased};
use crate::rows::utc;
use crate::sql::{self, NACK_RETRY, RELEASE, SNOOZE};
use crate::{MySqlStorage, workflow};

/// Copies live rows into history as `dead_letter` with `error`, then
/// deletes them and counts the finish of those of `linked` (the ones with
/// dependants).
pub(crate) async fn dead_letter(
    conn: &mut AsyncMysqlConnection,
    ids: &[i64],
    linked: &[i64],
    error: Option<String>,
    now: chrono::NaiveDateTime,
) -> Result<(), Failure> {
    let mut params = vec![Param::OptText(error), Param::Time(now)];
    params.extend(ids.iter().map(|id| Param::Int(*id)));
    query(&sql::nack_dead_letter(ids.len()), params)
        .execute(conn)
        .await?;
    finish_live(conn, ids, linked, FinalStatus::DeadLetter, now).await
}

/// Deletes live rows already copied to history as `status` at `now`, and
/// counts the finish of those of `linked` (the ones that have dependants
/// or wait, as the caller's locking read found them) for the jobs waiting
/// on them ([`workflow::finish`]): every path that archives live jobs
/// ends here.
pub(crate) async fn finish_live(
    conn: &mut AsyncMysqlConnection,
    ids: &[i64],
    linked: &[i64],
    status: FinalStatus,
    now: chrono::NaiveDateTime,
) -> Result<(), Failure> {
    delete_live(conn, ids).await?;
    if linked.is_empty() {
        return Ok(());
    }
    workflow::finish(conn, now, linked, status).await
}

/// Deletes live rows already copied to history (see [`finish_live`]).
pub(crate) async fn delete_live(
    conn: &mut AsyncMysqlConnection,
    ids: &[i64],
) -> Result<(), Failure> {
    let ids = id_list(ids);
    cached(
        sql::delete_live(ids.len()),
        ids.iter().map(|id| Param::Int(*id)).collect(),
    )
    .execute(conn)
    .await?;
    Ok(())
}

impl MySqlStorage {
    /// Acks `lease` on the caller's connection: inside the caller's
    /// diesel-async transaction the history row and the caller's writes
    /// commit or roll back together.
    ///
    /// # Errors
    /// [`QueueError::LeaseLost`] when the lease is not current (nothing changed).
    pub async fn ack_in(
        &self,
        conn: &mut AsyncMysqlConnection,
        lease: &Lease,
        result: Option<Value>,
    ) -> Result<()> {
        let acks = one_ack(lease, result);
        let acked = conn
            .transaction(async |conn| self.ack_on(conn, &acks).await)
            .await
            .map_err(interpret_failure)?;
        acked_one(lease, &acked)
    }

    /// Nacks `lease` on the caller's connection (see [`MySqlStorage::ack_in`]).
    ///
    /// # Errors
    /// As [`queue_core::Storage::nack`].
    pub async fn nack_in(
        &self,
        conn: &mut AsyncMysqlConnection,
        lease: &Lease,
        error: Value,
        retry: Retry,
    ) -> Result<NackOutcome> {
        retry.validate()?;
        conn.transaction(async |conn| self.nack_on(conn, lease, &error, retry).await)
            .await
            .map_err(interpret_failure)?
            .ok_or_else(|| QueueError::LeaseLost {
                lease: lease.clone(),
            })
    }

    pub(crate) async fn ack_pooled(&self, acks: &[Ack]) -> Result<Vec<bool>> {
        if acks.is_empty() {
            return Ok(Vec::new());
        }
        self.retrying(false, || async {
            let mut conn = self.connection().await?;
            let guard = self.guard(&mut conn).await?;
            let outcome = conn
                .transaction(async |conn| {
                    guard.open(conn).await?;
                    let acked = self.ack_on(conn, acks).await?;
                    guard.close(conn).await?;
                    Ok(acked)
                })
                .await;
            guard.finish(conn, outcome).await
        })
        .await
    }

    pub(crate) async fn nack_pooled(
        &self,
        lease: &Lease,
        error: &Value,
        retry: Retry,
    ) -> Result<NackOutcome> {
        retry.validate()?;
        self.retrying(false, || async {
            let mut conn = self.connection().await?;
            let guard = self.guard(&mut conn).await?;
            let outcome = conn
                .transaction(async |conn| {
                    guard.open(conn).await?;
                    let nacked = self.nack_on(conn, lease, error, retry).await?;
                    guard.close(conn).await?;
                    Ok(nacked)
                })
                .await;
            guard.finish(conn, outcome).await
        })
        .await?
        .ok_or_else(|| QueueError::LeaseLost {
            lease: lease.clone(),
        })
    }

    /// Locks the acked rows, copies the current ones to history with their
    /// results, deletes them. A lease repeated in the batch counts once.
    async fn ack_on(
        &self,
        conn: &mut AsyncMysqlConnection,
        acks: &[Ack],
    ) -> Result<Vec<bool>, Failure> {
        let keys: Vec<LeaseKey> = acks.iter().map(|a| LeaseKey::of(&a.lease)).collect();
        let held = lock_leased(conn, &keys, None).await?;
        let current: HashSet<_> = held.iter().filter_map(HeldRow::key).collect();
        let linked: Vec<i64> = held
            .iter()
            .filter(|row| row.has_dependants())
            .map(|row| row.id)
            .collect();
        let acked: Vec<bool> = first_mentions(&keys)
            .into_iter()
            .zip(&keys)
            .map(|(first, key)| first && current.contains(key))
            .collect();
        let winners: Vec<&Ack> = acks
            .iter()
            .zip(&acked)
            .filter(|(_, ok)| **ok)
            .map(|(a, _)| a)
            .collect();
        if winners.is_empty() {
            return Ok(acked);
        }
        // The results as a derived table: portable to MySQL 8 and MariaDB.
        // Padded with (NULL, NULL) rows, which join nothing, to few shapes.
        let rows = bucket(winners.len());
        let sql = sql::ack_archive(rows);
        // In the order of the `?`s: finished_at (the server's clock unless a
        // manual one is set: no separate clock read), then the derived table.
        let mut params = Vec::with_capacity(winners.len() * 2 + 1);
        params.push(Param::OptTime(self.now_override()));
        for ack in &winners {
            params.push(Param::OptInt(Some(ack.lease.job_id.get())));
            params.push(Param::OptText(ack.result.as_ref().map(Value::to_string)));
        }
        for _ in winners.len()..rows {
            params.push(Param::OptInt(None));
            params.push(Param::OptText(None));
        }
        cached(sql, params).execute(conn).await?;
        let ids: Vec<i64> = winners.iter().map(|a| a.lease.job_id.get()).collect();
        if linked.is_empty() {
            delete_live(conn, &ids).await?;
        } else {
            // Only a job with dependants reads the clock.
            let now = self.resolve_now(conn).await?;
            finish_live(conn, &ids, &linked, FinalStatus::Completed, now).await?;
        }
        Ok(acked)
    }

    /// `None` when the lease is not current.
    async fn nack_on(
        &self,
        conn: &mut AsyncMysqlConnection,
        lease: &Lease,
        error: &Value,
        retry: Retry,
    ) -> Result<Option<NackOutcome>, Failure> {
        let now = self.resolve_now(conn).await?;
        let key = LeaseKey::of(lease);
        let held = lock_leased(conn, std::slice::from_ref(&key), None).await?;
        let Some(row) = <[HeldRow]>::first(&held) else {
            return Ok(None);
        };
        match retry {
            Retry::After(delay) if row.attempts < row.max_attempts => {
                let at = later(now, delay);
                let params = vec![
                    Param::Text(error.to_string()),
                    Param::Time(at),
                    Param::Time(now),
                    Param::Int(key.id),
                ];
                query(NACK_RETRY, params).execute(conn).await?;
                Ok(Some(NackOutcome::Retrying { at: utc(at) }))
            }
            _ => {
                let linked: &[i64] = if row.has_dependants() { &[key.id] } else { &[] };
                dead_letter(conn, &[key.id], linked, Some(error.to_string()), now).await?;
                Ok(Some(NackOutcome::DeadLettered))
            }
        }
    }

    pub(crate) async fn release_pooled(&self, lease: &Lease) -> Result<bool> {
        let LeaseKey {
            id,
            worker,
            attempt,
        } = LeaseKey::of(lease);
        let now = self.now_override();
        self.retrying(false, || async {
            let mut conn = self.connection().await?;
            let params = vec![
                Param::OptTime(now),
                Param::OptTime(now),
                Param::Int(id),
                Param::Text(worker.clone()),
                Param::Int(i64::from(attempt)),
            ];
            Ok(query(RELEASE, params).execute(&mut conn).await? == 1)
        })
        .await
    }
}

impl MySqlStorage {
    /// Puts the job of a current lease off by `delay` without counting the
    /// attempt (fenced like nack by the lease's id, holder and attempt).
    pub(crate) async fn snooze_pooled(
        &self,
        lease: &Lease,
        delay: std::time::Duration,
    ) -> Result<chrono::DateTime<chrono::Utc>> {
        validate_duration("delay", delay, true)?;
        let LeaseKey {
            id,
            worker,
            attempt,
        } = LeaseKey::of(lease);
        let at = self
            .retrying(false, || async {
                let mut conn = self.connection().await?;
                let now = self.resolve_now(&mut conn).await?;
                let at = later(now, delay);
                let params = vec![
                    Param::Time(at),
                    Param::Time(now),
                    Param::Int(id),
                    Param::Text(worker.clone()),
                    Param::Int(i64::from(attempt)),
                ];
                let done = query(SNOOZE, params).execute(&mut conn).await?;
                Ok((done == 1).then_some(at))
            })
            .await?;
        at.map(utc).ok_or_else(|| QueueError::LeaseLost {
            lease: lease.clone(),
        })
    }
}
