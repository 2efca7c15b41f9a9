//! Workflows on SQLite: recording a job's dependencies at enqueue, and
//! what finishing a job does to the jobs waiting on it, in the same write
//! transaction (migration 0012; the contract is `Storage::enqueue_batch`'s).

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Utc};
use queue_core::backend::{FinishedLink, LiveLink, corrupt, job_link, stored_instant};
use queue_core::{
    Dependency, EnqueueOutcome, FinalStatus, JobId, JobLink, JobLinks, QueueError, Result,
    ValidJob, batch_closed, dependency_failed, failed_dependency, unknown_dependency,
};
use sqlx::{Row, SqliteConnection};

use crate::complete::move_to_history;
use crate::sql;

/// The queues of the jobs a finish released: workers to wake after the commit.
pub(crate) type Released = Vec<String>;

/// Refuses a batch whose dependencies on jobs enqueued before are unknown,
/// or failed for a job that would be cancelled at once, or that joins a
/// closed batch: `Ok(Err(..))`, nothing written. Run in the enqueue's
/// write transaction (which no other writer shares: a callback found
/// waiting stays so until it commits).
pub(crate) async fn check(
    conn: &mut SqliteConnection,
    jobs: &[ValidJob],
) -> Result<Result<(), QueueError>, sqlx::Error> {
    for job in jobs {
        if let Some(callback) = job.joins {
            let waiting: bool = sqlx::query_scalar(sql::IS_WAITING)
                .bind(callback.get())
                .fetch_one(&mut *conn)
                .await?;
            if !waiting {
                return Ok(Err(batch_closed(callback)));
            }
        }
        for dependency in &job.dependencies {
            let Dependency::Job(id) = *dependency else {
                continue;
            };
            let status: Option<String> = sqlx::query_scalar(sql::DEPENDENCY_STATUS)
                .bind(id.get())
                .fetch_optional(&mut *conn)
                .await?;
            match status.as_deref() {
                None => return Ok(Err(unknown_dependency(id))),
                Some("live") => {}
                Some(stored) => {
                    let status: FinalStatus = stored
                        .parse()
                        .map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
                    if !job.on_dependency_failure.counts(status) {
                        return Ok(Err(failed_dependency(id, status)));
                    }
                }
            }
        }
    }
    Ok(Ok(()))
}

