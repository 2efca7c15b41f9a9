//! Dequeue, heartbeat and release: taking, keeping and giving back leases.

use std::collections::HashSet;
use std::time::Duration;

use chrono::NaiveDateTime;
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Datetime, Integer, Nullable, Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use queue_core::time::{to_time_delta, truncate_to_micros};
use queue_core::{DequeueRequest, Job, Lease, Result, validate_lease};

use crate::MySqlStorage;
use crate::bind::{Param, cached, id_list, naive, placeholders, query};
use crate::error::{Failure, retrying};
use crate::rows::{JobRow, utc};
use crate::sql::{CLAIM_LEVEL, PICK, RELEASE};

/// A lease as the columns that identify it.
pub(crate) type LeaseKey = (i64, String, i32);

pub(crate) fn lease_key(lease: &Lease) -> LeaseKey {
    (
        lease.job_id.get(),
        lease.worker_id.as_str().to_owned(),
        i32::try_from(lease.attempt).unwrap_or(i32::MAX),
    )
}

/// A held row's identity, as read `FOR UPDATE`.
#[derive(QueryableByName)]
pub(crate) struct HeldRow {
    #[diesel(sql_type = BigInt)]
    pub(crate) id: i64,
    #[diesel(sql_type = Nullable<Text>)]
    pub(crate) locked_by: Option<String>,
    #[diesel(sql_type = Integer)]
    pub(crate) attempts: i32,
    #[diesel(sql_type = Integer)]
    pub(crate) max_attempts: i32,
}

impl HeldRow {
    pub(crate) fn key(&self) -> Option<LeaseKey> {
        self.locked_by.clone().map(|w| (self.id, w, self.attempts))
    }
}

/// A claimable row and the claim statement's "now".
#[derive(QueryableByName)]
struct Candidate {
    #[diesel(embed)]
    job: JobRow,
    #[diesel(sql_type = Datetime)]
    now_ts: NaiveDateTime,
}

/// One priority level of a queue's unleased jobs.
#[derive(QueryableByName)]
struct Level {
    #[diesel(sql_type = Integer)]
    priority: i32,
}

/// Locks the leased rows among `ids` (optionally only unexpired at `now`)
/// and returns their identities.
pub(crate) async fn lock_leased(
    conn: &mut AsyncMysqlConnection,
    ids: &[i64],
    unexpired_at: Option<NaiveDateTime>,
) -> Result<Vec<HeldRow>, Failure> {
    let ids = id_list(ids);
    let mut sql = format!(
        "SELECT id, locked_by, attempts, max_attempts FROM job_queue WHERE id IN {} AND lease_until IS NOT NULL",
        placeholders(ids.len())
    );
    let mut params: Vec<Param> = ids.iter().map(|id| Param::Int(*id)).collect();
    if let Some(now) = unexpired_at {
        sql.push_str(" AND lease_until > ?");
        params.push(Param::Time(now));
    }
    sql.push_str(" FOR UPDATE");
    Ok(cached(sql, params).load::<HeldRow>(conn).await?)
}

/// `now + by`, at microsecond precision.
pub(crate) fn later(now: NaiveDateTime, by: Duration) -> NaiveDateTime {
    naive(truncate_to_micros(utc(now) + to_time_delta(by)))
}

impl MySqlStorage {
    pub(crate) async fn dequeue_pooled(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        retrying(false, || async {
            let mut conn = self.connection().await?;
            conn.transaction(async |conn| self.dequeue_on(conn, request).await)
                .await
        })
        .await
    }

