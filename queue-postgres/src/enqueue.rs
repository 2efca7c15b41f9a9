//! Enqueue: one statement for any number of jobs (a batch without unique
//! keys by COPY, `copy_in.rs`), in the pool or in the caller's transaction.

use chrono::{DateTime, Utc};
use queue_core::backend::{first_occurrences, validate_batch};
use queue_core::time::duration_micros;
use queue_core::{EnqueueOutcome, GroupKey, JobId, NewJob, QueueError, Result, Schedule, ValidJob};
use serde_json::Value;
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres, Row, SqlSafeStr};

use crate::PgStorage;
use crate::error::{Failure, interpret_failure, retrying};
use crate::workflow::has_dependencies;

/// How often rows whose unique key was taken by a transaction that
/// committed during the statement are tried again.
const RACE_ROUNDS: usize = 3;

impl PgStorage {
    /// Enqueues `job` on the caller's connection or transaction: the job
    /// exists only if the caller commits, and its wake-up signal is sent
    /// only then.
    ///
    /// # Errors
    /// As [`queue_core::Storage::enqueue`].
    pub async fn enqueue_in(&self, conn: &mut PgConnection, job: NewJob) -> Result<EnqueueOutcome> {
        let mut outcomes = self.enqueue_batch_in(conn, vec![job]).await?;
        outcomes
            .pop()
            .ok_or_else(|| QueueError::backend("enqueue returned no outcome"))
    }

    /// Enqueues `jobs` in one statement on the caller's connection or
    /// transaction.
    ///
    /// # Errors
    /// As [`queue_core::Storage::enqueue_batch`].
    pub async fn enqueue_batch_in(
        &self,
        conn: &mut PgConnection,
        jobs: Vec<NewJob>,
    ) -> Result<Vec<EnqueueOutcome>> {
        let jobs = validate_batch(&jobs)?;
        if !has_dependencies(&jobs) {
            return self
                .insert_all(conn, &jobs, Signal::InTransaction)
                .await
                .map_err(interpret_failure);
        }
        // Several statements: in a savepoint of the caller's transaction
        // (or a transaction of their own), so a refused dependency leaves
        // nothing written.
        let linked = async {
            let mut tx = sqlx::Connection::begin(&mut *conn).await?;
            let outcomes = self
                .insert_all(&mut tx, &jobs, Signal::InTransaction)
                .await?;
            self.link_dependencies(&mut tx, &jobs, &outcomes).await?;
            tx.commit().await?;
            Ok::<_, Failure>(outcomes)
        };
        linked.await.map_err(interpret_failure)
    }

    pub(crate) async fn enqueue_batch_pooled(
        &self,
        jobs: Vec<NewJob>,
    ) -> Result<Vec<EnqueueOutcome>> {
        let jobs = validate_batch(&jobs)?;
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        if has_dependencies(&jobs) {
            return self.enqueue_linked(&jobs).await;
        }
        // A lone one-job enqueue notifies in its statement, as it commits
        // (see `signals.rs`). Batches signal after their commit: a NOTIFY
        // holds PostgreSQL's notification lock from pre-commit through the
        // commit, and two producers of 5,000-job batches lost 15% to it
        // (1,000,000 jobs: 72-75k jobs/s with it, 84-87k without).
        let in_flight = self.signals.begin();
        let signal = if in_flight.alone && jobs.len() == 1 {
            Signal::InTransaction
        } else {
            Signal::AfterCommit
        };
        let outcomes = retrying(false, || async {
            let mut session = self.session().await?;
            let outcomes = self.insert_all(session.connection(), &jobs, signal).await?;
            session.finish().await?;
            Ok::<_, Failure>(outcomes)
        })
        .await?;
        drop(in_flight);
        if matches!(signal, Signal::InTransaction) {
            return Ok(outcomes);
        }
        // Committed: wake the workers of the queues that got new jobs.
        self.signal_new(&jobs, &outcomes);
        Ok(outcomes)
    }

    /// A batch naming dependencies, in a transaction of its own: the rows,
    /// their links, then the wake-ups after the commit.
    async fn enqueue_linked(&self, jobs: &[ValidJob]) -> Result<Vec<EnqueueOutcome>> {
        let outcomes = retrying(false, || async {
            let mut tx = self.pool.begin().await?;
            let outcomes = self.insert_all(&mut tx, jobs, Signal::AfterCommit).await?;
            self.link_dependencies(&mut tx, jobs, &outcomes).await?;
            tx.commit().await?;
            Ok::<_, Failure>(outcomes)
        })
        .await?;
        self.signal_new(jobs, &outcomes);
        Ok(outcomes)
    }