/// Records the dependencies of each job `outcomes` says was written, and
/// makes it wait for those still live: a statement for all the edges, one
/// for the waiting rows and one for their `available_at`.
pub(crate) async fn link(
    conn: &mut SqliteConnection,
    now: i64,
    jobs: &[ValidJob],
    outcomes: &[EnqueueOutcome],
) -> Result<(), sqlx::Error> {
    let start = stored_instant("time", now).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
    // Where each dependency enqueued before stands, asked once.
    let mut live: HashMap<i64, bool> = HashMap::new();
    let mut edges: Vec<(i64, i64, i64)> = Vec::new();
    let mut waiting: Vec<(i64, i64, i64, &'static str)> = Vec::new();
    // Per callback, how many written jobs joined its batch.
    let mut joined: BTreeMap<i64, i64> = BTreeMap::new();
    for (job, outcome) in jobs.iter().zip(outcomes) {
        if outcome.existed {
            continue;
        }
        if let Some(callback) = job.joins {
            edges.push((callback.get(), outcome.id.get(), 1));
            *joined.entry(callback.get()).or_default() += 1;
        }
        if job.dependencies.is_empty() {
            continue;
        }
        let mut seen = HashSet::new();
        let mut remaining: i64 = 0;
        for dependency in &job.dependencies {
            // A job of the batch is live (new, or the one holding its
            // key); one enqueued before is live or, as `check` found, in
            // history.
            let (id, unfinished) = match *dependency {
                Dependency::InBatch(index) => (outcomes[index].id.get(), true),
                Dependency::Job(id) => {
                    let unfinished = match live.get(&id.get()) {
                        Some(known) => *known,
                        None => {
                            let status: Option<String> = sqlx::query_scalar(sql::DEPENDENCY_STATUS)
                                .bind(id.get())
                                .fetch_optional(&mut *conn)
                                .await?;
                            let known = status.as_deref() == Some("live");
                            live.insert(id.get(), known);
                            known
                        }
                    };
                    (id.get(), unfinished)
                }
            };
            if seen.insert(id) {
                edges.push((outcome.id.get(), id, i64::from(unfinished)));
                remaining += i64::from(unfinished);
            }
        }
        if remaining > 0 {
            waiting.push((
                outcome.id.get(),
                remaining,
                job.available_at(start).timestamp_micros(),
                job.on_dependency_failure.as_str(),
            ));
        }
    }
    let encode = |e: serde_json::Error| sqlx::Error::Encode(Box::new(e));
    if !edges.is_empty() {
        sqlx::query(sql::INSERT_DEPENDENCIES)
            .bind(serde_json::to_string(&edges).map_err(encode)?)
            .execute(&mut *conn)
            .await?;
    }
    if !joined.is_empty() {
        let joined: Vec<(i64, i64)> = joined.into_iter().collect();
        sqlx::query(sql::JOIN_WAITING)
            .bind(serde_json::to_string(&joined).map_err(encode)?)
            .execute(&mut *conn)
            .await?;
    }
    if !waiting.is_empty() {
        sqlx::query(sql::INSERT_WAITING)
            .bind(serde_json::to_string(&waiting).map_err(encode)?)
            .execute(&mut *conn)
            .await?;
        let ids: Vec<i64> = waiting.iter().map(|w| w.0).collect();
        sqlx::query(sql::SET_WAITING)
            .bind(serde_json::to_string(&ids).map_err(encode)?)
            .bind(sql::WAITING_AT)
            .bind(now)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// What the jobs `finished` leaving the live table as `status` do to the
/// jobs waiting on them: each waiting job counts each of them once; the
/// last one releases it (its queue goes to `released`), a failure cancels
/// a job that does not run anyway, and those cancellations are finishes of
/// their own, handled in turn. A whole finish is counted down and released
/// in a few statements, however many jobs wait on it.
pub(crate) async fn finish(
    conn: &mut SqliteConnection,
    now: i64,
    finished: &[i64],
    status: FinalStatus,
    released: &mut Released,
) -> Result<(), sqlx::Error> {
    let encode = |e: serde_json::Error| sqlx::Error::Encode(Box::new(e));
    let mut events = vec![(finished.to_vec(), status)];
    while let Some((finished, status)) = events.pop() {
        let ids = serde_json::to_string(&finished).map_err(encode)?;
        // A job that held a lease (acked, nacked, reclaimed) was not
        // waiting; one discarded or cancelled may have been.
        if matches!(status, FinalStatus::Discarded | FinalStatus::Cancelled) {
            sqlx::query(sql::DELETE_WAITING_IDS)
                .bind(&ids)
                .execute(&mut *conn)
                .await?;
        }
        let edges: Vec<(i64, i64)> = sqlx::query_as(sql::FINISH_DEPENDENCIES)
            .bind(&ids)
            .fetch_all(&mut *conn)
            .await?;
        if edges.is_empty() {
            continue;
        }
        // Per waiting job: how many of its dependencies finished, and the
        // lowest of them (a job cancelled by several failures names it).
        let mut counted: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
        for (waiter, dependency) in edges {
            counted
                .entry(waiter)
                .and_modify(|(n, lowest)| {
                    *n += 1;
                    *lowest = (*lowest).min(dependency);
                })
                .or_insert((1, dependency));
        }
        let waiters: Vec<i64> = counted.keys().copied().collect();
        let waiters = serde_json::to_string(&waiters).map_err(encode)?;
        let to_cancel: Vec<i64> = if status == FinalStatus::Completed {
            Vec::new()
        } else {
            sqlx::query_scalar(sql::CANCELLED_BY_FAILURE)
                .bind(&waiters)
                .fetch_all(&mut *conn)
                .await?
        };
        let mut cancelled = Vec::new();
        for waiter in to_cancel {
            let Some((_, dependency)) = counted.remove(&waiter) else {
                continue;
            };
            sqlx::query(sql::DELETE_WAITING_IDS)
                .bind(format!("[{waiter}]"))
                .execute(&mut *conn)
                .await?;
            let error = dependency_failed(JobId(dependency), status).to_string();
            let moved = move_to_history(
                conn,
                now,
                JobId(waiter),
                FinalStatus::Cancelled,
                None,
                Some(&error),
                None,
            )
            .await?;
            if moved {
                cancelled.push(waiter);
            }
        }
        if !counted.is_empty() {
            let counts: Vec<(i64, i64)> = counted.iter().map(|(w, (n, _))| (*w, *n)).collect();
            let counts = serde_json::to_string(&counts).map_err(encode)?;
            let queues: Vec<String> = sqlx::query_scalar(sql::RELEASE_WAITING)
                .bind(&counts)
                .bind(now)
                .fetch_all(&mut *conn)
                .await?;
            released.extend(queues);
            for statement in [sql::DELETE_RELEASED, sql::COUNT_DOWN_WAITING] {
                sqlx::query(statement)
                    .bind(&counts)
                    .execute(&mut *conn)
                    .await?;
            }
        }
        if !cancelled.is_empty() {
            events.push((cancelled, FinalStatus::Cancelled));
        }
    }
    Ok(())
}

/// `Storage::job_links` for `id`, read at `now`.
pub(crate) async fn links(
    conn: &mut SqliteConnection,
    now: DateTime<Utc>,
    id: JobId,
) -> Result<JobLinks> {
    let fail = crate::interpret_error;
    let exists: bool = sqlx::query_scalar(sql::JOB_EXISTS)
        .bind(id.get())
        .fetch_one(&mut *conn)
        .await
        .map_err(fail)?;
    if !exists {
        return Err(QueueError::not_found(format!("job {id}")));
    }
    let rows = sqlx::query(sql::JOB_LINKS)
        .bind(id.get())
        .fetch_all(&mut *conn)
        .await
        .map_err(fail)?;
    let mut links = JobLinks::default();
    for row in rows {
        let side: i64 = row.try_get("side").map_err(fail)?;
        let other = JobId(row.try_get("other").map_err(fail)?);
        let link = link_of(&row, other, now)?;
        if side == 0 {
            links.dependencies.push(link);
        } else {
            links.dependants.push(link);
        }
    }
    Ok(links)
}

/// One row of [`sql::JOB_LINKS`] as a link.
fn link_of(row: &sqlx::sqlite::SqliteRow, id: JobId, now: DateTime<Utc>) -> Result<JobLink> {
    let fail = crate::interpret_error;
    let live_queue: Option<String> = row.try_get("live_queue").map_err(fail)?;
    let live = match live_queue {
        Some(queue) => {
            let lease_until: Option<i64> = row.try_get("lease_until").map_err(fail)?;
            Some(LiveLink {
                queue,
                available_at: stored_instant(
                    "available_at",
                    row.try_get("available_at").map_err(fail)?,
                )?,
                lease_until: lease_until
                    .map(|micros| stored_instant("lease_until", micros))
                    .transpose()?,
                attempts: row.try_get("attempts").map_err(fail)?,
                max_attempts: row.try_get("max_attempts").map_err(fail)?,
            })
        }
        None => None,
    };
    let done_queue: Option<String> = row.try_get("done_queue").map_err(fail)?;
    let finished = match done_queue {
        Some(queue) => {
            let result: Option<String> = row.try_get("result").map_err(fail)?;
            Some(FinishedLink {
                queue,
                status: row.try_get("status_final").map_err(fail)?,
                result: result
                    .map(|text| serde_json::from_str(&text).map_err(|e| corrupt("result", e)))
                    .transpose()?,
            })
        }
        None => None,
    };
    job_link(id, live, finished, now)
}
