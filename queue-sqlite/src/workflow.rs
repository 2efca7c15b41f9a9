//! Workflows on SQLite: recording a job's dependencies at enqueue, and
//! what finishing a job does to the jobs waiting on it, in the same write
//! transaction (migration 0012; the contract is `Storage::enqueue_batch`'s).

use chrono::{DateTime, Utc};
use queue_core::backend::{FinishedLink, LiveLink, corrupt, job_link, stored_instant};
use queue_core::{
    Dependency, DependencyFailure, EnqueueOutcome, FinalStatus, JobId, JobLink, JobLinks,
    QueueError, Result, ValidJob, dependency_failed, failed_dependency, unknown_dependency,
};
use sqlx::{Row, SqliteConnection};

use crate::complete::move_to_history;
use crate::sql;

/// The queues of the jobs a finish released: workers to wake after the commit.
pub(crate) type Released = Vec<String>;

/// Refuses a batch whose dependencies on jobs enqueued before are unknown,
/// or failed for a job that would be cancelled at once: `Ok(Err(..))`,
/// nothing written. Run in the enqueue's write transaction.
pub(crate) async fn check(
    conn: &mut SqliteConnection,
    jobs: &[ValidJob],
) -> Result<Result<(), QueueError>, sqlx::Error> {
    for job in jobs {
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
/// makes it wait for those still live.
pub(crate) async fn link(
    conn: &mut SqliteConnection,
    now: i64,
    jobs: &[ValidJob],
    outcomes: &[EnqueueOutcome],
) -> Result<(), sqlx::Error> {
    let start = stored_instant("time", now).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
    for (job, outcome) in jobs.iter().zip(outcomes) {
        if outcome.existed || job.dependencies.is_empty() {
            continue;
        }
        let mut remaining: i64 = 0;
        for dependency in &job.dependencies {
            // A job of the batch is live (new, or the one holding its
            // key); one enqueued before is live or, as `check` found, in
            // history.
            let (id, unfinished) = match *dependency {
                Dependency::InBatch(index) => (outcomes[index].id, true),
                Dependency::Job(id) => {
                    let status: Option<String> = sqlx::query_scalar(sql::DEPENDENCY_STATUS)
                        .bind(id.get())
                        .fetch_optional(&mut *conn)
                        .await?;
                    (id, status.as_deref() == Some("live"))
                }
            };
            let done = sqlx::query(sql::INSERT_DEPENDENCY)
                .bind(outcome.id.get())
                .bind(id.get())
                .bind(i64::from(unfinished))
                .execute(&mut *conn)
                .await?;
            if unfinished && done.rows_affected() == 1 {
                remaining += 1;
            }
        }
        if remaining > 0 {
            sqlx::query(sql::INSERT_WAITING)
                .bind(outcome.id.get())
                .bind(remaining)
                .bind(job.available_at(start).timestamp_micros())
                .bind(job.on_dependency_failure.as_str())
                .execute(&mut *conn)
                .await?;
            sqlx::query(sql::SET_AVAILABLE)
                .bind(outcome.id.get())
                .bind(sql::WAITING_AT)
                .bind(now)
                .execute(&mut *conn)
                .await?;
        }
    }
    Ok(())
}

/// What the jobs `finished` leaving the live table as `status` do to the
/// jobs waiting on them: each waiting job counts each of them once; the
/// last one releases it (its queue goes to `released`), a failure cancels
/// a job that does not run anyway, and those cancellations are finishes of
/// their own, handled in turn. One statement counts a whole ack's finishes.
pub(crate) async fn finish(
    conn: &mut SqliteConnection,
    now: i64,
    finished: &[i64],
    status: FinalStatus,
    released: &mut Released,
) -> Result<(), sqlx::Error> {
    let mut events = vec![(finished.to_vec(), status)];
    while let Some((finished, status)) = events.pop() {
        let ids = serde_json::to_string(&finished).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
        // A job that held a lease (acked, nacked, reclaimed) was not
        // waiting; one discarded or cancelled may have been.
        if matches!(status, FinalStatus::Discarded | FinalStatus::Cancelled) {
            sqlx::query(sql::DELETE_WAITING_IDS)
                .bind(&ids)
                .execute(&mut *conn)
                .await?;
        }
        let mut counted: Vec<(i64, i64)> = sqlx::query_as(sql::FINISH_DEPENDENCIES)
            .bind(&ids)
            .fetch_all(&mut *conn)
            .await?;
        // A job cancelled by several failures at once names the lowest.
        counted.sort_unstable();
        let mut cancelled = Vec::new();
        for (waiter, dependency) in counted {
            let found: Option<(i64, i64, String)> = sqlx::query_as(sql::GET_WAITING)
                .bind(waiter)
                .fetch_optional(&mut *conn)
                .await?;
            let Some((remaining, run_at, on_failure)) = found else {
                continue;
            };
            let on_failure = DependencyFailure::parse(&on_failure)
                .map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
            if !on_failure.counts(status) {
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
            } else if remaining > 1 {
                sqlx::query(sql::COUNT_DOWN_WAITING)
                    .bind(waiter)
                    .execute(&mut *conn)
                    .await?;
            } else {
                sqlx::query(sql::DELETE_WAITING)
                    .bind(waiter)
                    .execute(&mut *conn)
                    .await?;
                let queue: Option<String> = sqlx::query_scalar(sql::RELEASE_WAITING)
                    .bind(waiter)
                    .bind(run_at.max(now))
                    .bind(now)
                    .fetch_optional(&mut *conn)
                    .await?;
                released.extend(queue);
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
