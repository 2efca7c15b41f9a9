//! Operator actions: discard, retry a dead letter, prune, pause and
//! resume; run now, discard and retry in bulk by filter.

use queue_core::time::duration_micros;
use queue_core::{
    FinalStatus, HistoryFilter, JobFilter, JobId, PruneRequest, QueueError, QueueName, Result,
};
use sqlx::Row;

use crate::complete::{Leaving, archive, archive_all};
use crate::inspect::bind_job_filter;
use crate::workflow::Released;
use crate::{SqliteStorage, sql};

impl SqliteStorage {
    /// Discard (`FinalStatus::Discarded`) or cancel
    /// (`FinalStatus::Cancelled`): the live job moves to history as
    /// `status`, and this process's subscribers hear
    /// [`queue_core::Wakeup::Cancelled`] (a worker running it stops).
    pub(crate) async fn discard_pooled(&self, id: JobId, status: FinalStatus) -> Result<()> {
        let (found, released) = write_tx!(self, |conn, now| async {
            let mut released = Released::new();
            let found = archive(conn, now, id, Leaving::removed(status), &mut released).await?;
            Ok::<_, sqlx::Error>((found, released))
        })?;
        self.signal_all(&released);
        if found {
            self.signal_cancelled(id);
            Ok(())
        } else {
            Err(QueueError::not_found(format!("live job {id}")))
        }
    }

    pub(crate) async fn retry_dead_letter_pooled(&self, id: JobId) -> Result<()> {
        let queue = write_tx!(self, |conn, now| async {
            let found: Option<(String, Option<String>)> =
                sqlx::query_as(sql::RETRY_DEAD_LETTER_FIND)
                    .bind(id.get())
                    .fetch_optional(&mut *conn)
                    .await?;
            let Some((queue, key)) = found else {
                return Ok::<_, sqlx::Error>(Err(QueueError::not_found(format!(
                    "dead letter {id}"
                ))));
            };
            if let Some(key) = &key {
                let live: Option<i64> = sqlx::query_scalar(sql::ENQUEUE_EXISTING)
                    .bind(&queue)
                    .bind(key)
                    .fetch_optional(&mut *conn)
                    .await?;
                if live.is_some() {
                    return Ok(Err(QueueError::Conflict {
                        reason: format!(
                            "dead letter {id}: unique key {key:?} is live again in queue {queue}"
                        ),
                    }));
                }
            }
            sqlx::query(sql::RETRY_DEAD_LETTER_RESTORE)
                .bind(now)
                .bind(id.get())
                .execute(&mut *conn)
                .await?;
            sqlx::query(sql::DELETE_HISTORY)
                .bind(id.get())
                .execute(&mut *conn)
                .await?;
            Ok(Ok(queue))
        })??;
        if let Ok(queue) = QueueName::new(queue) {
            self.signal(&queue);
        }
        Ok(())
    }

    pub(crate) async fn prune_history_pooled(&self, request: &PruneRequest) -> Result<u64> {
        request.validate()?;
        write_tx!(self, |conn, now| async {
            let before = now.saturating_sub(duration_micros(request.older_than));
            let done = sqlx::query(sql::PRUNE_HISTORY)
                .bind(before)
                .bind(request.status.map(FinalStatus::as_str))
                .bind(i64::from(request.limit))
                .execute(&mut *conn)
                .await?;
            Ok::<_, sqlx::Error>(done.rows_affected())
        })
    }

    pub(crate) async fn set_paused(&self, queue: &QueueName, paused: bool) -> Result<()> {
        write_tx!(self, |conn, now| async {
            // Resuming a queue without a config row makes none: a row is
            // what lets a group of the queue be given its own limit, and
            // only configuring or pausing makes one (as on PostgreSQL).
            let statement = if paused { sql::SET_PAUSED } else { sql::RESUME };
            sqlx::query(statement)
                .bind(now)
                .bind(queue.as_str())
                .bind(paused)
                .execute(&mut *conn)
                .await?;
            Ok::<_, sqlx::Error>(())
        })?;
        if !paused {
            self.signal(queue);
        }
        Ok(())
    }

