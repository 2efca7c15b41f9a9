//! Dequeue: one range scan per queue, the best of their rows leased in
//! one UPDATE, in one transaction; a claim on a queue with limits locks
//! and applies them first, in the same transaction (`flow.rs`).

use chrono::NaiveDateTime;
use diesel::QueryableByName;
use diesel::sql_types::{Datetime, Integer};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use queue_core::backend::claim_order;
use queue_core::{DequeueRequest, Job, Result};

use crate::MySqlStorage;
use crate::bind::{Param, cached, id_list};
use crate::error::Failure;
use crate::heartbeat::later;
use crate::rows::JobRow;
use crate::sql::{self, DEQUEUE_LEVEL, DEQUEUE_PEEK, DEQUEUE_PICK};

/// A claimable row and the claim statement's "now".
#[derive(QueryableByName)]
struct Candidate {
    #[diesel(embed)]
    job: JobRow,
    #[diesel(sql_type = Datetime)]
    now_ts: NaiveDateTime,
}

/// Per queue, the highest priority of its unleased jobs, where known
/// (`None`: it has none).
pub(crate) type TopLevels = std::collections::HashMap<String, Option<i32>>;

/// One priority level of a queue's unleased jobs.
#[derive(QueryableByName)]
pub(crate) struct Level {
    #[diesel(sql_type = Integer)]
    pub(crate) priority: i32,
}

impl MySqlStorage {
    pub(crate) async fn dequeue_pooled(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        let limited = self.claim_is_limited(request).await?;
        self.retrying(false, || async {
            let mut conn = self.connection().await?;
            conn.transaction(async |conn| {
                if limited {
                    self.dequeue_limited_on(conn, request).await
                } else {
                    self.dequeue_on(conn, request, &TopLevels::new()).await
                }
            })
            .await
        })
        .await
    }

    /// Per queue, priority level by priority level (highest first), one
    /// probe for the next level ([`DEQUEUE_LEVEL`]) and one range scan of
    /// its due jobs reading whole rows, until the queue's cap is met or no
    /// level is left; the best `limit` of all are then locked and read
    /// again by id ([`sql::dequeue_lock_picked`], skipping rows another
    /// claim holds) and leased in one UPDATE. For one queue whose jobs
    /// share one priority: BEGIN, probe, scan, lock, UPDATE, COMMIT (and one
    /// more probe when fewer than the cap were due).
    ///
    /// The scans do not lock ([`DEQUEUE_PEEK`]). A locking scan of the
    /// dequeue index steps over the entries of every job claimed or
    /// finished since InnoDB's purge last ran (its delete-marked entries at
    /// the head of the range), at a cost that grows with the purge lag: a
    /// 20,000-job drain read 4,800 pages per locking scan of 15 rows, and
    /// the scan took 1.3-1.4 ms of the claim's 2.8; a consistent read of
    /// the same range reads about 50 pages whatever the lag. When a racing
    /// claim took some of the rows between the scan and the lock (the lock
    /// returns fewer), a claim of one queue, or of several whose caps fit
    /// the limit, scans again with locks ([`DEQUEUE_PICK`]): those skip
    /// what other claims hold and return the best rest, the rows this claim
    /// locked among them. On several queues whose caps add up to more than
    /// the limit it keeps what it locked: a locking scan there would hold
    /// rows the claim does not take until it commits (a racing claimer
    /// would skip them and take worse jobs).
    ///
    /// `top` holds queues whose highest level of unleased jobs is known
    /// already (`None`: it has none), read by the limited claim's lock
    /// statement: their first probe is skipped.
    pub(crate) async fn dequeue_on(
        &self,
        conn: &mut AsyncMysqlConnection,
        request: &DequeueRequest,
        top: &TopLevels,
    ) -> Result<Vec<Job>, Failure> {
        let fixed = self.now_override();
        let mut candidates = self.scan(conn, request, top, DEQUEUE_PEEK).await?;
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let peeked = candidates.len();
        let ids: Vec<i64> = candidates.iter().map(|c| c.job.id).collect();
        let padded = id_list(&ids);
        let mut params = vec![Param::OptTime(fixed)];
        params.extend(padded.iter().map(|id| Param::Int(*id)));
        params.push(Param::OptTime(fixed));
        candidates = cached(sql::dequeue_lock_picked(padded.len()), params)
            .load::<Candidate>(conn)
            .await?;
        if candidates.len() < peeked && !request.over_subscribed() {
            candidates = self.scan(conn, request, top, DEQUEUE_PICK).await?;
        }
        candidates.sort_by_key(|c| claim_order(c.job.priority, c.job.available_at, c.job.id));
        // The latest of the reads' clocks: every candidate was due by then.
        let Some(now) = candidates.iter().map(|c| c.now_ts).max() else {
            return Ok(Vec::new());
        };
        let ids: Vec<i64> = candidates.iter().map(|c| c.job.id).collect();
        let lease_until = later(now, request.lease());

        let padded = id_list(&ids);
        let sql = sql::dequeue_lease(padded.len());
        let mut params = vec![
            Param::Time(lease_until),
            Param::Text(request.worker_id().as_str().to_owned()),
            Param::Time(now),
            Param::Time(now),
        ];
        params.extend(padded.iter().map(|id| Param::Int(*id)));
        let updated = cached(sql, params).execute(conn).await?;
        if updated != ids.len() {
            return Err(Failure::Invariant("a locked claimable row was not updated"));
        }

        // What the UPDATE wrote, applied to the rows read under lock.
        candidates
            .into_iter()
            .map(|c| {
                let mut row = c.job;
                row.attempts += 1;
                row.lease_until = Some(lease_until);
                row.locked_by = Some(request.worker_id().as_str().to_owned());
                row.first_locked_at = row.first_locked_at.or(Some(now));
                row.updated_at = now;
                row.into_job()
                    .map_err(|_| Failure::Invariant("a claimed job could not be read"))
            })
            .collect()
    }

