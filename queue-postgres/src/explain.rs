//! Diagnostics for operators: the plans of the claim, reclaim and
//! next-due statements on this server and this data, as
//! [`PlanStep`]s (the plan tree's nodes, depth first).

use queue_core::backend::PlanStep;
use queue_core::{DequeueRequest, QueueName, Result};
use serde_json::Value;

use sqlx::Row;

use crate::PgStorage;
use crate::dequeue::ClaimBinds;
use crate::error::retrying;

/// The nodes of a `FORMAT JSON` plan, depth first.
fn steps(explained: &Value) -> Vec<PlanStep> {
    fn walk(node: &Value, out: &mut Vec<PlanStep>) {
        let text = |key: &str| node.get(key).and_then(Value::as_str).map(str::to_owned);
        let number = |key: &str| node.get(key).and_then(Value::as_f64);
        if let Some(operation) = text("Node Type") {
            out.push(PlanStep {
                operation,
                table: text("Relation Name"),
                index: text("Index Name"),
                rows: number("Plan Rows"),
                actual_rows: number("Actual Rows")
                    .map(|rows| rows * number("Actual Loops").unwrap_or(1.0)),
                buffers: number("Shared Hit Blocks")
                    .map(|hit| hit + number("Shared Read Blocks").unwrap_or(0.0)),
                detail: None,
            });
        }
        for child in node
            .get("Plans")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            walk(child, out);
        }
    }
    let mut out = Vec::new();
    walk(&explained[0]["Plan"], &mut out);
    out
}

impl PgStorage {
    /// The planner's plan (`EXPLAIN`, not executed) for the claim
    /// `request` would run: for operators checking that claims are served
    /// by the `job_queue_dequeue` index on their data.
    ///
    /// # Errors
    /// As any query.
    pub async fn explain_dequeue(&self, request: &DequeueRequest) -> Result<Vec<PlanStep>> {
        self.explain_claim(request, "FORMAT JSON").await
    }

    /// The executed plan (`EXPLAIN (ANALYZE, BUFFERS)`) of the claim
    /// `request` would run, in a transaction that is rolled back, so
    /// nothing is claimed: for checking how many index pages a claim reads
    /// on real data (its due jobs and a few per priority level, not the
    /// jobs waiting for a later time, [`PlanStep::buffers`]). The rows it
    /// would claim stay locked until the rollback.
    ///
    /// # Errors
    /// As any query.
    pub async fn explain_dequeue_analyzed(
        &self,
        request: &DequeueRequest,
    ) -> Result<Vec<PlanStep>> {
        self.explain_claim(request, "ANALYZE, BUFFERS, FORMAT JSON")
            .await
    }

    /// `EXPLAIN (options)` of the claim, in a transaction rolled back after.
    async fn explain_claim(
        &self,
        request: &DequeueRequest,
        options: &str,
    ) -> Result<Vec<PlanStep>> {
        let binds = ClaimBinds::of(request);
        let explain = format!(
            "EXPLAIN ({options}) {}",
            self.dequeue_statement(request).as_str()
        );
        let plan: Value = retrying(true, || async {
            let mut tx = self.pool.begin().await?;
            let query = sqlx::query(sqlx::AssertSqlSafe(explain.clone()));
            let row = self
                .bind_claim(query, request, &binds)
                .fetch_one(&mut *tx)
                .await?;
            tx.rollback().await?;
            row.try_get::<Value, _>(0)
        })
        .await?;
        Ok(steps(&plan))
    }

    /// The executed plan (`EXPLAIN ANALYZE`, a read-only statement) of
    /// [`queue_core::Storage::next_due`] for `queues`: for checking that it
    /// probes the dequeue index a few times rather than reading the
    /// backlog ([`PlanStep::actual_rows`]).
    ///
    /// # Errors
    /// As any query.
    pub async fn explain_next_due(&self, queues: &[QueueName]) -> Result<Vec<PlanStep>> {
        let names: Vec<&str> = queues.iter().map(|q| q.as_str()).collect();
        let explain = format!(
            "EXPLAIN (ANALYZE, FORMAT JSON) {}",
            self.sql.next_due.as_str()
        );
        let plan: Value = retrying(true, || {
            sqlx::query_scalar(sqlx::AssertSqlSafe(explain.clone()))
                .bind(self.now_override())
                .bind(&names)
                .fetch_one(&self.pool)
        })
        .await?;
        Ok(steps(&plan))
    }

    /// The planner's plan for `reclaim_stalled(limit)`, not executed.
    ///
    /// # Errors
    /// As any query.
    pub async fn explain_reclaim(&self, limit: u32) -> Result<Vec<PlanStep>> {
        let explain = format!("EXPLAIN (FORMAT JSON) {}", self.sql.reclaim.as_str());
        let plan: Value = retrying(true, || {
            sqlx::query_scalar(sqlx::AssertSqlSafe(explain.clone()))
                .bind(self.now_override())
                .bind(i64::from(limit))
                .fetch_one(&self.pool)
        })
        .await?;
        Ok(steps(&plan))
    }

    /// The limited claim's count of the leases `queues` hold, up to
    /// their concurrency limits, executed (`EXPLAIN ANALYZE` with buffers)
    /// as the claim runs it: in a transaction, after the statement that
    /// locks the queues' config rows (then rolled back).
    ///
    /// # Errors
    /// As any query.
    pub async fn explain_held(&self, queues: &[QueueName]) -> Result<Vec<PlanStep>> {
        let explain = format!(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {}",
            self.sql.held.as_str()
        );
        let names: Vec<&str> = queues.iter().map(QueueName::as_str).collect();
        let plan: Value = retrying(true, || async {
            let mut tx = self.pool.begin().await?;
            let locked = sqlx::query(self.sql.limits_lock.clone())
                .bind(self.now_override())
                .bind(&names)
                .fetch_all(&mut *tx)
                .await?;
            let mut counted = Vec::new();
            let mut caps = Vec::new();
            for row in &locked {
                if let Some(cap) = row.try_get::<Option<i32>, _>("concurrency_limit")? {
                    counted.push(row.try_get::<String, _>("queue_name")?);
                    caps.push(i64::from(cap));
                }
            }
            let plan = sqlx::query_scalar(sqlx::AssertSqlSafe(explain.clone()))
                .bind(&counted)
                .bind(&caps)
                .fetch_one(&mut *tx)
                .await?;
            tx.rollback().await?;
            Ok::<Value, crate::error::Failure>(plan)
        })
        .await?;
        Ok(steps(&plan))
    }
}
