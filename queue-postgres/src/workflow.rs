//! Workflows on PostgreSQL: recording an enqueue's dependencies in its
//! transaction (migration 0022). What a finish does to the jobs waiting on
//! it is the migrations' triggers (0022, 0023), so every way a job leaves
//! the live table counts, with no code here; the contract is
//! `Storage::enqueue_batch`'s.
//!
//! A job with dependencies is written waiting (`Columns::of`), and the
//! enqueue then, in the same transaction, locks its dependencies that are
//! live ([`sql::LOCK_DEPENDENCIES`](crate::sql)): an ack deleting one waits
//! for this enqueue's commit and then sees its edges; one that deleted it
//! first has committed its history row, which this enqueue reads. Jobs whose
//! dependencies had all finished get their own time back.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use queue_core::backend::{FinishedLink, LiveLink, corrupt, job_link};
use queue_core::{
    Dependency, EnqueueOutcome, FinalStatus, JobId, JobLink, JobLinks, QueueError, Result,
    ValidJob, batch_closed, failed_dependency, unknown_dependency,
};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use crate::PgStorage;
use crate::enqueue::schedule_columns;
use crate::error::{Failure, interpret_failure, retrying};

/// Whether any job of the batch names a dependency or joins a batch.
pub(crate) fn has_dependencies(jobs: &[ValidJob]) -> bool {
    jobs.iter()
        .any(|job| !job.dependencies.is_empty() || job.joins.is_some())
}

/// One job written waiting, and what it waits for.
struct Waiter<'j> {
    job: &'j ValidJob,
    id: JobId,
    /// Its dependencies' ids, in order, without repeats.
    dependencies: Vec<JobId>,
}

