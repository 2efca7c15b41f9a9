//! Ack, nack and release: finishing an attempt, in a write transaction of
//! the storage's own or in the caller's transaction.

use queue_core::backend::LeaseKey;
use queue_core::time::duration_micros;
use queue_core::{Ack, FinalStatus, JobId, Lease, NackOutcome, QueueError, Result, Retry};
use serde_json::Value;
use sqlx::SqliteConnection;

use crate::rows::{instant, json_text};
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
        let now = self.now_on(conn).await.map_err(interpret_error)?;
        let result = result.as_ref().map(json_text).transpose()?;
        if ack_one(conn, now, lease, result.as_deref())
            .await
            .map_err(interpret_error)?
        {
            Ok(())
        } else {
            Err(QueueError::LeaseLost {
                lease: lease.clone(),
            })
        }
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
        let now = self.now_on(conn).await.map_err(interpret_error)?;
        let error = json_text(&error)?;
        nack_one(conn, now, lease, &error, retry)
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
        let results: Vec<Option<String>> = acks
            .iter()
            .map(|ack| ack.result.as_ref().map(json_text).transpose())
            .collect::<Result<_>>()?;
        write_tx!(self, |conn, now| async {
            let mut acked = Vec::with_capacity(acks.len());
            for (ack, result) in acks.iter().zip(&results) {
                acked.push(ack_one(&mut *conn, now, &ack.lease, result.as_deref()).await?);
            }
            Ok::<_, sqlx::Error>(acked)
        })
    }

    pub(crate) async fn nack_pooled(
        &self,
        lease: &Lease,
        error: &Value,
        retry: Retry,
    ) -> Result<NackOutcome> {
        retry.validate()?;
        let error = json_text(error)?;
        write_tx!(self, |conn, now| nack_one(conn, now, lease, &error, retry))?.ok_or_else(|| {
            QueueError::LeaseLost {
                lease: lease.clone(),
            }
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

/// Moves live job `id` to history as `status`.
pub(crate) async fn archive(
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

async fn ack_one(
    conn: &mut SqliteConnection,
    now: i64,
    lease: &Lease,
    result: Option<&str>,
) -> Result<bool, sqlx::Error> {
    if current(conn, lease).await?.is_none() {
        return Ok(false);
    }
    let worker = lease.worker_id.as_str();
    archive(
        conn,
        now,
        lease.job_id,
        FinalStatus::Completed,
        result,
        None,
        Some(worker),
    )
    .await
}

async fn nack_one(
    conn: &mut SqliteConnection,
    now: i64,
    lease: &Lease,
    error: &str,
    retry: Retry,
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
            let at = instant(at).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
            Ok(Some(NackOutcome::Retrying { at }))
        }
        _ => {
            let worker = lease.worker_id.as_str();
            archive(
                conn,
                now,
                lease.job_id,
                FinalStatus::DeadLetter,
                None,
                Some(error),
                Some(worker),
            )
            .await?;
            Ok(Some(NackOutcome::DeadLettered))
        }
    }
}
