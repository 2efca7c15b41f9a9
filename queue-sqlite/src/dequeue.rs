//! Dequeue: the best claimable jobs across queues, leased in one write
//! transaction (SQLite has one writer at a time, so nobody else can claim
//! them in between).
//!
//! Each queue is read priority level by priority level, highest first: one
//! index probe finds the next level, one range scan takes its due jobs (it
//! stops at the first job not due yet). A scan in plain claim order
//! (priority, available_at, id) with `available_at <= now` as a filter
//! walked every job not yet due whenever fewer than the limit were due.

use queue_core::backend::claim_order;
use queue_core::time::duration_micros;
use queue_core::{DequeueRequest, Job, QueueName, Result};
use sqlx::Sqlite;
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Row, SqliteConnection};

use crate::flow::LimitedClaim;
use crate::{SqliteStorage, rows, sql};

impl SqliteStorage {
    pub(crate) async fn dequeue_pooled(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        let rows = if self.names_limited_queue(request).await? {
            return self.dequeue_limited_queue(request).await;
        } else if let [queue] = request.queues() {
            // One statement for the queue's top priority level; the lower
            // levels only when it had fewer due jobs than the claim takes.
            let cap = request.queue_limit(queue).min(request.limit());
            let mut rows = write_statement!(self, |conn, now| claim_queue(
                conn, now, request, queue, cap
            ))?;
            let taken = rows.len();
            if taken < cap as usize {
                rows.extend(write_tx!(self, |conn, now| claim(
                    conn, now, request, taken
                ))?);
            }
            rows
        } else {
            write_tx!(self, |conn, now| claim(conn, now, request, 0))?
        };
        jobs_in_claim_order(&rows)
    }
}

/// The jobs of claimed `rows`, in claim order (`RETURNING` lists rows in
/// no particular order).
fn jobs_in_claim_order(rows: &[SqliteRow]) -> Result<Vec<Job>> {
    let mut jobs = rows.iter().map(rows::job).collect::<Result<Vec<_>>>()?;
    jobs.sort_by_key(|job| claim_order(job.priority, job.available_at, job.id.get()));
    Ok(jobs)
}

impl SqliteStorage {
    /// A claim naming a limited queue. A single queue whose only limits are
    /// its groups' ([`SqliteStorage::names_groups_only_queue`]) is first
    /// claimed by one statement
    /// ([`sql::GROUP_CLAIM_QUEUE`]); the limited path's transaction takes
    /// what that statement could not (another kind of limit, a page of full
    /// groups, the rest of the level, the levels below), the jobs already
    /// taken counted among the groups' leases.
    async fn dequeue_limited_queue(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        let mut jobs = Vec::new();
        let narrowed;
        let mut rest = Some(request);
        if let [queue] = request.queues()
            && self.names_groups_only_queue(request).await?
        {
            let cap = request.queue_limit(queue).min(request.limit());
            // Room for a few full groups' jobs beyond the jobs it takes.
            let page = i64::from(cap.saturating_add(GROUP_CLAIM_SLACK));
            let rows = write_statement!(self, |conn, now| {
                claim_statement(sql::GROUP_CLAIM_QUEUE, now, request, queue, cap)
                    .bind(page)
                    .fetch_all(conn)
            })?;
            jobs = jobs_in_claim_order(&rows)?;
            let left = cap - u32::try_from(jobs.len()).unwrap_or(cap);
            narrowed = (left > 0)
                .then(|| request.narrowed(&[(queue.clone(), left)]))
                .flatten();
            rest = narrowed.as_ref();
        }
        let Some(rest) = rest else {
            return Ok(jobs);
        };
        let claim = self.dequeue_limited(rest).await?;
        if claim.order.is_empty() {
            jobs.extend(jobs_in_claim_order(&claim.rows)?);
        } else {
            jobs.extend(picked_jobs(&claim)?);
        }
        Ok(jobs)
    }
}

/// Beyond the jobs a one-statement grouped claim takes, the jobs it reads
/// for them: room for a few jobs of full groups at the head of the queue.
/// Each job read costs that statement a row read and an index probe per
/// limit it checks, so its page is kept short; a claim it cannot fill goes
/// on in the limited path, which pages through the rest.
const GROUP_CLAIM_SLACK: u32 = 8;

/// The jobs of a limited claim that picked them, in the order it picked
/// them (the contract's, with effective priorities and fair orders).
fn picked_jobs(claim: &LimitedClaim) -> Result<Vec<Job>> {
    let mut jobs = (claim.rows.iter())
        .map(rows::job)
        .collect::<Result<Vec<_>>>()?;
    let place = |job: &Job| claim.order.iter().position(|id| *id == job.id.get());
    jobs.sort_by_key(place);
    Ok(jobs)
}

