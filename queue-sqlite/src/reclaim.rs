//! Reclaim: recovering jobs whose holder died, and exhausted jobs.

use queue_core::{FinalStatus, JobId, MAX_BATCH, ReclaimOutcome, Result, validate_limit};
use serde_json::json;
use sqlx::Row;

use crate::complete::{Leaving, archive_all};
use crate::workflow::Released;
use crate::{SqliteStorage, sql};

impl SqliteStorage {
    pub(crate) async fn reclaim_stalled_pooled(&self, limit: u32) -> Result<ReclaimOutcome> {
        validate_limit("limit", limit, MAX_BATCH)?;
        let (outcome, released) = write_tx!(self, |conn, now| async {
            let mut released = Released::new();
            let chosen = sqlx::query(sql::RECLAIM_STALLED_PICK)
                .bind(now)
                .bind(i64::from(limit))
                .fetch_all(&mut *conn)
                .await?;
            let mut outcome = ReclaimOutcome::default();
            let mut expired_errors: Vec<(i64, Option<String>)> = Vec::new();
            for row in chosen {
                let id: i64 = row.try_get("id")?;
                let holder: Option<String> = row.try_get("locked_by")?;
                let attempts: i64 = row.try_get("attempts")?;
                let max_attempts: i64 = row.try_get("max_attempts")?;
                let expired = holder.as_ref().map(|worker| {
                    json!({"kind": "lease_expired", "worker_id": worker, "attempt": attempts})
                        .to_string()
                });
                if attempts < max_attempts {
                    sqlx::query(sql::RECLAIM_STALLED_REQUEUE)
                        .bind(now)
                        .bind(id)
                        .bind(expired)
                        .execute(&mut *conn)
                        .await?;
                    outcome.requeued += 1;
                } else {
                    expired_errors.push((id, expired));
                    outcome.dead_lettered += 1;
                }
            }
            let dead: Vec<(JobId, Leaving<'_>)> = expired_errors
                .iter()
                .map(|(id, expired)| {
                    let leaving = Leaving {
                        last_error: expired.as_deref(),
                        ..Leaving::removed(FinalStatus::DeadLetter)
                    };
                    (JobId(*id), leaving)
                })
                .collect();
            archive_all(conn, now, &dead, &mut released).await?;
            Ok::<_, sqlx::Error>((outcome, released))
        })?;
        self.signal_all(&released);
        Ok(outcome)
    }
}
