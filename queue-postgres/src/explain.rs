//! Diagnostics for operators: the plans of the claim, reclaim,
//! next-due and stats statements on this server and this data, as
//! [`PlanStep`]s (the plan tree's nodes, depth first).

use queue_core::backend::{PlanStep, validate_batch};
use queue_core::{
    DequeueRequest, FinalStatus, HistoryFilter, JobFilter, JobId, NewJob, QueueName, Result,
    ValidJob,
};
use serde_json::Value;

use sqlx::{Acquire, Row};

use crate::PgStorage;
use crate::dequeue::ClaimBinds;
use crate::error::retrying;

/// A statement with its parameters bound.
type PgQuery<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// An `EXPLAIN` of a function's query, its plan as one JSON value.
type PlanQuery<'q> =
    sqlx::query::QueryScalar<'q, sqlx::Postgres, Value, sqlx::postgres::PgArguments>;

/// The nodes of a `FORMAT JSON` plan, depth first.
pub(crate) fn steps(explained: &Value) -> Vec<PlanStep> {
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
    /// has limits), followed by the plan of its pick for the first queue
    /// (the query of `queue_pick`, migration 0011, under the function's
    /// settings, with that queue's cap), then by the plan of its lease of
    /// the picked jobs (the query of `queue_lease`, migration 0011, under
    /// that function's settings, for ids no job has: its access path): for
    /// operators checking that claims are served by the ready ring's index
    /// (`job_ready_*`) and `job_queue_scheduled` on their data, and the
    /// lease by `job_queue_pkey`.
    ///
    /// # Errors
    /// As any query.
    pub async fn explain_dequeue(&self, request: &DequeueRequest) -> Result<Vec<PlanStep>> {
        self.explain_claim(request, "FORMAT JSON").await
    }

    /// The executed plan (`EXPLAIN (ANALYZE, BUFFERS)`) of the claim
    /// `request` would run, then of its pick and its lease as
    /// [`PgStorage::explain_dequeue`] shows them, each in a transaction that
    /// is rolled back, so nothing is claimed (the claim runs once more
    /// before, rolled back too, so that the plans measured are the
    /// connection's cached ones): for checking how many index pages a
    /// claim reads on real data (its due jobs and a few per priority
    /// level, not the jobs waiting for a later time,
    /// [`PlanStep::buffers`]). The rows it would claim stay locked until
    /// the rollback.
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
        let path = self.claim_path(request).await?;
        let (statement, several) = self.dequeue_statement(request, path);
        let explain = format!("EXPLAIN ({options}) {}", statement.as_str());
        let queue = request.queues()[0].as_str();
        let cap = i64::from(request.queue_limits()[0]);
        let (plan, pick, lease): (Value, Value, Value) = retrying(true, || async {
            // One connection throughout, so that an executed claim runs
            // with the function compiled and its plan cached, as every
            // claim but a connection's first does.
            let mut conn = self.pool.acquire().await?;
            // The pick first: the claim leases what it picks, and the pick
            // would then find the jobs after those.
            let pick = self
                .explain_function(&mut conn, "queue_pick", pick_query, options, |q| {
                    q.bind(self.now_override()).bind(queue).bind(cap)
                })
                .await?;
            // The lease of the picked jobs, as `queue_lease` runs it, for
            // sixteen ids no job has (ids start at 1), in every slot of
            // the ring: the access path,
            // nothing updated or locked. Not for no ids: the planner
            // folds `id = ANY('{}')` to false, and a false condition may
            // take any index.
            let lease = self
                .explain_function(&mut conn, "queue_lease", lease_query, options, |q| {
                    q.bind((-16..0).collect::<Vec<i64>>())
                        .bind(self.now_override())
                        .bind(0_i64)
                        .bind("explain")
                        .bind((0..4).collect::<Vec<i16>>())
                })
                .await?;
            if options.contains("ANALYZE") {
                let mut tx = conn.begin().await?;
                self.on(&mut tx)
                    .execute(self.bind_claim(
                        sqlx::query(statement.clone()),
                        request,
                        &binds,
                        several,
                    ))
                    .await?;
                tx.rollback().await?;
            }
            let mut tx = conn.begin().await?;
            let query = sqlx::query(sqlx::AssertSqlSafe(explain.clone()));
            let row = self
                .on(&mut tx)
                .fetch_one(self.bind_claim(query, request, &binds, several))
                .await?;
            tx.rollback().await?;
            Ok::<_, crate::error::Failure>((row.try_get::<Value, _>(0)?, pick, lease))
        })
        .await?;
        let mut out = steps(&plan);
        out.extend(steps(&pick));
        out.extend(steps(&lease));
        Ok(out)
    }

    /// The executed plan (`EXPLAIN (ANALYZE, BUFFERS)`, a read-only
    /// statement) of [`queue_core::Storage::list_jobs`] for `filter`, in
    /// the generic plan a connection settles on after a few listings of
    /// the same shape (`PREPARE` under `plan_cache_mode =
    /// force_generic_plan`, then `EXPLAIN EXECUTE`): for checking that a
    /// page reads the index range of its queue and state, whatever the
    /// ids of those jobs ([`PlanStep::buffers`]), not every newer job.
    ///
    /// # Errors
    /// [`queue_core::QueueError::InvalidInput`] for a filter `list_jobs`
    /// refuses; otherwise as any query.
    pub async fn explain_list_jobs(&self, filter: &JobFilter) -> Result<Vec<PlanStep>> {
        filter.validate()?;
        self.explain_generic(
            self.sql.list_jobs_for(filter).as_str(),
            &[
                "timestamptz",
                "text",
                "text",
                "bigint",
                "text",
                "bigint",
                "bigint",
            ],
            |query| {
                crate::inspect::bind_job_filter(
                    query,
                    self.now_override(),
                    filter,
                    filter.limit + 1,
                )
            },
        )
        .await
    }

    /// The executed plan of [`queue_core::Storage::list_history`] for
    /// `filter`, as [`PgStorage::explain_list_jobs`] gives a listing's:
    /// for checking that a page reads the index range of its queue and
    /// status, wherever their rows sit in id order.
    ///
    /// # Errors
    /// [`queue_core::QueueError::InvalidInput`] for a filter
    /// `list_history` refuses; otherwise as any query.
    pub async fn explain_list_history(&self, filter: &HistoryFilter) -> Result<Vec<PlanStep>> {
        filter.validate()?;
        self.explain_generic(
            self.sql.list_history_for(filter).as_str(),
            &["text", "text", "bigint", "bigint"],
            |query| {
                query
                    .bind(filter.queue.as_ref().map(QueueName::as_str))
                    .bind(filter.status.map(FinalStatus::as_str))
                    .bind(filter.before.map(JobId::get))
                    .bind(i64::from(filter.limit) + 1)
            },
        )
        .await
    }

    /// The executed plan (`EXPLAIN (ANALYZE, BUFFERS)`) of read-only
    /// `statement` in the generic plan a connection settles on after a
    /// few executions of it (`PREPARE` under `plan_cache_mode =
    /// force_generic_plan`, then `EXPLAIN EXECUTE`), its parameters of
    /// `types` bound by `bind`.
    async fn explain_generic<'q>(
        &self,
        statement: &str,
        types: &[&str],
        bind: impl Fn(PgQuery<'q>) -> PgQuery<'q>,
    ) -> Result<Vec<PlanStep>> {
        let prepare = format!(
            "PREPARE queue_explain_generic ({}) AS {statement}",
            types.join(", ")
        );
        // EXECUTE takes no parameters: the server quotes the values.
        let execute = format!(
            "SELECT format('EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) \
             EXECUTE queue_explain_generic ({})', {})",
            vec!["%L"; types.len()].join(", "),
            types
                .iter()
                .enumerate()
                .map(|(i, kind)| format!("${}::{kind}", i + 1))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let plan: Value = retrying(true, || async {
            let mut conn = self.pool.acquire().await?;
            let mut tx = conn.begin().await?;
            self.on(&mut tx)
                .execute(sqlx::raw_sql(
                    "SET LOCAL plan_cache_mode = force_generic_plan",
                ))
                .await?;
            self.on(&mut tx)
                .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(prepare.clone())))
                .await?;
            let execute = self
                .on(&mut tx)
                .fetch_one(bind(sqlx::query(sqlx::AssertSqlSafe(execute.clone()))))
                .await?
                .try_get::<String, _>(0)?;
            let row = self
                .on(&mut tx)
                .fetch_one(sqlx::raw_sql(sqlx::AssertSqlSafe(execute)))
                .await;
            // A prepared statement outlives the transaction: always gone.
            tx.rollback().await?;
            self.on(&mut conn)
                .execute(sqlx::raw_sql("DEALLOCATE queue_explain_generic"))
                .await?;
            row?.try_get::<Value, _>(0)
        })
        .await?;
        Ok(steps(&plan))
    }

    /// The executed plan (`EXPLAIN ANALYZE`, a read-only statement) of
    /// [`queue_core::Storage::next_due`] for `queues`, followed by the plan
    /// of its probes for each queue (the query of `queue_next_due`,
    /// migration 0007, under the function's settings): for checking that
    /// it probes the dequeue index a few times rather than reading the
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
        let plans: Vec<Value> = retrying(true, || async {
            let mut tx = self.pool.begin().await?;
            let first = self
                .on(&mut tx)
                .fetch_one(
                    sqlx::query(sqlx::AssertSqlSafe(explain.clone()))
                        .bind(self.now_override())
                        .bind(&names),
                )
                .await?;
            let mut plans: Vec<Value> = vec![first.try_get(0)?];
            let body = self
                .function_query(&mut tx, "queue_next_due", |b| {
                    returned_query(b).map(with_parameters)
                })
                .await?;
            let explain = format!("EXPLAIN (ANALYZE, FORMAT JSON) {body}");
            for name in &names {
                let row = self
                    .on(&mut tx)
                    .fetch_one(
                        sqlx::query(sqlx::AssertSqlSafe(explain.clone()))
                            .bind(self.now_override())
                            .bind(name),
                    )
                    .await?;
                plans.push(row.try_get(0)?);
            }
            tx.rollback().await?;
            Ok::<_, crate::error::Failure>(plans)
        })
        .await?;
        Ok(plans.iter().flat_map(steps).collect())
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
                .db()
                .fetch_one(self.bind_batch(sqlx::AssertSqlSafe(explain.clone()), &valid))
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
        let explain = format!(
            "EXPLAIN (FORMAT JSON) {}",
            self.sql.reclaim_stalled.as_str()
        );
        let plan: Value = retrying(true, || async {
            let row = self
                .db()
                .fetch_one(
                    sqlx::query(sqlx::AssertSqlSafe(explain.clone()))
                        .bind(self.now_override())
                        .bind(i64::from(limit)),
                )
                .await?;
            row.try_get::<Value, _>(0)
        })
        .await?;
        Ok(steps(&plan))
    }

    /// The planner's plan for `stats_capped(cap)`, not executed, under the
    /// settings the statement runs with (JIT and parallel workers off):
    /// for operators checking that the counts come from index ranges
    /// ([`queue_core::Storage::stats_capped`]), not from the whole table.
    ///
    /// # Errors
    /// [`queue_core::QueueError::InvalidInput`] for a cap of 0; otherwise
    /// as any query.
    pub async fn explain_stats(&self, cap: u64) -> Result<Vec<PlanStep>> {
        let limit = crate::inspect::stats_limit(cap)?;
        let explain = format!("EXPLAIN (FORMAT JSON) {}", self.sql.stats.as_str());
        let plan: Value = retrying(true, || async {
            let mut tx = self.pool.begin().await?;
            self.on(&mut tx)
                .execute(sqlx::raw_sql(crate::sql::STATS_SETTINGS))
                .await?;
            let row = self
                .on(&mut tx)
                .fetch_one(self.bind_stats(sqlx::AssertSqlSafe(explain.clone()), limit))
                .await?;
            tx.rollback().await?;
            row.try_get::<Value, _>(0)
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
            let body = self
                .function_query(&mut tx, "queue_held_leases", |b| {
                    returned_query(b).map(str::to_owned)
                })
                .await?;
            let explain = format!("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {body}");
            let row = self
                .on(&mut tx)
                .fetch_one(
                    sqlx::query(sqlx::AssertSqlSafe(explain))
                        .bind(queue.as_str())
                        .bind(i64::from(cap)),
                )
                .await?;
            tx.rollback().await?;
            Ok::<Value, crate::error::Failure>(row.try_get(0)?)
        })
        .await?;
        Ok(steps(&plan))
    }

    /// The plan (`EXPLAIN ({options})`) of function `name`'s query, as
    /// `query_of` finds it, planned under the function's settings in a
    /// transaction of its own that is rolled back; `bind` binds its
    /// parameters.
    async fn explain_function<'q>(
        &self,
        conn: &mut sqlx::PgConnection,
        name: &str,
        query_of: impl Fn(&str) -> Option<String>,
        options: &str,
        bind: impl FnOnce(PlanQuery<'q>) -> PlanQuery<'q>,
    ) -> std::result::Result<Value, crate::error::Failure> {
        let mut tx = conn.begin().await?;
        let body = self.function_query(&mut tx, name, query_of).await?;
        let explain =
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("EXPLAIN ({options}) {body}")));
        let row = self.on(&mut tx).fetch_one(bind(explain)).await?;
        tx.rollback().await?;
        Ok(row.try_get(0)?)
    }

    /// This schema's function `name`'s query, as `query_of` finds it in
    /// the stored body, with the function's settings applied for the rest
    /// of the transaction: to be planned as the function plans it.
    pub(crate) async fn function_query(
        &self,
        tx: &mut sqlx::PgConnection,
        name: &str,
        query_of: impl Fn(&str) -> Option<String>,
    ) -> std::result::Result<String, crate::error::Failure> {
        let source = self.function_source(tx, name).await?;
        let query = query_of(&source.body).ok_or_else(|| changed_by_hand(name))?;
        source.apply_settings(self, tx).await?;
        Ok(query)
    }

    /// The stored body and settings of this schema's function `name`.
    async fn function_source(
        &self,
        tx: &mut sqlx::PgConnection,
        name: &str,
    ) -> std::result::Result<FunctionSource, crate::error::Failure> {
        let row = self
            .on(tx)
            .fetch_optional(
                sqlx::query(self.sql.function_source.clone())
                    .bind(self.schema())
                    .bind(name),
            )
            .await?
            .ok_or_else(|| {
                crate::error::Failure::Queue(queue_core::QueueError::backend(format!(
                    "function {name} is missing (is the schema migrated?)"
                )))
            })?;
        Ok(FunctionSource {
            body: row.try_get("prosrc")?,
            settings: row.try_get("settings")?,
        })
    }
}

