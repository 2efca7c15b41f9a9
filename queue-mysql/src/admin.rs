//! Reclaim, discard, retry, prune, pause and resume.

use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use queue_core::time::duration_micros;
use queue_core::{
    JobId, MAX_BATCH, PruneRequest, QueueError, QueueName, ReclaimOutcome, Result, validate_limit,
};

use crate::MySqlStorage;
use crate::bind::{Param, placeholders, query};
use crate::claim::HeldRow;
use crate::complete::delete_live;
use crate::error::{Failure, retrying};
use crate::rows::IdRow;
use crate::sql::{HISTORY_COLUMNS, PAUSE, PICK_EXHAUSTED, PICK_STALLED, PRUNE, RESUME};

/// The error a reclaimed stalled job records (also on MariaDB, where
/// JSON_OBJECT yields text): `{"kind":"lease_expired","worker_id":…,"attempt":…}`.
const LEASE_EXPIRED: &str =
    "JSON_OBJECT('kind', 'lease_expired', 'worker_id', locked_by, 'attempt', attempts)";

impl MySqlStorage {
    pub(crate) async fn reclaim_pooled(&self, limit: u32) -> Result<ReclaimOutcome> {
        validate_limit("limit", limit, MAX_BATCH)?;
        retrying(true, || async {
            let mut conn = self.connection().await?;
            conn.transaction(async |conn| self.reclaim_on(conn, limit).await)
                .await
        })
        .await
    }

    async fn reclaim_on(
        &self,
        conn: &mut AsyncMysqlConnection,
        limit: u32,
    ) -> Result<ReclaimOutcome, Failure> {
        let now = self.resolve_now(conn).await?;
        let mut chosen = query(
            PICK_STALLED,
            vec![Param::Time(now), Param::Int(i64::from(limit))],
        )
        .load::<HeldRow>(conn)
        .await?;
        let room = limit as usize - chosen.len();
        if room > 0 {
            let exhausted = query(PICK_EXHAUSTED, vec![Param::Int(room as i64)])
                .load::<HeldRow>(conn)
                .await?;
            chosen.extend(exhausted);
        }
        let (dead, requeue): (Vec<&HeldRow>, Vec<&HeldRow>) = chosen
            .iter()
            .partition(|row| row.attempts >= row.max_attempts);
        if !requeue.is_empty() {
            // last_error first: assignments run left to right and it reads locked_by.
            let sql = format!(
                "UPDATE job_queue SET last_error = {LEASE_EXPIRED}, lease_until = NULL, locked_by = NULL, \
                 available_at = ?, updated_at = ? WHERE id IN {}",
                placeholders(requeue.len())
            );
            let mut params = vec![Param::Time(now), Param::Time(now)];
            params.extend(requeue.iter().map(|row| Param::Int(row.id)));
            query(&sql, params).execute(conn).await?;
        }
        if !dead.is_empty() {
            let ids: Vec<i64> = dead.iter().map(|row| row.id).collect();
            let sql = format!(
                "INSERT INTO job_history ({HISTORY_COLUMNS}) \
                 SELECT id, queue_name, priority, unique_key, payload, 'dead_letter', NULL, \
                        CASE WHEN locked_by IS NULL THEN last_error ELSE {LEASE_EXPIRED} END, \
                        attempts, max_attempts, NULL, created_at, first_locked_at, ? \
                 FROM job_queue WHERE id IN {}",
                placeholders(ids.len())
            );
            let mut params = vec![Param::Time(now)];
            params.extend(ids.iter().map(|id| Param::Int(*id)));
            query(&sql, params).execute(conn).await?;
            delete_live(conn, &ids).await?;
        }
        Ok(ReclaimOutcome {
            requeued: requeue.len() as u64,
            dead_lettered: dead.len() as u64,
        })
    }