impl PgStorage {
    /// Records the dependencies of the jobs `outcomes` says were written
    /// (waiting, by `Columns::of`) on `conn`, inside the enqueue's
    /// transaction; refuses with `Failure::Queue` a dependency that is
    /// unknown, or failed for a job that would be cancelled at once (the
    /// caller rolls back: nothing is written).
    pub(crate) async fn link_dependencies(
        &self,
        conn: &mut PgConnection,
        jobs: &[ValidJob],
        outcomes: &[EnqueueOutcome],
    ) -> Result<(), Failure> {
        // Jobs joining batches: their callbacks must still wait.
        let mut joins: Vec<(i64, i64)> = jobs
            .iter()
            .zip(outcomes)
            .filter(|(_, outcome)| !outcome.existed)
            .filter_map(|(job, outcome)| job.joins.map(|c| (c.get(), outcome.id.get())))
            .collect();
        joins.sort_unstable();
        let mut callbacks: Vec<i64> = jobs
            .iter()
            .filter_map(|job| job.joins.map(JobId::get))
            .collect();
        callbacks.sort_unstable();
        callbacks.dedup();
        if !callbacks.is_empty() {
            let open: HashSet<i64> = self
                .on(conn)
                .fetch_all(sqlx::query(self.sql.lock_callbacks.clone()).bind(&callbacks))
                .await?
                .iter()
                .map(|row| row.try_get::<i64, _>("id"))
                .collect::<Result<_, _>>()?;
            if let Some(closed) = callbacks.iter().find(|id| !open.contains(id)) {
                return Err(Failure::Queue(batch_closed(JobId(*closed))));
            }
        }
        let waiters: Vec<Waiter<'_>> = jobs
            .iter()
            .zip(outcomes)
            .filter(|(job, outcome)| !outcome.existed && !job.dependencies.is_empty())
            .map(|(job, outcome)| {
                let mut seen = HashSet::new();
                let dependencies = job
                    .dependencies
                    .iter()
                    .map(|dependency| match *dependency {
                        Dependency::Job(id) => id,
                        Dependency::InBatch(index) => outcomes[index].id,
                    })
                    .filter(|id| seen.insert(*id))
                    .collect();
                Waiter {
                    job,
                    id: outcome.id,
                    dependencies,
                }
            })
            .collect();
        // Every job's dependencies on jobs enqueued before are checked,
        // a job that met a live key included (as `check_batch_dependencies`
        // has it: the refusal does not depend on the key); edges are written
        // for the jobs written.
        // A job joining a batch is a dependency of its callback.
        let mut linked: Vec<i64> = waiters
            .iter()
            .flat_map(|w| w.dependencies.iter().map(|id| id.get()))
            .chain(joins.iter().map(|(_, joined)| *joined))
            .collect();
        linked.sort_unstable();
        linked.dedup();
        let mut ids: Vec<i64> = jobs
            .iter()
            .flat_map(|job| job.dependencies.iter())
            .filter_map(|dependency| match dependency {
                Dependency::Job(id) => Some(id.get()),
                Dependency::InBatch(_) => None,
            })
            .chain(linked.iter().copied())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.is_empty() {
            return Ok(());
        }
        let live: HashSet<i64> = self
            .on(conn)
            .fetch_all(
                sqlx::query(self.sql.lock_dependencies.clone())
                    .bind(&ids)
                    .bind(&linked),
            )
            .await?
            .iter()
            .map(|row| row.try_get::<i64, _>("id"))
            .collect::<Result<_, _>>()?;
        let gone: Vec<i64> = ids.into_iter().filter(|id| !live.contains(id)).collect();
        let mut finished: HashMap<i64, FinalStatus> = HashMap::new();
        if !gone.is_empty() {
            for row in self
                .on(conn)
                .fetch_all(sqlx::query(self.sql.dependency_history.clone()).bind(&gone))
                .await?
            {
                let status: String = row.try_get("status_final")?;
                let status: FinalStatus = status.parse().map_err(|e| corrupt("status_final", e))?;
                finished.insert(row.try_get("id")?, status);
            }
        }
        // The jobs written are checked with their edges below; these met a
        // live key and get no edges.
        let existed = jobs.iter().zip(outcomes).filter(|(_, o)| o.existed);
        for (job, _) in existed {
            for dependency in &job.dependencies {
                let Dependency::Job(id) = *dependency else {
                    continue;
                };
                if live.contains(&id.get()) {
                    continue;
                }
                let Some(status) = finished.get(&id.get()) else {
                    return Err(Failure::Queue(unknown_dependency(id)));
                };
                if !job.on_dependency_failure.counts(*status) {
                    return Err(Failure::Queue(failed_dependency(id, *status)));
                }
            }
        }
        let mut edges = Edges::default();
        let mut waiting = Waiting::default();
        let mut unwaited = Unwaited::default();
        for waiter in &waiters {
            let mut remaining = 0;
            for dependency in &waiter.dependencies {
                let unfinished = live.contains(&dependency.get());
                if !unfinished {
                    let Some(status) = finished.get(&dependency.get()) else {
                        return Err(Failure::Queue(unknown_dependency(*dependency)));
                    };
                    if !waiter.job.on_dependency_failure.counts(*status) {
                        return Err(Failure::Queue(failed_dependency(*dependency, *status)));
                    }
                }
                remaining += i32::from(unfinished);
                edges.job.push(waiter.id.get());
                edges.depends_on.push(dependency.get());
                edges.unfinished.push(unfinished);
            }
            let (delay_us, run_at) = schedule_columns(waiter.job);
            if remaining > 0 {
                waiting.id.push(waiter.id.get());
                waiting.remaining.push(remaining);
                waiting.delay_us.push(delay_us);
                waiting.run_at.push(run_at);
                waiting
                    .on_failure
                    .push(waiter.job.on_dependency_failure.as_str());
            } else {
                unwaited.id.push(waiter.id.get());
                unwaited.delay_us.push(delay_us);
                unwaited.run_at.push(run_at);
            }
        }
        let mut joined: Vec<(i64, i32)> = Vec::new();
        for (callback, job) in &joins {
            edges.job.push(*callback);
            edges.depends_on.push(*job);
            edges.unfinished.push(true);
            match joined.last_mut() {
                Some((last, n)) if last == callback => *n += 1,
                _ => joined.push((*callback, 1)),
            }
        }
        if !joined.is_empty() {
            let (ids, counts): (Vec<i64>, Vec<i32>) = joined.into_iter().unzip();
            self.on(conn)
                .execute(
                    sqlx::query(self.sql.count_up_callbacks.clone())
                        .bind(ids)
                        .bind(counts),
                )
                .await?;
        }
        self.on(conn)
            .execute(
                sqlx::query(self.sql.insert_dependencies.clone())
                    .bind(edges.job)
                    .bind(edges.depends_on)
                    .bind(edges.unfinished),
            )
            .await?;
        if !waiting.id.is_empty() {
            self.on(conn)
                .execute(
                    sqlx::query(self.sql.insert_waiting.clone())
                        .bind(self.now_override())
                        .bind(waiting.id)
                        .bind(waiting.remaining)
                        .bind(waiting.delay_us)
                        .bind(waiting.run_at)
                        .bind(waiting.on_failure),
                )
                .await?;
        }
        if !unwaited.id.is_empty() {
            self.on(conn)
                .execute(
                    sqlx::query(self.sql.set_enqueued_time.clone())
                        .bind(self.now_override())
                        .bind(unwaited.id)
                        .bind(unwaited.delay_us)
                        .bind(unwaited.run_at),
                )
                .await?;
        }
        Ok(())
    }
}