/// A function's body and its `SET` clauses (`name=value`), as stored.
struct FunctionSource {
    body: String,
    settings: Vec<String>,
}

impl FunctionSource {
    /// The function's settings, for the rest of the transaction.
    async fn apply_settings(
        &self,
        storage: &PgStorage,
        tx: &mut sqlx::PgConnection,
    ) -> std::result::Result<(), crate::error::Failure> {
        for setting in &self.settings {
            let (name, value) = setting.split_once('=').unwrap_or((setting, ""));
            storage
                .on(&mut *tx)
                .execute(
                    sqlx::query("SELECT set_config($1, $2, true)")
                        .bind(name)
                        .bind(value),
                )
                .await?;
        }
        Ok(())
    }
}

/// The error for a function whose body is not as its migration wrote it.
fn changed_by_hand(name: &str) -> crate::error::Failure {
    crate::error::Failure::Queue(queue_core::QueueError::backend(format!(
        "function {name} is not as its migration wrote it (changed by hand?)"
    )))
}

/// The first query of a function's body returned by `RETURN QUERY` (up to
/// its `;`).
pub(crate) fn first_returned_query(source: &str) -> Option<&str> {
    let start = source.find("RETURN QUERY")? + "RETURN QUERY".len();
    let end = start + source.get(start..)?.find(';')?;
    source.get(start..end)
}

