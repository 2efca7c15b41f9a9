//! Operator actions: discard, retry a dead letter, prune, pause and resume.

use queue_core::time::duration_micros;
use queue_core::{FinalStatus, JobId, PruneRequest, QueueError, QueueName, Result};

use crate::complete::archive;
use crate::{SqliteStorage, sql};

impl SqliteStorage {
    pub(crate) async fn discard_pooled(&self, id: JobId) -> Result<()> {
        let found = write_tx!(self, |conn, now| archive(
            conn,
            now,
            id,
            FinalStatus::Discarded,
            None,
            None,
            None
        ))?;
        if found {
            Ok(())
        } else {
            Err(QueueError::not_found(format!("live job {id}")))
        }
    }

    pub(crate) async fn retry_dead_letter_pooled(&self, id: JobId) -> Result<()> {
        let queue = write_tx!(self, |conn, now| async {
            let found: Option<(String, Option<String>)> = sqlx::query_as(sql::RETRY_FIND)
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
            sqlx::query(sql::RETRY_RESTORE)
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

    pub(crate) async fn prune_pooled(&self, request: &PruneRequest) -> Result<u64> {
        request.validate()?;
        write_tx!(self, |conn, now| async {
            let before = now.saturating_sub(duration_micros(request.older_than));
            let done = sqlx::query(sql::PRUNE)
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
            sqlx::query(sql::SET_PAUSED)
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
}
