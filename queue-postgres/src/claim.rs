//! Dequeue, heartbeat and release: taking, keeping and giving back leases.

use std::collections::HashSet;
use std::time::Duration;

use queue_core::time::duration_micros;
use queue_core::{DequeueRequest, Job, Lease, Result, validate_lease};
use serde_json::Value;
use sqlx::{PgConnection, Row};

use crate::error::retrying;
use crate::{PgStorage, rows};

/// A lease as the columns that identify it.
pub(crate) type LeaseKey = (i64, String, i32);

pub(crate) fn lease_key(lease: &Lease) -> LeaseKey {
    (
        lease.job_id.get(),
        lease.worker_id.as_str().to_owned(),
        i32::try_from(lease.attempt).unwrap_or(i32::MAX),
    )
}

/// Lease columns as arrays, for UNNEST.
pub(crate) fn lease_columns(leases: &[&Lease]) -> (Vec<i64>, Vec<String>, Vec<i32>) {
    let keys = leases.iter().map(|l| lease_key(l));
    let mut columns = (Vec::new(), Vec::new(), Vec::new());
    for (id, worker, attempt) in keys {
        columns.0.push(id);
        columns.1.push(worker);
        columns.2.push(attempt);
    }
    columns
}

impl PgStorage {
    /// The claim statement for `request`: a plain index scan for one
    /// queue, a per-queue LATERAL scan for several.
    fn dequeue_statement(&self, request: &DequeueRequest) -> sqlx::SqlStr {
        if request.queues().len() == 1 {
            self.sql.dequeue_one.clone()
        } else {
            self.sql.dequeue_many.clone()
        }
    }

    /// The planner's JSON plan (`EXPLAIN (FORMAT JSON)`, not executed) for
    /// the claim `request` would run: for operators checking that claims
    /// are served by the `job_queue_dequeue` index on their data.
    ///
    /// # Errors
    /// As any query.
    pub async fn explain_dequeue(&self, request: &DequeueRequest) -> Result<Value> {
        let queues: Vec<&str> = request.queues().iter().map(|q| q.as_str()).collect();
        let caps: Vec<i64> = request
            .queue_limits()
            .iter()
            .map(|c| i64::from(*c))
            .collect();
        let explain = format!(
            "EXPLAIN (FORMAT JSON) {}",
            self.dequeue_statement(request).as_str()
        );
        let query = sqlx::query_scalar(sqlx::AssertSqlSafe(explain))
            .bind(self.now_override())
            .bind(&queues)
            .bind(i64::from(request.limit()))
            .bind(duration_micros(request.lease()))
            .bind(request.worker_id().as_str());
        let query = if request.queues().len() > 1 {
            query.bind(&caps)
        } else {
            query
        };
        query
            .fetch_one(&self.pool)
            .await
            .map_err(crate::interpret_error)
    }

    /// The executed plan (`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`) of the
    /// claim `request` would run, in a transaction that is rolled back, so
    /// nothing is claimed: for checking how many index entries a claim
    /// reads on real data (its due jobs and a few per priority level, not
    /// the jobs waiting for a later time). The rows it would claim stay
    /// locked until the rollback.
    ///
    /// # Errors
    /// As any query.
    pub async fn explain_dequeue_analyzed(&self, request: &DequeueRequest) -> Result<Value> {
        let queues: Vec<&str> = request.queues().iter().map(|q| q.as_str()).collect();
        let caps: Vec<i64> = request
            .queue_limits()
            .iter()
            .map(|c| i64::from(*c))
            .collect();
        let explain = format!(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {}",
            self.dequeue_statement(request).as_str()
        );
        let mut tx = self.pool.begin().await.map_err(crate::interpret_error)?;
        let query = sqlx::query_scalar(sqlx::AssertSqlSafe(explain))
            .bind(self.now_override())
            .bind(&queues)
            .bind(i64::from(request.limit()))
            .bind(duration_micros(request.lease()))
            .bind(request.worker_id().as_str());
        let query = if request.queues().len() > 1 {
            query.bind(&caps)
        } else {
            query
        };
        let plan = query
            .fetch_one(&mut *tx)
            .await
            .map_err(crate::interpret_error)?;
        tx.rollback().await.map_err(crate::interpret_error)?;
        Ok(plan)
    }