    /// Per queue, priority level by priority level (highest first), one
    /// probe for the next level ([`CLAIM_LEVEL`]) and one range scan of
    /// its due jobs reading whole rows ([`PICK`]), until the queue's cap is
    /// met or no level is left; the best `limit` of all leased in one
    /// UPDATE. For one queue whose jobs share one priority: BEGIN, probe,
    /// scan, UPDATE, COMMIT (and one more probe when fewer than the cap
    /// were due).
    pub(crate) async fn dequeue_on(
        &self,
        conn: &mut AsyncMysqlConnection,
        request: &DequeueRequest,
    ) -> Result<Vec<Job>, Failure> {
        let fixed = self.now_override();
        let mut candidates = Vec::new();
        for (queue, cap) in request.queues().iter().zip(request.queue_limits()) {
            let name = || Param::Text(queue.as_str().to_owned());
            let mut taken = 0;
            // Above every priority: the first step finds the highest level.
            let mut bound = i64::from(i32::MAX) + 1;
            while taken < *cap as usize {
                let levels = cached(CLAIM_LEVEL, vec![name(), Param::Int(bound)])
                    .load::<Level>(conn)
                    .await?;
                let Some(level) = levels.into_iter().next().map(|l| l.priority) else {
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
                let picked = cached(PICK, params).load::<Candidate>(conn).await?;
                taken += picked.len();
                candidates.extend(picked);
            }
        }
        // The latest of the scans' clocks: every candidate was due by then.
        let Some(now) = candidates.iter().map(|c| c.now_ts).max() else {
            return Ok(Vec::new());
        };
        candidates.sort_by(|a, b| {
            (b.job.priority, a.job.available_at, a.job.id).cmp(&(
                a.job.priority,
                b.job.available_at,
                b.job.id,
            ))
        });
        candidates.truncate(request.limit() as usize);
        let ids: Vec<i64> = candidates.iter().map(|c| c.job.id).collect();
        let lease_until = later(now, request.lease());

        let padded = id_list(&ids);
        let sql = format!(
            "UPDATE job_queue SET attempts = attempts + 1, lease_until = ?, locked_by = ?, \
             first_locked_at = COALESCE(first_locked_at, ?), updated_at = ? WHERE id IN {}",
            placeholders(padded.len())
        );
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

    pub(crate) async fn heartbeat_pooled(
        &self,
        leases: &[Lease],
        extend_by: Duration,
    ) -> Result<Vec<bool>> {
        validate_lease("extend_by", extend_by)?;
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        retrying(true, || async {
            let mut conn = self.connection().await?;
            conn.transaction(async |conn| self.heartbeat_on(conn, leases, extend_by).await)
                .await
        })
        .await
    }

    async fn heartbeat_on(
        &self,
        conn: &mut AsyncMysqlConnection,
        leases: &[Lease],
        extend_by: Duration,
    ) -> Result<Vec<bool>, Failure> {
        let now = self.resolve_now(conn).await?;
        let ids: Vec<i64> = leases.iter().map(|l| l.job_id.get()).collect();
        let alive: HashSet<LeaseKey> = lock_leased(conn, &ids, Some(now))
            .await?
            .iter()
            .filter_map(HeldRow::key)
            .collect();
        let extend: Vec<i64> = leases
            .iter()
            .map(lease_key)
            .filter(|k| alive.contains(k))
            .map(|k| k.0)
            .collect();
        if !extend.is_empty() {
            let sql = format!(
                "UPDATE job_queue SET lease_until = ?, updated_at = ? WHERE id IN {}",
                placeholders(extend.len())
            );
            let mut params = vec![Param::Time(later(now, extend_by)), Param::Time(now)];
            params.extend(extend.iter().map(|id| Param::Int(*id)));
            query(&sql, params).execute(conn).await?;
        }
        Ok(leases
            .iter()
            .map(|l| alive.contains(&lease_key(l)))
            .collect())
    }

    pub(crate) async fn release_pooled(&self, lease: &Lease) -> Result<bool> {
        let (id, worker, attempt) = lease_key(lease);
        let now = self.now_override();
        retrying(false, || async {
            let mut conn = self.connection().await?;
            let params = vec![
                Param::OptTime(now),
                Param::OptTime(now),
                Param::Int(id),
                Param::Text(worker.clone()),
                Param::Int(i64::from(attempt)),
            ];
            Ok(query(RELEASE, params).execute(&mut conn).await? == 1)
        })
        .await
    }
}
