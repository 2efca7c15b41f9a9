//! Dequeue: one range scan per queue, the best of their rows leased in
//! one UPDATE, in one transaction.

use chrono::NaiveDateTime;
use diesel::QueryableByName;
use diesel::sql_types::Datetime;
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use queue_core::backend::claim_order;
use queue_core::{DequeueRequest, Job, Result};

use crate::MySqlStorage;
use crate::bind::{Param, cached, id_list};
use crate::error::{Failure, retrying};
use crate::heartbeat::later;
use crate::rows::JobRow;
use crate::sql::{self, DEQUEUE_PICK};

/// A claimable row and the claim statement's "now".
#[derive(QueryableByName)]
struct Candidate {
    #[diesel(embed)]
    job: JobRow,
    #[diesel(sql_type = Datetime)]
    now_ts: NaiveDateTime,
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

    /// One range scan per queue reading whole rows, the best `limit` of
    /// their results leased in one UPDATE; one transaction of four round
    /// trips (BEGIN, scan, UPDATE, COMMIT) for one queue.
    async fn dequeue_on(
        &self,
        conn: &mut AsyncMysqlConnection,
        request: &DequeueRequest,
    ) -> Result<Vec<Job>, Failure> {
        let fixed = self.now_override();
        let mut candidates = Vec::new();
        for (queue, cap) in request.queues().iter().zip(request.queue_limits()) {
            let params = vec![
                Param::OptTime(fixed),
                Param::Text(queue.as_str().to_owned()),
                Param::OptTime(fixed),
                Param::Text(queue.as_str().to_owned()),
                Param::Int(i64::from(*cap)),
            ];
            candidates.extend(cached(DEQUEUE_PICK, params).load::<Candidate>(conn).await?);
        }
        // The latest of the scans' clocks: every candidate was due by then.
        let Some(now) = candidates.iter().map(|c| c.now_ts).max() else {
            return Ok(Vec::new());
        };
        candidates.sort_by_key(|c| claim_order(c.job.priority, c.job.available_at, c.job.id));
        candidates.truncate(request.limit() as usize);
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
}