    pub(crate) async fn run_now_pooled(&self, filter: &JobFilter) -> Result<u64> {
        filter.validate()?;
        let Some(scheduled) = filter.scheduled_only() else {
            return Ok(0);
        };
        let queues: Vec<String> = write_tx!(self, |conn, now| async {
            let rows = bind_job_filter(sqlx::query(sql::RUN_NOW), now, &scheduled, filter.limit)
                .fetch_all(&mut *conn)
                .await?;
            rows.iter()
                .map(|row| row.try_get::<String, _>("queue_name"))
                .collect::<Result<Vec<_>, sqlx::Error>>()
        })?;
        self.signal_all(&queues);
        Ok(queues.len() as u64)
    }

    pub(crate) async fn discard_jobs_pooled(&self, filter: &JobFilter) -> Result<u64> {
        filter.validate()?;
        let (ids, released) = write_tx!(self, |conn, now| async {
            let mut released = Released::new();
            let ids: Vec<i64> =
                bind_job_filter(sqlx::query(sql::SELECT_JOBS), now, filter, filter.limit)
                    .fetch_all(&mut *conn)
                    .await?
                    .iter()
                    .map(|row| row.try_get("id"))
                    .collect::<Result<_, sqlx::Error>>()?;
            let discarded: Vec<(JobId, Leaving<'_>)> = ids
                .iter()
                .map(|id| (JobId(*id), Leaving::removed(FinalStatus::Discarded)))
                .collect();
            archive_all(conn, now, &discarded, &mut released).await?;
            Ok::<_, sqlx::Error>((ids, released))
        })?;
        self.signal_all(&released);
        for id in &ids {
            self.signal_cancelled(JobId(*id));
        }
        Ok(ids.len() as u64)
    }

    pub(crate) async fn retry_dead_letters_pooled(&self, filter: &HistoryFilter) -> Result<u64> {
        filter.validate()?;
        let limit = usize::try_from(filter.limit).unwrap_or(usize::MAX);
        let queues: Vec<String> = write_tx!(self, |conn, now| async {
            // The newest dead letter of each key moves; an older one of the
            // same key stays, as one whose key is live again does, and the
            // walk reads on until `limit` can move or none are left.
            let mut picked: Vec<(i64, String)> = Vec::new();
            let mut keys = std::collections::HashSet::new();
            let mut before = filter.before.map(JobId::get);
            while picked.len() < limit {
                let wanted = limit - picked.len();
                let rows: Vec<(i64, String, Option<String>)> =
                    sqlx::query_as(sql::RETRY_DEAD_LETTERS_PICK)
                        .bind(filter.queue.as_ref().map(QueueName::as_str))
                        .bind(before)
                        .bind(i64::try_from(wanted).unwrap_or(i64::MAX))
                        .fetch_all(&mut *conn)
                        .await?;
                let read = rows.len();
                before = rows.last().map(|(id, _, _)| *id);
                for (id, queue, key) in rows {
                    if key.is_none_or(|key| keys.insert((queue.clone(), key))) {
                        picked.push((id, queue));
                    }
                }
                if read < wanted {
                    break;
                }
            }
            for (id, _) in &picked {
                sqlx::query(sql::RETRY_DEAD_LETTER_RESTORE)
                    .bind(now)
                    .bind(id)
                    .execute(&mut *conn)
                    .await?;
                sqlx::query(sql::DELETE_HISTORY)
                    .bind(id)
                    .execute(&mut *conn)
                    .await?;
            }
            Ok::<_, sqlx::Error>(picked.into_iter().map(|(_, queue)| queue).collect())
        })?;
        self.signal_all(&queues);
        Ok(queues.len() as u64)
    }

    /// Wakes the subscribers of each queue named (stored names; a name the
    /// queue would not accept has no subscribers to wake).
    pub(crate) fn signal_all(&self, queues: &[String]) {
        let mut distinct: Vec<&String> = queues.iter().collect();
        distinct.sort();
        distinct.dedup();
        for name in distinct {
            if let Ok(queue) = QueueName::new(name.as_str()) {
                self.signal(&queue);
            }
        }
    }
}
