//! Dequeue: the best due jobs of the requested queues, leased in one
//! statement (`FOR UPDATE SKIP LOCKED`, picked from the ready ring and the
//! scheduled jobs' index: `queue_pick`, migration 0010); a claim on a queue
//! with limits applies them first in the same statement (`flow.rs`). After
//! a claim the handle may rotate the ring (`ready_ring.rs`).

use queue_core::backend::claim_order;
use queue_core::time::duration_micros;
use queue_core::{DequeueRequest, Job, Result};

use sqlx::Row;
use sqlx::postgres::{PgArguments, PgRow, Postgres};
use sqlx::query::Query;

use crate::error::retrying;
use crate::flow::ClaimPath;
use crate::{PgStorage, interpret_error, rows};

/// The claim statement's array parameters, built once per request.
pub(crate) struct ClaimBinds<'r> {
    queues: Vec<&'r str>,
    caps: Vec<i64>,
}

impl<'r> ClaimBinds<'r> {
    pub(crate) fn of(request: &'r DequeueRequest) -> Self {
        Self {
            queues: request.queues().iter().map(|q| q.as_str()).collect(),
            caps: request
                .queue_limits()
                .iter()
                .map(|c| i64::from(*c))
                .collect(),
        }
    }
}

impl PgStorage {
    /// Binds the claim statement's parameters ($1 clock … $5 worker, and
    /// $6 the per-queue caps, which only the several-queue and limited
    /// statements have: `several`).
    pub(crate) fn bind_claim<'q>(
        &self,
        query: Query<'q, Postgres, PgArguments>,
        request: &'q DequeueRequest,
        binds: &'q ClaimBinds<'q>,
        several: bool,
    ) -> Query<'q, Postgres, PgArguments> {
        let query = query
            .bind(self.now_override())
            .bind(&binds.queues)
            .bind(i64::from(request.limit()))
            .bind(duration_micros(request.lease()))
            .bind(request.worker_id().as_str());
        if several {
            query.bind(&binds.caps)
        } else {
            query
        }
    }

    /// The claim statement for `request` and whether it binds the
    /// per-queue caps ($6). Plain: a plain index scan for one queue, a
    /// per-queue LATERAL scan for several (locking as it scans when the
    /// caps add up to the limit, else locking only the best). Limited (a
    /// queue of the request has limits): the same with the limits applied
    /// first (`flow.rs`). Grouped: one queue whose only limits are its
    /// groups'.
    pub(crate) fn dequeue_statement(
        &self,
        request: &DequeueRequest,
        path: ClaimPath,
    ) -> (sqlx::SqlStr, bool) {
        let several = request.queues().len() > 1;
        let statement = match (path, several, request.over_subscribed()) {
            (ClaimPath::Grouped, false, _) => &self.sql.dequeue_grouped_one_queue,
            (ClaimPath::Plain, false, _) => &self.sql.dequeue_one_queue,
            (ClaimPath::Plain, true, false) => &self.sql.dequeue_many_queues,
            (ClaimPath::Plain, true, true) => &self.sql.dequeue_many_queues_over,
            (_, false, _) => &self.sql.dequeue_limited_one_queue,
            (_, true, false) => &self.sql.dequeue_limited,
            (_, true, true) => &self.sql.dequeue_limited_over,
        };
        (statement.clone(), several)
    }

    pub(crate) async fn dequeue_pooled(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        let mut path = self.claim_path(request).await?;
        let mut rows = self.claim_rows(request, path).await?;
        if path == ClaimPath::Grouped {
            match grouped_jobs(&rows)? {
                Some(jobs) => {
                    self.rotate_ready_ring();
                    return Ok(jobs);
                }
                // The queue is no longer groups only: the limited claim is
                // right whatever its config now is.
                None => {
                    self.forget_limited_queues();
                    path = ClaimPath::Limited;
                    rows = self.claim_rows(request, path).await?;
                }
            }
        }
        self.rotate_ready_ring();
        // RETURNING has no order; the claim's order is the contract's.
        if path == ClaimPath::Limited {
            // The limited statement gives each job's place (`claim_rank`:
            // an aging queue's jobs lifted by their wait, a fair queue's
            // groups in turn).
            let mut jobs = (rows.iter())
                .map(|row| {
                    let rank: i64 = row.try_get("claim_rank").map_err(interpret_error)?;
                    Ok((rank, rows::job(row)?))
                })
                .collect::<Result<Vec<_>>>()?;
            jobs.sort_by_key(|(rank, _)| *rank);
            return Ok(jobs.into_iter().map(|(_, job)| job).collect());
        }
        in_claim_order(rows.iter().map(rows::job))
    }

    /// The rows of `request`'s claim by the statement of `path`.
    async fn claim_rows(&self, request: &DequeueRequest, path: ClaimPath) -> Result<Vec<PgRow>> {
        let (statement, several) = self.dequeue_statement(request, path);
        let binds = ClaimBinds::of(request);
        retrying(false, || {
            self.db().fetch_all(self.bind_claim(
                sqlx::query(statement.clone()),
                request,
                &binds,
                several,
            ))
        })
        .await
    }
}

/// The jobs a grouped claim (`DEQUEUE_GROUPED_ONE_QUEUE`) returned, in
/// claim order; `None` when it said `stale` and claimed nothing. Its row
/// without a job (no `id`) stands for no job.
fn grouped_jobs(rows: &[PgRow]) -> Result<Option<Vec<Job>>> {
    let mut jobs = Vec::with_capacity(rows.len());
    for row in rows {
        if row.try_get::<bool, _>("stale").map_err(interpret_error)? {
            return Ok(None);
        }
        if row
            .try_get::<Option<i64>, _>("id")
            .map_err(interpret_error)?
            .is_some()
        {
            jobs.push(rows::job(row));
        }
    }
    in_claim_order(jobs.into_iter()).map(Some)
}

/// `jobs` sorted by the contract's claim order.
fn in_claim_order(jobs: impl Iterator<Item = Result<Job>>) -> Result<Vec<Job>> {
    let mut jobs = jobs.collect::<Result<Vec<_>>>()?;
    jobs.sort_by_key(|job| claim_order(job.priority, job.available_at, job.id.get()));
    Ok(jobs)
}