/// [`sql::INSERT_DEPENDENCIES`](crate::sql)'s columns.
#[derive(Default)]
struct Edges {
    job: Vec<i64>,
    depends_on: Vec<i64>,
    unfinished: Vec<bool>,
}

/// [`sql::INSERT_WAITING`](crate::sql)'s columns.
#[derive(Default)]
struct Waiting {
    id: Vec<i64>,
    remaining: Vec<i32>,
    delay_us: Vec<Option<i64>>,
    run_at: Vec<Option<DateTime<Utc>>>,
    on_failure: Vec<&'static str>,
}

/// [`sql::SET_ENQUEUED_TIME`](crate::sql)'s columns.
#[derive(Default)]
struct Unwaited {
    id: Vec<i64>,
    delay_us: Vec<Option<i64>>,
    run_at: Vec<Option<DateTime<Utc>>>,
}

impl PgStorage {
    /// `Storage::job_links` for `id`.
    pub(crate) async fn job_links_pooled(&self, id: JobId) -> Result<JobLinks> {
        let rows = retrying(true, || {
            self.read_db().fetch_all(
                sqlx::query(self.sql.job_links.clone())
                    .bind(self.now_override())
                    .bind(id.get()),
            )
        })
        .await?;
        let mut links = JobLinks::default();
        for row in &rows {
            let found: bool = row.try_get("found").map_err(crate::interpret_error)?;
            if !found {
                return Err(QueueError::not_found(format!("job {id}")));
            }
            let side: Option<i32> = row.try_get("side").map_err(crate::interpret_error)?;
            let other: Option<i64> = row.try_get("other").map_err(crate::interpret_error)?;
            let (Some(side), Some(other)) = (side, other) else {
                continue;
            };
            let link = link_of(row, JobId(other)).map_err(interpret_failure)?;
            if side == 0 {
                links.dependencies.push(link);
            } else {
                links.dependants.push(link);
            }
        }
        Ok(links)
    }
}

/// One row of [`sql::JOB_LINKS`](crate::sql) as a link.
fn link_of(row: &PgRow, id: JobId) -> Result<JobLink, Failure> {
    let live_queue: Option<String> = row.try_get("live_queue")?;
    let live = match live_queue {
        Some(queue) => Some(LiveLink {
            queue,
            available_at: row.try_get("available_at")?,
            lease_until: row.try_get("lease_until")?,
            attempts: i64::from(row.try_get::<i32, _>("attempts")?),
            max_attempts: i64::from(row.try_get::<i32, _>("max_attempts")?),
        }),
        None => None,
    };
    let done_queue: Option<String> = row.try_get("done_queue")?;
    let finished = match done_queue {
        Some(queue) => Some(FinishedLink {
            queue,
            status: row.try_get("status_final")?,
            result: row.try_get("result")?,
        }),
        None => None,
    };
    Ok(job_link(id, live, finished, row.try_get("now")?)?)
}