    /// The claimable rows of each queue of `request`, level by level, up to
    /// the queue's cap, by `scan` ([`DEQUEUE_PEEK`] or [`DEQUEUE_PICK`]);
    /// the best `limit` of them in claim order.
    async fn scan(
        &self,
        conn: &mut AsyncMysqlConnection,
        request: &DequeueRequest,
        top: &TopLevels,
        scan: &'static str,
    ) -> Result<Vec<Candidate>, Failure> {
        let fixed = self.now_override();
        let mut candidates = Vec::new();
        for (queue, cap) in request.queues().iter().zip(request.queue_limits()) {
            let name = || Param::Text(queue.as_str().to_owned());
            let mut taken = 0;
            // Above every priority: the first step finds the highest level.
            let mut bound = i64::from(i32::MAX) + 1;
            // The limited claim's lock statement read the first level.
            let mut known = top.get(queue.as_str()).copied();
            while taken < *cap as usize {
                let level = match known.take() {
                    Some(level) => level,
                    None => cached(DEQUEUE_LEVEL, vec![name(), Param::Int(bound)])
                        .load::<Level>(conn)
                        .await?
                        .into_iter()
                        .next()
                        .map(|l| l.priority),
                };
                let Some(level) = level else {
                    break;
                };
                bound = i64::from(level);
                let params = vec![
                    Param::OptTime(fixed),
                    name(),
                    Param::Int(i64::from(level)),
                    Param::OptTime(fixed),
                    name(),
                    Param::Int(i64::try_from(*cap as usize - taken).unwrap_or(i64::MAX)),
                ];
                let picked = cached(scan, params).load::<Candidate>(conn).await?;
                taken += picked.len();
                candidates.extend(picked);
            }
        }
        candidates.sort_by_key(|c| claim_order(c.job.priority, c.job.available_at, c.job.id));
        candidates.truncate(request.limit() as usize);
        Ok(candidates)
    }
}