    /// The executed plan (`EXPLAIN (ANALYZE, FORMAT JSON)`, a read-only
    /// statement) of [`queue_core::Storage::next_due`] for `queues`: for
    /// checking that it probes the dequeue index a few times rather than
    /// reading the backlog.
    ///
    /// # Errors
    /// As any query.
    pub async fn explain_next_due(&self, queues: &[queue_core::QueueName]) -> Result<Value> {
        let names: Vec<&str> = queues.iter().map(|q| q.as_str()).collect();
        let explain = format!(
            "EXPLAIN (ANALYZE, FORMAT JSON) {}",
            self.sql.next_due.as_str()
        );
        sqlx::query_scalar(sqlx::AssertSqlSafe(explain))
            .bind(self.now_override())
            .bind(&names)
            .fetch_one(&self.pool)
            .await
            .map_err(crate::interpret_error)
    }

    /// The planner's JSON plan for `reclaim_stalled(limit)`, not executed.
    ///
    /// # Errors
    /// As any query.
    pub async fn explain_reclaim(&self, limit: u32) -> Result<Value> {
        let explain = format!("EXPLAIN (FORMAT JSON) {}", self.sql.reclaim.as_str());
        sqlx::query_scalar(sqlx::AssertSqlSafe(explain))
            .bind(self.now_override())
            .bind(i64::from(limit))
            .fetch_one(&self.pool)
            .await
            .map_err(crate::interpret_error)
    }

    pub(crate) async fn dequeue_pooled(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        let queues: Vec<&str> = request.queues().iter().map(|q| q.as_str()).collect();
        let caps: Vec<i64> = request
            .queue_limits()
            .iter()
            .map(|c| i64::from(*c))
            .collect();
        let statement = self.dequeue_statement(request);
        let many = request.queues().len() > 1;
        let rows = retrying(false, || {
            let query = sqlx::query(statement.clone())
                .bind(self.now_override())
                .bind(&queues)
                .bind(i64::from(request.limit()))
                .bind(duration_micros(request.lease()))
                .bind(request.worker_id().as_str());
            // Only the several-queue statement has per-queue caps ($6).
            let query = if many { query.bind(&caps) } else { query };
            query.fetch_all(&self.pool)
        })
        .await?;
        let mut jobs = rows.iter().map(rows::job).collect::<Result<Vec<_>>>()?;
        // RETURNING has no order; the claim's order is the contract's.
        jobs.sort_by(|a, b| {
            (b.priority, a.available_at, a.id).cmp(&(a.priority, b.available_at, b.id))
        });
        Ok(jobs)
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
        let (ids, workers, attempts) = lease_columns(&leases.iter().collect::<Vec<_>>());
        let rows = retrying(true, || {
            sqlx::query(self.sql.heartbeat.clone())
                .bind(self.now_override())
                .bind(&ids)
                .bind(&workers)
                .bind(&attempts)
                .bind(duration_micros(extend_by))
                .fetch_all(&self.pool)
        })
        .await?;
        let extended = returned_leases(&rows)?;
        Ok(leases
            .iter()
            .map(|l| extended.contains(&lease_key(l)))
            .collect())
    }

    pub(crate) async fn release_on(
        &self,
        conn: &mut PgConnection,
        lease: &Lease,
    ) -> Result<bool, sqlx::Error> {
        let (id, worker, attempt) = lease_key(lease);
        let done = sqlx::query(self.sql.release.clone())
            .bind(self.now_override())
            .bind(id)
            .bind(worker)
            .bind(attempt)
            .execute(conn)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}

/// The (id, locked_by/processed_by, attempts) triples a statement returned.
pub(crate) fn returned_leases(rows: &[sqlx::postgres::PgRow]) -> Result<HashSet<LeaseKey>> {
    rows.iter()
        .map(|row| {
            let id: i64 = row.try_get(0)?;
            let worker: String = row.try_get(1)?;
            let attempt: i32 = row.try_get(2)?;
            Ok((id, worker, attempt))
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(crate::interpret_error)
}