    /// Wakes, after the commit, the workers of the queues that got new jobs.
    fn signal_new(&self, jobs: &[ValidJob], outcomes: &[EnqueueOutcome]) {
        let queues = jobs
            .iter()
            .zip(outcomes)
            .filter(|(_, outcome)| !outcome.existed)
            .map(|(job, _)| job.queue.as_str().to_owned())
            .collect();
        self.signals
            .send(&self.pool, self.pooling, &self.sql.signal, queues);
    }

    /// Inserts `jobs`, resolving keys repeated inside the batch to their
    /// first job and re-running rows that lost a race with a concurrent commit.
    async fn insert_all(
        &self,
        conn: &mut PgConnection,
        jobs: &[ValidJob],
        signal: Signal,
    ) -> Result<Vec<EnqueueOutcome>, Failure> {
        let first_of = first_occurrences(jobs);
        let mut outcomes: Vec<Option<EnqueueOutcome>> = vec![None; jobs.len()];
        let mut pending: Vec<usize> = (0..jobs.len()).filter(|i| first_of[*i] == *i).collect();
        for _ in 0..RACE_ROUNDS {
            if pending.is_empty() {
                break;
            }
            let batch: Vec<&ValidJob> = pending.iter().map(|i| &jobs[*i]).collect();
            let results = self.insert_rows(conn, &batch, signal).await?;
            let mut unresolved = Vec::new();
            for (index, result) in pending.iter().zip(results) {
                match result {
                    Some(outcome) => outcomes[*index] = Some(outcome),
                    None => unresolved.push(*index),
                }
            }
            pending = unresolved;
        }
        if !pending.is_empty() {
            return Err(Failure::Queue(QueueError::backend(
                "a unique key kept changing hands during enqueue; try again",
            )));
        }
        Ok((0..jobs.len())
            .map(|i| match outcomes[first_of[i]] {
                Some(first) if first_of[i] != i => EnqueueOutcome {
                    id: first.id,
                    existed: true,
                },
                Some(outcome) => outcome,
                None => unreachable!("every first occurrence was resolved above"),
            })
            .collect())
    }

    /// One round trip; `None` for a row whose conflicting job is not yet
    /// visible to this statement.
    async fn insert_rows(
        &self,
        conn: &mut PgConnection,
        jobs: &[&ValidJob],
        signal: Signal,
    ) -> Result<Vec<Option<EnqueueOutcome>>, sqlx::Error> {
        if let [job] = jobs {
            return Ok(vec![self.insert_one(conn, job, signal).await?]);
        }
        if crate::copy_in::by_copy(jobs) {
            let outcomes = self.copy_rows(conn, jobs).await?;
            if matches!(signal, Signal::InTransaction) {
                self.on(conn)
                    .execute(sqlx::query(self.sql.signal.clone()).bind(queues_of(jobs)))
                    .await?;
            }
            return Ok(outcomes.into_iter().map(Some).collect());
        }
        let statement = match signal {
            Signal::InTransaction => self.sql.enqueue.clone(),
            Signal::AfterCommit => self.sql.enqueue_quiet.clone(),
        };
        let rows = self
            .on(conn)
            .fetch_all(self.bind_batch(statement, jobs))
            .await?;
        rows.iter()
            .map(|row| {
                let id: Option<i64> = row.try_get("id")?;
                let existed: bool = row.try_get("existed")?;
                Ok(id.map(|id| EnqueueOutcome {
                    id: JobId(id),
                    existed,
                }))
            })
            .collect()
    }

    /// `statement` (the batch enqueue, or an `EXPLAIN` of it) with the
    /// batch's columns bound.
    pub(crate) fn bind_batch<'q>(
        &self,
        statement: impl SqlSafeStr,
        jobs: &[&'q ValidJob],
    ) -> Query<'q, Postgres, PgArguments> {
        let columns = Columns::of(jobs);
        sqlx::query(statement)
            .bind(self.now_override())
            .bind(columns.queue)
            .bind(columns.priority)
            .bind(columns.unique_key)
            .bind(columns.payload)
            .bind(columns.max_attempts)
            .bind(columns.delay_us)
            .bind(columns.run_at)
            .bind(columns.trace_context)
            .bind(columns.group_key)
    }
}

/// The distinct queues of `jobs`, for a wake-up signal.
fn queues_of(jobs: &[&ValidJob]) -> Vec<String> {
    let mut queues: Vec<String> = jobs
        .iter()
        .map(|job| job.queue.as_str().to_owned())
        .collect();
    queues.sort_unstable();
    queues.dedup();
    queues
}

