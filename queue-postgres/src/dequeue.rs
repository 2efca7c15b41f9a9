//! Dequeue: the best due jobs of the requested queues, leased in one
//! statement (`FOR UPDATE SKIP LOCKED` on the dequeue index); a claim on a
//! queue with limits takes the limited path of `flow.rs`.

use queue_core::backend::claim_order;
use queue_core::time::duration_micros;
use queue_core::{DequeueRequest, Job, Result};

use sqlx::postgres::{PgArguments, Postgres};
use sqlx::query::Query;

use crate::error::retrying;
use crate::{PgStorage, rows};

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

    /// The claim statement for `request`: a plain index scan for one
    /// queue, a per-queue LATERAL scan for several (locking as it scans
    /// when the caps add up to the limit, else locking only the best).
    pub(crate) fn dequeue_statement(&self, request: &DequeueRequest) -> sqlx::SqlStr {
        if request.queues().len() == 1 {
            self.sql.dequeue_one.clone()
        } else if request.over_subscribed() {
            self.sql.dequeue_many_over.clone()
        } else {
            self.sql.dequeue_many.clone()
        }
    }

    pub(crate) async fn dequeue_pooled(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        if self.claim_is_limited(request).await? {
            return self.dequeue_limited(request).await;
        }
        let binds = ClaimBinds::of(request);
        let statement = self.dequeue_statement(request);
        let rows = retrying(false, || {
            self.bind_claim(
                sqlx::query(statement.clone()),
                request,
                &binds,
                request.queues().len() > 1,
            )
            .fetch_all(&self.pool)
        })
        .await?;
        let mut jobs = rows.iter().map(rows::job).collect::<Result<Vec<_>>>()?;
        // RETURNING has no order; the claim's order is the contract's.
        jobs.sort_by_key(|job| claim_order(job.priority, job.available_at, job.id.get()));
        Ok(jobs)
    }
}