    pub(crate) async fn discard_pooled(&self, id: JobId) -> Result<()> {
        let found = retrying(false, || async {
            let mut conn = self.connection().await?;
            conn.transaction(async |conn| {
                let now = self.resolve_now(conn).await?;
                let locked = query("SELECT id FROM job_queue WHERE id = ? FOR UPDATE", vec![Param::Int(id.get())])
                    .load::<IdRow>(conn)
                    .await?;
                if locked.is_empty() {
                    return Ok(false);
                }
                let sql = format!(
                    "INSERT INTO job_history ({HISTORY_COLUMNS}) \
                     SELECT id, queue_name, priority, unique_key, payload, 'discarded', NULL, last_error, \
                            attempts, max_attempts, NULL, created_at, first_locked_at, ? \
                     FROM job_queue WHERE id = ?"
                );
                query(&sql, vec![Param::Time(now), Param::Int(id.get())]).execute(conn).await?;
                delete_live(conn, &[id.get()]).await?;
                Ok(true)
            })
            .await
        })
        .await?;
        if found {
            Ok(())
        } else {
            Err(QueueError::not_found(format!("live job {id}")))
        }
    }

    pub(crate) async fn retry_dead_letter_pooled(&self, id: JobId) -> Result<()> {
        let found = retrying(false, || async {
            let mut conn = self.connection().await?;
            conn.transaction(async |conn| {
                let now = self.resolve_now(conn).await?;
                let locked = query(
                    "SELECT id FROM job_history WHERE id = ? AND status_final = 'dead_letter' FOR UPDATE",
                    vec![Param::Int(id.get())],
                )
                .load::<IdRow>(conn)
                .await?;
                if locked.is_empty() {
                    return Ok(false);
                }
                // A unique key live again fails this INSERT as a duplicate.
                // max_attempts 0: archived by hand without it; the default
                // allowance (20).
                query(
                    "INSERT INTO job_queue (id, queue_name, priority, unique_key, payload, attempts, \
                     max_attempts, available_at, last_error, created_at, updated_at) \
                     SELECT id, queue_name, priority, unique_key, payload, 0, \
                            CASE WHEN max_attempts >= 1 THEN max_attempts ELSE 20 END, ?, last_error, \
                            created_at, ? FROM job_history WHERE id = ?",
                    vec![Param::Time(now), Param::Time(now), Param::Int(id.get())],
                )
                .execute(conn)
                .await?;
                query("DELETE FROM job_history WHERE id = ?", vec![Param::Int(id.get())])
                    .execute(conn)
                    .await?;
                Ok(true)
            })
            .await
        })
        .await
        .map_err(|error| match error {
            QueueError::Conflict { reason } => QueueError::Conflict {
                reason: format!("dead letter {id}: its unique key is live again ({reason})"),
            },
            other => other,
        })?;
        if found {
            Ok(())
        } else {
            Err(QueueError::not_found(format!("dead letter {id}")))
        }
    }

    pub(crate) async fn prune_pooled(&self, request: &PruneRequest) -> Result<u64> {
        request.validate()?;
        let status = request.status.map(|s| s.as_str().to_owned());
        retrying(true, || async {
            let mut conn = self.connection().await?;
            let params = vec![
                Param::OptTime(self.now_override()),
                Param::Int(duration_micros(request.older_than)),
                Param::OptText(status.clone()),
                Param::OptText(status.clone()),
                Param::Int(i64::from(request.limit)),
            ];
            Ok(query(PRUNE, params).execute(&mut conn).await? as u64)
        })
        .await
    }

    pub(crate) async fn set_paused(&self, queue: &QueueName, paused: bool) -> Result<()> {
        let now = self.now_override();
        let name = queue.as_str().to_owned();
        retrying(true, || async {
            let mut conn = self.connection().await?;
            let (sql, params) = if paused {
                (
                    PAUSE,
                    vec![
                        Param::Text(name.clone()),
                        Param::OptTime(now),
                        Param::OptTime(now),
                    ],
                )
            } else {
                (RESUME, vec![Param::OptTime(now), Param::Text(name.clone())])
            };
            query(sql, params).execute(&mut conn).await?;
            Ok(())
        })
        .await
    }
}