/// Where an enqueue's wake-up signal is sent (see `signals.rs`).
#[derive(Debug, Clone, Copy)]
enum Signal {
    /// A NOTIFY in the statement: delivered if and when the transaction
    /// commits (the caller's, or the statement's own in the pool).
    InTransaction,
    /// None in the statement; the caller sends it once committed.
    AfterCommit,
}

impl PgStorage {
    /// One job, one round trip; `None` as in [`PgStorage::insert_rows`].
    async fn insert_one(
        &self,
        conn: &mut PgConnection,
        job: &ValidJob,
        signal: Signal,
    ) -> Result<Option<EnqueueOutcome>, sqlx::Error> {
        let statement = match signal {
            Signal::InTransaction => self.sql.enqueue_one.clone(),
            Signal::AfterCommit => self.sql.enqueue_one_quiet.clone(),
        };
        let columns = Columns::of(&[job]);
        let row = self
            .on(conn)
            .fetch_one(
                sqlx::query(statement)
                    .bind(self.now_override())
                    .bind(columns.queue[0])
                    .bind(columns.priority[0])
                    .bind(columns.unique_key[0])
                    .bind(columns.payload[0])
                    .bind(columns.max_attempts[0])
                    .bind(columns.delay_us[0])
                    .bind(columns.run_at[0])
                    .bind(columns.trace_context[0].as_deref())
                    .bind(columns.group_key[0]),
            )
            .await?;
        let id: Option<i64> = row.try_get("id")?;
        let existed: bool = row.try_get("existed")?;
        Ok(id.map(|id| EnqueueOutcome {
            id: JobId(id),
            existed,
        }))
    }
}

/// When a job is written for a later time than its own: a job with
/// dependencies is written waiting, and the link step gives it its own
/// time back if it has nothing to wait for. `None`: its own schedule.
pub(crate) fn written_at(job: &ValidJob) -> Option<DateTime<Utc>> {
    (!job.dependencies.is_empty()).then(queue_core::waiting_at)
}

/// The time `job` was enqueued for, as the enqueue's columns: a delay in
/// microseconds or an instant (neither: now).
pub(crate) fn schedule_columns(job: &ValidJob) -> (Option<i64>, Option<DateTime<Utc>>) {
    match job.schedule {
        Schedule::Now => (None, None),
        Schedule::After(delay) => (Some(duration_micros(delay)), None),
        Schedule::At(at) => (None, Some(at)),
    }
}

/// The batch as one array per column, for UNNEST, borrowing the jobs'
/// strings and payloads (a batch is encoded straight from them).
struct Columns<'j> {
    queue: Vec<&'j str>,
    priority: Vec<i32>,
    unique_key: Vec<Option<&'j str>>,
    payload: Vec<Json<&'j Value>>,
    max_attempts: Vec<i32>,
    delay_us: Vec<Option<i64>>,
    run_at: Vec<Option<DateTime<Utc>>>,
    /// `TraceContext::to_stored` of each job's context.
    trace_context: Vec<Option<String>>,
    group_key: Vec<Option<&'j str>>,
}

impl<'j> Columns<'j> {
    fn of(jobs: &[&'j ValidJob]) -> Self {
        let mut columns = Self {
            queue: Vec::with_capacity(jobs.len()),
            priority: Vec::with_capacity(jobs.len()),
            unique_key: Vec::with_capacity(jobs.len()),
            payload: Vec::with_capacity(jobs.len()),
            max_attempts: Vec::with_capacity(jobs.len()),
            delay_us: Vec::with_capacity(jobs.len()),
            run_at: Vec::with_capacity(jobs.len()),
            trace_context: Vec::with_capacity(jobs.len()),
            group_key: Vec::with_capacity(jobs.len()),
        };
        for job in jobs {
            columns.queue.push(job.queue.as_str());
            columns.priority.push(job.priority);
            columns
                .unique_key
                .push(job.unique_key.as_ref().map(|k| k.as_str()));
            columns.payload.push(Json(&job.payload));
            // Validation keeps max_attempts within i32.
            columns
                .max_attempts
                .push(i32::try_from(job.max_attempts).unwrap_or(i32::MAX));
            let (delay, at) = match written_at(job) {
                Some(at) => (None, Some(at)),
                None => schedule_columns(job),
            };
            columns.delay_us.push(delay);
            columns.run_at.push(at);
            columns
                .trace_context
                .push(job.trace_context.as_ref().map(|ctx| ctx.to_stored()));
            columns
                .group_key
                .push(job.group_key.as_ref().map(GroupKey::as_str));
        }
        columns
    }
}
