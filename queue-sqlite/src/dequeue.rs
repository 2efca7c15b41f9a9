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
use queue_core::{DequeueRequest, Job, Result};
use sqlx::{Row, SqliteConnection};

use crate::{SqliteStorage, rows, sql};

impl SqliteStorage {
    pub(crate) async fn dequeue_pooled(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        let rows = write_tx!(self, |conn, now| claim(conn, now, request))?;
        rows.iter().map(rows::job).collect()
    }
}

async fn claim(
    conn: &mut SqliteConnection,
    now: i64,
    request: &DequeueRequest,
) -> Result<Vec<sqlx::sqlite::SqliteRow>, sqlx::Error> {
    let mut candidates: Vec<(i32, i64, i64)> = Vec::new();
    for queue in request.queues() {
        let cap = request.queue_limit(queue).min(request.limit()) as usize;
        let mut taken = 0;
        // Above every priority: the first step finds the highest level.
        let mut bound = i64::from(i32::MAX) + 1;
        while taken < cap {
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
                .bind(i64::try_from(cap - taken).unwrap_or(i64::MAX))
                .bind(level)
                .fetch_all(&mut *conn)
                .await?;
            taken += picked.len();
            for row in picked {
                candidates.push((
                    row.try_get("priority")?,
                    row.try_get("available_at")?,
                    row.try_get("id")?,
                ));
            }
        }
    }
    candidates.sort_by_key(|&(priority, available_at, id)| claim_order(priority, available_at, id));
    candidates.truncate(usize::try_from(request.limit()).unwrap_or(usize::MAX));
    let lease_until = now.saturating_add(duration_micros(request.lease()));
    let mut claimed = Vec::with_capacity(candidates.len());
    for (_, _, id) in candidates {
        let row = sqlx::query(sql::DEQUEUE_CLAIM)
            .bind(now)
            .bind(id)
            .bind(lease_until)
            .bind(request.worker_id().as_str())
            .fetch_one(&mut *conn)
            .await?;
        claimed.push(row);
    }
    Ok(claimed)
}
