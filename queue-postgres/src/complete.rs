//! Ack, nack, release and snooze: finishing or putting off an attempt, in
//! the pool or in the caller's transaction together with the handler's own
//! writes.

use queue_core::backend::{LeaseKey, acked_one, first_mentions, one_ack};
use queue_core::time::{duration_micros, validate_duration};
use queue_core::{Ack, Lease, NackOutcome, QueueError, Result, Retry};
use serde_json::Value;
use sqlx::{PgConnection, Row};

use crate::PgStorage;
use crate::error::{Failure, interpret_failure, retrying};
use crate::lease::{lease_columns, returned_leases};

impl PgStorage {
    /// Acks `lease` on the caller's connection or transaction: the history
    /// row and the caller's writes commit or roll back together.
    ///
    /// # Errors
    /// [`QueueError::LeaseLost`] when the lease is not current (nothing changed).
    pub async fn ack_in(
        &self,
        conn: &mut PgConnection,
        lease: &Lease,
        result: Option<Value>,
    ) -> Result<()> {
        let acked = self
            .ack_on(conn, &one_ack(lease, result))
            .await
            .map_err(interpret_failure)?;
        acked_one(lease, &acked)
    }

    /// Nacks `lease` on the caller's connection or transaction.
    ///
    /// # Errors
    /// As [`queue_core::Storage::nack`].
    pub async fn nack_in(
        &self,
        conn: &mut PgConnection,
        lease: &Lease,
        error: Value,
        retry: Retry,
    ) -> Result<NackOutcome> {
        retry.validate()?;
        self.nack_on(conn, lease, &error, retry)
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
        retrying(false, || async {
            let mut session = self.session().await?;
            let acked = self.ack_on(session.connection(), acks).await?;
            session.finish().await?;
            Ok::<_, Failure>(acked)
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
        retrying(false, || async {
            let mut session = self.session().await?;
            let outcome = self
                .nack_on(session.connection(), lease, error, retry)
                .await?;
            session.finish().await?;
            Ok::<_, Failure>(outcome)
        })
        .await?
        .ok_or_else(|| QueueError::LeaseLost {
            lease: lease.clone(),
        })
    }

    /// One statement for all `acks`; a lease repeated in the batch counts
    /// once, as if the acks ran in turn.
    async fn ack_on(&self, conn: &mut PgConnection, acks: &[Ack]) -> Result<Vec<bool>, Failure> {
        let first = first_mentions(acks.iter().map(|a| LeaseKey::of(&a.lease)));
        let unique: Vec<&Ack> = acks
            .iter()
            .zip(&first)
            .filter(|(_, f)| **f)
            .map(|(a, _)| a)
            .collect();
        let (ids, workers, attempts) =
            lease_columns(&unique.iter().map(|a| &a.lease).collect::<Vec<_>>());
        let results: Vec<Option<Value>> = unique.iter().map(|a| a.result.clone()).collect();
        let rows = self
            .on(conn)
            .fetch_all(
                sqlx::query(self.sql.ack.clone())
                    .bind(self.now_override())
                    .bind(ids)
                    .bind(workers)
                    .bind(attempts)
                    .bind(results),
            )
            .await?;
        let acked = returned_leases(&rows)?;
        Ok(acks
            .iter()
            .zip(first)
            .map(|(ack, first)| first && acked.contains(&LeaseKey::of(&ack.lease)))
            .collect())
    }

    /// `None` when the lease is not current.
    async fn nack_on(
        &self,
        conn: &mut PgConnection,
        lease: &Lease,
        error: &Value,
        retry: Retry,
    ) -> Result<Option<NackOutcome>, Failure> {
        let key = LeaseKey::of(lease);
        let (wants_retry, delay) = match retry {
            Retry::After(delay) => (true, duration_micros(delay)),
            Retry::Never => (false, 0),
        };
        let row = self
            .on(conn)
            .fetch_one(
                sqlx::query(self.sql.nack.clone())
                    .bind(self.now_override())
                    .bind(key.id)
                    .bind(key.worker)
                    .bind(key.attempt)
                    .bind(error)
                    .bind(wants_retry)
                    .bind(delay),
            )
            .await?;
        let retry_at: Option<chrono::DateTime<chrono::Utc>> = row.try_get("retry_at")?;
        let dead_lettered: i64 = row.try_get("dead_lettered")?;
        Ok(match (retry_at, dead_lettered) {
            (Some(at), _) => Some(NackOutcome::Retrying { at }),
            (None, 1) => Some(NackOutcome::DeadLettered),
            _ => None,
        })
    }

    pub(crate) async fn release_pooled(&self, lease: &Lease) -> Result<bool> {
        let key = LeaseKey::of(lease);
        retrying(false, || {
            let key = key.clone();
            async move {
                let done = self
                    .db()
                    .execute(
                        sqlx::query(self.sql.release.clone())
                            .bind(self.now_override())
                            .bind(key.id)
                            .bind(key.worker)
                            .bind(key.attempt),
                    )
                    .await?;
                Ok::<_, Failure>(done.rows_affected() == 1)
            }
        })
        .await
    }
}

impl PgStorage {
    /// Puts the job of a current lease off by `delay` without counting the
    /// attempt (fenced like nack by the lease's id, holder and attempt).
    pub(crate) async fn snooze_pooled(
        &self,
        lease: &Lease,
        delay: std::time::Duration,
    ) -> Result<chrono::DateTime<chrono::Utc>> {
        validate_duration("delay", delay, true)?;
        let key = LeaseKey::of(lease);
        let row = retrying(false, || {
            self.db().fetch_optional(
                sqlx::query(self.sql.snooze.clone())
                    .bind(self.now_override())
                    .bind(key.id)
                    .bind(key.worker.as_str())
                    .bind(key.attempt)
                    .bind(duration_micros(delay)),
            )
        })
        .await?;
        let at: Option<chrono::DateTime<chrono::Utc>> = row
            .map(|row| row.try_get(0))
            .transpose()
            .map_err(crate::interpret_error)?;
        at.ok_or_else(|| QueueError::LeaseLost {
            lease: lease.clone(),
        })
    }
}