/// Leases the jobs of a request inside the caller's write transaction:
/// the statements of the plain path (one for a single queue's top level,
/// the level walk for the rest).
pub(crate) async fn claim_any(
    conn: &mut SqliteConnection,
    now: i64,
    request: &DequeueRequest,
) -> Result<Vec<SqliteRow>, sqlx::Error> {
    let [queue] = request.queues() else {
        return claim(conn, now, request, 0).await;
    };
    let cap = request.queue_limit(queue).min(request.limit());
    let mut rows = claim_queue(conn, now, request, queue, cap).await?;
    let taken = rows.len();
    if taken < cap as usize {
        rows.extend(claim(conn, now, request, taken).await?);
    }
    Ok(rows)
}

/// Leases the best `cap` claimable jobs of `queue`, in one statement that
/// picks and leases them.
async fn claim_queue(
    conn: &mut SqliteConnection,
    now: i64,
    request: &DequeueRequest,
    queue: &QueueName,
    cap: u32,
) -> Result<Vec<SqliteRow>, sqlx::Error> {
    claim_statement(sql::DEQUEUE_CLAIM_QUEUE, now, request, queue, cap)
        .fetch_all(conn)
        .await
}

/// `statement`, a claim of one queue, with the parameters such claims
/// share bound: ?1 now, ?2 the queue, ?3 the lease's end, ?4 the worker,
/// ?5 the most jobs it takes.
fn claim_statement<'q>(
    statement: &'static str,
    now: i64,
    request: &'q DequeueRequest,
    queue: &'q QueueName,
    cap: u32,
) -> sqlx::query::Query<'q, Sqlite, SqliteArguments> {
    sqlx::query(statement)
        .bind(now)
        .bind(queue.as_str())
        .bind(now.saturating_add(duration_micros(request.lease())))
        .bind(request.worker_id().as_str())
        .bind(i64::from(cap))
}

/// Leases the jobs of a request: picks the best of each queue level by
/// level, merges them in claim order up to the limit, and leases those in
/// one statement. `taken` jobs were claimed already (a single queue's top
/// level): they count against the limits.
async fn claim(
    conn: &mut SqliteConnection,
    now: i64,
    request: &DequeueRequest,
    taken: usize,
) -> Result<Vec<SqliteRow>, sqlx::Error> {
    let mut candidates: Vec<Candidate> = Vec::new();
    for queue in request.queues() {
        let cap = (request.queue_limit(queue).min(request.limit()) as usize).saturating_sub(taken);
        candidates.extend(pick_queue(conn, now, queue, cap).await?);
    }
    let limit = usize::try_from(request.limit())
        .unwrap_or(usize::MAX)
        .saturating_sub(taken);
    candidates.sort_by_key(|&(priority, available_at, id)| claim_order(priority, available_at, id));
    candidates.truncate(limit);
    claim_candidates(conn, now, request, &candidates).await
}

/// A job a claim may take: `(priority, available_at, id)`; for a job of an
/// aging queue, its effective priority at the claim's now (what the merge
/// across queues sorts by).
pub(crate) type Candidate = (i32, i64, i64);

/// The candidate a picked row (`id, priority, available_at`) stands for,
/// its priority as stored.
pub(crate) fn candidate_of(row: &SqliteRow) -> Result<Candidate, sqlx::Error> {
    Ok((
        row.try_get("priority")?,
        row.try_get("available_at")?,
        row.try_get("id")?,
    ))
}

/// The best `cap` claimable jobs of `queue`, walking its priority levels
/// from the highest.
pub(crate) async fn pick_queue(
    conn: &mut SqliteConnection,
    now: i64,
    queue: &QueueName,
    cap: usize,
) -> Result<Vec<Candidate>, sqlx::Error> {
    let mut candidates = Vec::new();
    // Above every priority: the first step finds the highest level.
    let mut bound = i64::from(i32::MAX) + 1;
    while candidates.len() < cap {
        let level: Option<i32> = sqlx::query_scalar(sql::DEQUEUE_LEVEL)
            .bind(queue.as_str())
            .bind(bound)
            .fetch_optional(&mut *conn)
            .await?;
        let Some(level) = level else { break };
        bound = i64::from(level);
        let picked = sqlx::query(sql::DEQUEUE_PICK)
            .bind(now)
            .bind(queue.as_str())
            .bind(i64::try_from(cap - candidates.len()).unwrap_or(i64::MAX))
            .bind(level)
            .fetch_all(&mut *conn)
            .await?;
        for row in picked {
            candidates.push(candidate_of(&row)?);
        }
    }
    Ok(candidates)
}

/// Leases `candidates` (picked from the queues of `request`, the best
/// within its limits) in one statement.
pub(crate) async fn claim_candidates(
    conn: &mut SqliteConnection,
    now: i64,
    request: &DequeueRequest,
    candidates: &[Candidate],
) -> Result<Vec<SqliteRow>, sqlx::Error> {
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let lease_until = now.saturating_add(duration_micros(request.lease()));
    let ids: Vec<i64> = candidates.iter().map(|&(_, _, id)| id).collect();
    let ids = serde_json::to_string(&ids).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    sqlx::query(sql::DEQUEUE_CLAIM_IDS)
        .bind(now)
        .bind(ids)
        .bind(lease_until)
        .bind(request.worker_id().as_str())
        .fetch_all(&mut *conn)
        .await
}
