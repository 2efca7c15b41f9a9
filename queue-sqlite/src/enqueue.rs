//! Enqueue: any number of jobs in one write transaction, or in the
//! caller's own transaction.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use queue_core::backend::{first_occurrences, json_text, stored_instant, validate_batch};
use queue_core::{EnqueueOutcome, JobId, NewJob, QueueError, Result, TraceContext, ValidJob};
use sqlx::{AssertSqlSafe, Row, SqliteConnection};

use crate::{SqliteStorage, interpret_error, sql, workflow};

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
        let now = self.now_micros();
        workflow::check(conn, &jobs)
            .await
            .map_err(interpret_error)??;
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
        // Without unique keys nothing is looked up after the insert, so a
        // batch that fits one statement needs no transaction around it.
        let one_statement = jobs.len() <= sql::ROWS_PER_STATEMENT
            && jobs.iter().all(|job| {
                job.unique_key.is_none() && job.dependencies.is_empty() && job.joins.is_none()
            });
        let outcomes = if one_statement {
            write_statement!(self, |conn, now| insert_all(conn, now, &jobs))?
        } else {
            write_tx!(self, |conn, now| async {
                if let Err(refused) = workflow::check(conn, &jobs).await? {
                    return Ok(Err(refused));
                }
                Ok::<_, sqlx::Error>(Ok(insert_all(conn, now, &jobs).await?))
            })??
        };
        let woken: BTreeSet<_> = jobs
            .iter()
            .zip(&outcomes)
            .filter(|(_, outcome)| !outcome.existed)
            .map(|(job, _)| &job.queue)
            .collect();
        for queue in woken {
            self.signal(queue);
        }
        Ok(outcomes)
    }
}

/// Inserts the first occurrence of every job in multi-row statements of
/// at most [`sql::ROWS_PER_STATEMENT`] rows; a later repeat of a unique key
/// inside the batch, or a key already live, gets the live job's id with
/// `existed = true`.
pub(crate) async fn insert_all(
    conn: &mut SqliteConnection,
    now: i64,
    jobs: &[ValidJob],
) -> Result<Vec<EnqueueOutcome>, sqlx::Error> {
    let start = stored_instant("time", now).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
    let first_of = first_occurrences(jobs);
    let firsts: Vec<usize> = (0..jobs.len()).filter(|&i| first_of[i] == i).collect();
    let mut ids: Vec<Option<i64>> = vec![None; jobs.len()];
    for chunk in firsts.chunks(sql::ROWS_PER_STATEMENT) {
        insert_chunk(conn, now, start, jobs, chunk, &mut ids).await?;
    }
    let mut outcomes: Vec<EnqueueOutcome> = Vec::with_capacity(jobs.len());
    for (index, job) in jobs.iter().enumerate() {
        let first = first_of[index];
        let outcome = if first != index {
            EnqueueOutcome {
                id: outcomes[first].id,
                existed: true,
            }
        } else if let Some(id) = ids[index] {
            EnqueueOutcome {
                id: JobId(id),
                existed: false,
            }
        } else {
            // Not inserted: its unique key is held by a live job.
            let key = job.unique_key.as_ref().map(|k| k.as_str());
            let id: i64 = sqlx::query_scalar(sql::ENQUEUE_EXISTING)
                .bind(job.queue.as_str())
                .bind(key)
                .fetch_one(&mut *conn)
                .await?;
            EnqueueOutcome {
                id: JobId(id),
                existed: true,
            }
        };
        outcomes.push(outcome);
    }
    if jobs
        .iter()
        .any(|job| !job.dependencies.is_empty() || job.joins.is_some())
    {
        workflow::link(conn, now, jobs, &outcomes).await?;
    }
    Ok(outcomes)
}

/// Inserts `jobs[i]` for each `i` of `chunk` in one statement, setting
/// `ids[i]` for each job inserted (a job whose key is live is skipped).
async fn insert_chunk(
    conn: &mut SqliteConnection,
    now: i64,
    start: DateTime<Utc>,
    jobs: &[ValidJob],
    chunk: &[usize],
    ids: &mut [Option<i64>],
) -> Result<(), sqlx::Error> {
    let keyed = chunk.iter().any(|&index| jobs[index].unique_key.is_some());
    let statement = sql::enqueue_many(chunk.len(), keyed);
    let mut query = sqlx::query(AssertSqlSafe(statement));
    for &index in chunk {
        let job = &jobs[index];
        let payload = json_text(&job.payload).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
        query = query
            .bind(job.queue.as_str().to_owned())
            .bind(job.priority)
            .bind(job.unique_key.as_ref().map(|k| k.as_str().to_owned()))
            .bind(payload)
            .bind(i64::from(job.max_attempts))
            .bind(job.available_at(start).timestamp_micros())
            .bind(now)
            .bind(now)
            .bind(job.trace_context.as_ref().map(TraceContext::to_stored))
            .bind(job.group_key.as_ref().map(|g| g.as_str().to_owned()));
    }
    if !keyed {
        let done = query.execute(&mut *conn).await?;
        let count = i64::try_from(chunk.len()).unwrap_or(i64::MAX);
        if done.rows_affected() != chunk.len() as u64 {
            return Err(sqlx::Error::Protocol(format!(
                "inserted {} rows of {count}",
                done.rows_affected()
            )));
        }
        let first = done.last_insert_rowid() - count + 1;
        for (offset, &index) in (0..).zip(chunk) {
            ids[index] = Some(first + offset);
        }
        return Ok(());
    }
    let inserted = query.fetch_all(&mut *conn).await?;
    // Keyed rows are told apart by (queue, key), unique among the firsts;
    // unkeyed rows by their ids, which ascend in insertion order.
    let mut keyed: HashMap<(String, String), i64> = HashMap::new();
    let mut unkeyed: Vec<i64> = Vec::new();
    for row in &inserted {
        let id: i64 = row.try_get("id")?;
        match row.try_get::<Option<String>, _>("unique_key")? {
            Some(key) => {
                keyed.insert((row.try_get("queue_name")?, key), id);
            }
            None => unkeyed.push(id),
        }
    }
    unkeyed.sort_unstable();
    let mut unkeyed = unkeyed.into_iter();
    for &index in chunk {
        let job = &jobs[index];
        ids[index] = match &job.unique_key {
            Some(key) => keyed.remove(&(job.queue.as_str().to_owned(), key.as_str().to_owned())),
            None => Some(unkeyed.next().ok_or_else(|| {
                sqlx::Error::Protocol("the insert returned fewer ids than it inserted".into())
            })?),
        };
    }
    Ok(())
}
