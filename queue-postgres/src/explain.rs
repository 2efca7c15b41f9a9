//! Diagnostics for operators: the plans of the claim, reclaim and
//! next-due statements on this server and this data, as
//! [`PlanStep`]s (the plan tree's nodes, depth first).

use queue_core::backend::{PlanStep, validate_batch};
use queue_core::{DequeueRequest, NewJob, QueueName, Result, ValidJob};
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
                cost: number("Total Cost"),
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
    /// `request` would run (the limited statement when one of its queues
    /// has limits): for operators checking that claims are served by the
    /// `job_queue_dequeue` index on their data.
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
        let limited = self.claim_is_limited(request).await?;
        let (statement, several) = self.claim_statement(request, limited);
        let explain = format!("EXPLAIN ({options}) {}", statement.as_str());
        let plan: Value = retrying(true, || async {
            let mut tx = self.pool.begin().await?;
            let query = sqlx::query(sqlx::AssertSqlSafe(explain.clone()));
            let row = self
                .bind_claim(query, request, &binds, several)
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

    /// The planner's plan (`EXPLAIN`, not executed) of a batch enqueue of
    /// `jobs`, planned for these very parameters, as each connection plans
    /// its first five executions of a statement. Its top step's
    /// [`PlanStep::cost`] against the server's `jit_above_cost` tells
    /// whether batches of this size are JIT-compiled.
    ///
    /// # Errors
    /// [`queue_core::QueueError::InvalidInput`] for an invalid job, as
    /// [`queue_core::Storage::enqueue_batch`]; otherwise as any query.
    pub async fn explain_enqueue(&self, jobs: &[NewJob]) -> Result<Vec<PlanStep>> {
        let valid = validate_batch(jobs)?;
        let valid: Vec<&ValidJob> = valid.iter().collect();
        let explain = format!("EXPLAIN (FORMAT JSON) {}", self.sql.enqueue_quiet.as_str());
        let plan: Value = retrying(true, || async {
            let row = self
                .bind_batch(sqlx::AssertSqlSafe(explain.clone()), &valid)
                .fetch_one(&self.pool)
                .await?;
            row.try_get::<Value, _>(0)
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

    /// The limited claim's count of the leases `queue` holds, up to `cap`
    /// (its concurrency limit), executed (`EXPLAIN ANALYZE` with buffers)
    /// as the claim runs it: the query of the `queue_held_leases` function
    /// (migration 0006), read from the catalog, under the function's own
    /// settings (bitmap scans off), in a transaction rolled back after.
    ///
    /// # Errors
    /// As any query; [`queue_core::QueueError::Backend`] if the function is
    /// missing (the schema is not migrated) or was rewritten by hand.
    pub async fn explain_held(&self, queue: &QueueName, cap: u32) -> Result<Vec<PlanStep>> {
        let plan: Value = retrying(true, || async {
            let mut tx = self.pool.begin().await?;
            let function = sqlx::query(self.sql.held_function.clone())
                .bind(self.schema())
                .fetch_one(&mut *tx)
                .await?;
            let source: String = function.try_get("prosrc")?;
            let body = held_query(&source).ok_or_else(|| {
                crate::error::Failure::Queue(queue_core::QueueError::backend(
                    "function queue_held_leases has no `RETURN (query);` (changed by hand?)",
                ))
            })?;
            let settings: Vec<String> = function.try_get("settings")?;
            for setting in &settings {
                let (name, value) = setting.split_once('=').unwrap_or((setting, ""));
                sqlx::query("SELECT set_config($1, $2, true)")
                    .bind(name)
                    .bind(value)
                    .execute(&mut *tx)
                    .await?;
            }
            let explain = format!("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {body}");
            let plan = sqlx::query_scalar(sqlx::AssertSqlSafe(explain))
                .bind(queue.as_str())
                .bind(i64::from(cap))
                .fetch_one(&mut *tx)
                .await?;
            tx.rollback().await?;
            Ok::<Value, crate::error::Failure>(plan)
        })
        .await?;
        Ok(steps(&plan))
    }
}

/// The query of `queue_held_leases`' body (`BEGIN RETURN (query); END`).
fn held_query(source: &str) -> Option<&str> {
    let start = source.find("RETURN (")? + "RETURN (".len();
    let end = source.rfind(");")?;
    source.get(start..end)
}
