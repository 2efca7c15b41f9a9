//! Operator actions: discard and cancel, retry a dead letter, prune, pause and
//! resume; run now, discard and retry in bulk by filter.

use queue_core::time::duration_micros;
use queue_core::{
    FinalStatus, HistoryFilter, JobFilter, JobId, PruneRequest, QueueError, QueueName, Result,
};
use sqlx::Row;

use crate::PgStorage;
use crate::error::retrying;
use crate::inspect::bind_job_filter;

impl PgStorage {
    /// Discard or cancel (`status`): the live job goes to history as
    /// `status`, and a worker holding it hears of it on the cancel channel.
    pub(crate) async fn discard_pooled(&self, id: JobId, status: FinalStatus) -> Result<()> {
        let row = retrying(false, || {
            self.db().fetch_one(
                sqlx::query(self.sql.discard.clone())
                    .bind(self.now_override())
                    .bind(id.get())
                    .bind(status.as_str()),
            )
        })
        .await?;
        if count(&row, "removed")? == 1 {
            Ok(())
        } else {
            Err(QueueError::not_found(format!("live job {id}")))
        }
    }

    pub(crate) async fn retry_dead_letter_pooled(&self, id: JobId) -> Result<()> {
        let rows = retrying(false, || {
            self.db().fetch_all(
                sqlx::query(self.sql.retry_dead_letter.clone())
                    .bind(self.now_override())
                    .bind(id.get()),
            )
        })
        .await
        .map_err(|error| match error {
            QueueError::Conflict { reason } => QueueError::Conflict {
                reason: format!("dead letter {id}: its unique key is live again ({reason})"),
            },
            other => other,
        })?;
        if rows.is_empty() {
            Err(QueueError::not_found(format!("dead letter {id}")))
        } else {
            Ok(())
        }
    }

    pub(crate) async fn prune_history_pooled(&self, request: &PruneRequest) -> Result<u64> {
        request.validate()?;
        let done = retrying(true, || {
            self.db().execute(
                sqlx::query(self.sql.prune_history.clone())
                    .bind(self.now_override())
                    .bind(duration_micros(request.older_than))
                    .bind(request.status.map(|s| s.as_str()))
                    .bind(i64::from(request.limit)),
            )
        })
        .await?;
        if done.rows_affected() > 0 {
            // After the prune committed: then the older minutes' counters
            // sum to zero (see `PRUNE_COUNTERS`).
            retrying(true, || {
                self.db()
                    .execute(sqlx::query(self.sql.prune_counters.clone()))
            })
            .await?;
        }
        Ok(done.rows_affected())
    }

    pub(crate) async fn set_paused(&self, queue: &QueueName, paused: bool) -> Result<()> {
        let sql = if paused {
            self.sql.pause_queue.clone()
        } else {
            self.sql.resume_queue.clone()
        };
        retrying(true, || {
            self.db().execute(
                sqlx::query(sql.clone())
                    .bind(self.now_override())
                    .bind(queue.as_str()),
            )
        })
        .await?;
        Ok(())
    }

    pub(crate) async fn run_now_pooled(&self, filter: &JobFilter) -> Result<u64> {
        filter.validate()?;
        let Some(scheduled) = filter.scheduled_only() else {
            return Ok(0);
        };
        let row = retrying(false, || {
            let query = sqlx::query(self.sql.run_now.clone());
            self.db().fetch_one(bind_job_filter(
                query,
                self.now_override(),
                &scheduled,
                filter.limit,
            ))
        })
        .await?;
        count(&row, "moved")
    }

    pub(crate) async fn discard_jobs_pooled(&self, filter: &JobFilter) -> Result<u64> {
        filter.validate()?;
        let done = retrying(false, || {
            let query = sqlx::query(self.sql.discard_jobs.clone());
            self.db().execute(bind_job_filter(
                query,
                self.now_override(),
                filter,
                filter.limit,
            ))
        })
        .await?;
        Ok(done.rows_affected())
    }

    pub(crate) async fn retry_dead_letters_pooled(&self, filter: &HistoryFilter) -> Result<u64> {
        filter.validate()?;
        let queue = filter.queue.as_ref().map(|q| q.as_str());
        let limit = usize::try_from(filter.limit).unwrap_or(usize::MAX);
        let moved = retrying(false, || async {
            let mut tx = self.pool.begin().await?;
            // The newest dead letter of each key moves; an older one of the
            // same key stays, as one whose key is live again does, and the
            // walk reads on until `limit` can move or none are left.
            let mut ids: Vec<i64> = Vec::new();
            let mut keys = std::collections::HashSet::new();
            let mut before = filter.before.map(JobId::get);
            while ids.len() < limit {
                let wanted = limit - ids.len();
                let rows = self
                    .on(&mut tx)
                    .fetch_all(
                        sqlx::query(self.sql.retry_dead_letters_pick.clone())
                            .bind(queue)
                            .bind(before)
                            .bind(i64::try_from(wanted).unwrap_or(i64::MAX)),
                    )
                    .await?;
                for row in &rows {
                    let key: Option<String> = row.try_get("unique_key")?;
                    let fresh = match key {
                        Some(key) => keys.insert((row.try_get::<String, _>("queue_name")?, key)),
                        None => true,
                    };
                    if fresh {
                        ids.push(row.try_get("id")?);
                    }
                }
                match rows.last() {
                    Some(last) if rows.len() == wanted => before = Some(last.try_get("id")?),
                    _ => break,
                }
            }
            let row = self
                .on(&mut tx)
                .fetch_one(
                    sqlx::query(self.sql.retry_dead_letters.clone())
                        .bind(self.now_override())
                        .bind(&ids),
                )
                .await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(row)
        })
        .await?;
        count(&moved, "moved")
    }
}

/// A count column of `row`.
fn count(row: &sqlx::postgres::PgRow, column: &str) -> Result<u64> {
    let value: i64 = row.try_get(column).map_err(crate::interpret_error)?;
    Ok(u64::try_from(value).unwrap_or_default())
}