/// The locking query of `queue_pick`'s body, its arguments as parameters
/// ([`with_parameters`]).
fn pick_query(source: &str) -> Option<String> {
    first_returned_query(source).map(with_parameters)
}

/// The query of `queue_lease` (migration 0011) with its arguments as
/// parameters: $1 the ids, $2 the clock override, $3 the lease in
/// microseconds, $4 the worker, $5 the ring slots.
fn lease_query(source: &str) -> Option<String> {
    first_returned_query(source).map(|query| {
        query
            .replace("p_ids", "$1::bigint[]")
            .replace("p_now", "$2::timestamptz")
            .replace("p_lease_us", "$3::bigint")
            .replace("p_worker", "$4::text")
            .replace("p_slots", "$5::smallint[]")
    })
}

/// A query of `queue_pick` or `queue_next_due` with the functions'
/// arguments as statement parameters: $1 the clock override, $2 the
/// queue, $3 the cap (the pick's only); no full groups (the pick's
/// `p_full`, NULL in every claim of a queue without group limits).
fn with_parameters(query: &str) -> String {
    query
        .replace("p_full", "NULL::text[]")
        .replace("p_now", "COALESCE($1::timestamptz, now())")
        .replace("p_queue", "$2::text")
        .replace("p_cap", "$3::bigint")
}

/// The query of a function whose body is `BEGIN RETURN (query); END`
/// (`queue_held_leases`, `queue_next_due`).
fn returned_query(source: &str) -> Option<&str> {
    let start = source.find("RETURN (")? + "RETURN (".len();
    let end = source.rfind(");")?;
    source.get(start..end)
}
