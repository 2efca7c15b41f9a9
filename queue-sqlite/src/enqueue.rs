//! Enqueue: any number of jobs in one write transaction, or in the
//! caller's own transaction.

use queue_core::backend::{first_occurrences, validate_batch};
use queue_core::{EnqueueOutcome, JobId, NewJob, QueueError, Result, ValidJob};
use sqlx::SqliteConnection;

use crate::rows::{instant, json_text};
use crate::{SqliteStorage, interpret_error, sql};

impl SqliteStorage {
    /// Enqueues `job` on `conn`, typically inside the caller's own
    /// transaction (begun with `BEGIN IMMEDIATE`), so that the job exists
    /// exactly when the caller's writes commit. Workers of this process are
    /// not woken (the transaction may roll back); they find the job at
    /// their next poll.
    pub async fn enqueue_in(
        &self,
        conn: &mut SqliteConnection,
        job: NewJob,
    ) -> Result<EnqueueOutcome> {
        let jobs = validate_batch(&[job])?;
        let now = self.now_on(conn).await.map_err(interpret_error)?;
        insert_all(conn, now, &jobs)
            .await
            .map_err(interpret_error)?
            .pop()
            .ok_or_else(|| QueueError::backend("enqueue returned no outcome"))
    }

    pub(crate) async fn enqueue_batch_pooled(
        &self,
        jobs: Vec<NewJob>,
    ) -> Result<Vec<EnqueueOutcome>> {
        let jobs = validate_batch(&jobs)?;
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let outcomes = write_tx!(self, |conn, now| insert_all(conn, now, &jobs))?;
        for (job, outcome) in jobs.iter().zip(&outcomes) {
            if !outcome.existed {
                self.signal(&job.queue);
            }
        }
        Ok(outcomes)
    }
}

async fn insert_all(
    conn: &mut SqliteConnection,
    now: i64,
    jobs: &[ValidJob],
) -> Result<Vec<EnqueueOutcome>, sqlx::Error> {
    let first_of = first_occurrences(jobs);
    let mut outcomes: Vec<EnqueueOutcome> = Vec::with_capacity(jobs.len());
    for (index, job) in jobs.iter().enumerate() {
        let outcome = if first_of[index] == index {
            insert_one(conn, now, job).await?
        } else {
            EnqueueOutcome {
                id: outcomes[first_of[index]].id,
                existed: true,
            }
        };
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

async fn insert_one(
    conn: &mut SqliteConnection,
    now: i64,
    job: &ValidJob,
) -> Result<EnqueueOutcome, sqlx::Error> {
    let start = instant(now).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
    let available_at = job.available_at(start).timestamp_micros();
    let key = job.unique_key.as_ref().map(|k| k.as_str());
    let payload = json_text(&job.payload).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    let inserted: Option<i64> = sqlx::query_scalar(sql::ENQUEUE)
        .bind(now)
        .bind(job.queue.as_str())
        .bind(job.priority)
        .bind(key)
        .bind(payload)
        .bind(i64::from(job.max_attempts))
        .bind(available_at)
        .fetch_optional(&mut *conn)
        .await?;
    if let Some(id) = inserted {
        return Ok(EnqueueOutcome {
            id: JobId(id),
            existed: false,
        });
    }
    let id: i64 = sqlx::query_scalar(sql::ENQUEUE_EXISTING)
        .bind(job.queue.as_str())
        .bind(key)
        .fetch_one(&mut *conn)
        .await?;
    Ok(EnqueueOutcome {
        id: JobId(id),
        existed: true,
    })
}
