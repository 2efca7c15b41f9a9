//! Dequeue: the best due jobs of the requested queues, leased in one
//! statement (`FOR UPDATE SKIP LOCKED` on the dequeue index).

use queue_core::backend::claim_order;
use queue_core::time::duration_micros;
use queue_core::{DequeueRequest, Job, Result};

use crate::error::retrying;
use crate::{PgStorage, rows};

impl PgStorage {
    /// The claim statement for `request`: a plain index scan for one
    /// queue, a per-queue LATERAL scan for several.
    pub(crate) fn dequeue_statement(&self, request: &DequeueRequest) -> sqlx::SqlStr {
        if request.queues().len() == 1 {
            self.sql.dequeue_one.clone()
        } else {
            self.sql.dequeue_many.clone()
        }
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
        jobs.sort_by_key(|job| claim_order(job.priority, job.available_at, job.id.get()));
        Ok(jobs)
    }
}
