//! The statements that find jobs by id (migration 0009's functions: the
//! claim's lease, ack, heartbeat, nack, release, snooze) read `job_queue`
//! through its primary key only, whatever the statistics say: on a new
//! schema never analyzed, on a table autovacuum found empty (pages kept),
//! and on one it found empty and truncated. A test of the crate's own
//! statements, so it lives beside them.
//!
//! Each function's query is planned as the function plans it: its body's
//! `RETURN QUERY` statement, its arguments as parameters, under its own
//! settings, as a generic plan (`PREPARE`, then `EXPLAIN EXECUTE`).

use queue_core::backend::PlanStep;
use queue_core::{DequeueRequest, NewJob, QueueName, Storage, WorkerId};
use serde_json::{Value, json};
use sqlx::{PgPool, Row};
use std::time::Duration;

use crate::PgStorage;

/// Every function of migration 0009.
const BY_ID: [&str; 6] = [
    "queue_lease",
    "queue_ack",
    "queue_heartbeat",
    "queue_nack",
    "queue_release",
    "queue_snooze",
];

/// The argument names and types, in order, of `schema`'s function `name`.
const ARGUMENTS: &str = "
SELECT p.proargnames[1:p.pronargs] AS names,
       ARRAY(SELECT format_type(t, NULL) FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS a(t, o)
             ORDER BY o) AS types
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = $1 AND p.proname = $2";

/// The generic plan of function `name`'s query, as its settings make it.
async fn function_plan(storage: &PgStorage, name: &str) -> Vec<PlanStep> {
    let mut tx = storage.pool().begin().await.expect("begin");
    let row = sqlx::query(ARGUMENTS)
        .bind(storage.schema())
        .bind(name)
        .fetch_one(&mut *tx)
        .await
        .unwrap_or_else(|e| panic!("{name} is missing: {e}"));
    let names: Vec<String> = row.get("names");
    let types: Vec<String> = row.get("types");
    let mut query = storage
        .function_query(&mut tx, name, |body| {
            crate::explain::first_returned_query(body).map(str::to_owned)
        })
        .await
        .unwrap_or_else(|e| panic!("{name}'s query: {e:?}"));
    // Longest names first: p_ids before p_id.
    let mut by_length: Vec<(usize, &String)> = names.iter().enumerate().collect();
    by_length.sort_by_key(|(_, n)| std::cmp::Reverse(n.len()));
    for (i, arg) in by_length {
        query = query.replace(arg.as_str(), &format!("${}", i + 1));
    }
    let prepare = format!("PREPARE by_id_probe ({}) AS {query}", types.join(", "));
    sqlx::raw_sql(sqlx::AssertSqlSafe(prepare))
        .execute(&mut *tx)
        .await
        .unwrap_or_else(|e| panic!("preparing {name}'s query: {e}"));
    let nulls = vec!["NULL"; types.len()].join(", ");
    let explain = format!("EXPLAIN (FORMAT JSON) EXECUTE by_id_probe({nulls})");
    let plan: Value = sqlx::query_scalar(sqlx::AssertSqlSafe(explain))
        .fetch_one(&mut *tx)
        .await
        .unwrap_or_else(|e| panic!("explaining {name}: {e}"));
    sqlx::raw_sql("DEALLOCATE by_id_probe")
        .execute(&mut *tx)
        .await
        .expect("deallocate");
    tx.rollback().await.expect("rollback");
    crate::explain::steps(&plan)
}

/// Panics unless every function of [`BY_ID`] reads `job_queue` by its
/// primary key alone, under the statistics `moment` describes.
async fn assert_by_primary_key(storage: &PgStorage, moment: &str) {
    for name in BY_ID {
        let steps = function_plan(storage, name).await;
        let on_queue: Vec<&PlanStep> = steps
            .iter()
            // The scans of job_queue, not the Update or Delete of it.
            .filter(|s| s.table.as_deref() == Some("job_queue"))
            .filter(|s| s.operation != "ModifyTable")
            .collect();
        let shapes: Vec<String> = on_queue
            .iter()
            .map(|s| format!("{} {}", s.operation, s.index.as_deref().unwrap_or("-")))
            .collect();
        assert!(
            !on_queue.is_empty()
                && on_queue
                    .iter()
                    .all(|s| s.index.as_deref() == Some("job_queue_pkey")),
            "{moment}: {name} does not read job_queue by its primary key alone: {shapes:?}"
        );
    }
}

async fn run_sql(pool: &PgPool, statement: String) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(statement.clone()))
        .execute(pool)
        .await
        .unwrap_or_else(|e| panic!("{statement}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_by_id_use_the_primary_key_whatever_the_statistics_say() {
    let (schema, pool, storage) = crate::test_schema::migrated_storage().await;
    let table = format!("\"{}\".job_queue", schema.name());

    // A new schema: never analyzed, which the planner takes for ten pages.
    assert_by_primary_key(&storage, "never analyzed").await;

    // Autovacuum's visit to a queue that was empty at that moment, then a
    // backlog with leases.
    let request = DequeueRequest::new(
        vec![QueueName::new("q").expect("valid")],
        1_000,
        Duration::from_secs(30),
        WorkerId::new("w").expect("valid"),
    )
    .expect("request");
    for round in 0..2 {
        let jobs = (0..5_000)
            .map(|i| NewJob::new("q", json!({ "i": i })))
            .collect();
        storage.enqueue_batch(jobs).await.expect("enqueue");
        let leased = storage.dequeue(&request).await.expect("dequeue");
        assert_eq!(leased.len(), 1_000);
        if round == 0 {
            schema.vacuum_job_queue_empty(&pool).await;
        }
    }
    assert_by_primary_key(&storage, "vacuumed empty, pages kept").await;

    // The same visit when it could also give the empty pages back: zero
    // pages, so that any scan of the whole table prices at nothing.
    // The ready ring's rotation, started in the background by the last
    // claim, may still hold a snapshot or a lock on job_queue that keeps
    // VACUUM from removing the rows or truncating: it is tried again.
    run_sql(&pool, format!("DELETE FROM {table}")).await;
    let mut pages = -1;
    for _ in 0..20 {
        run_sql(&pool, format!("VACUUM (ANALYZE) {table}")).await;
        pages = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT relpages FROM pg_class WHERE oid = '{table}'::regclass"
        )))
        .fetch_one(&pool)
        .await
        .expect("relpages");
        if pages == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(pages, 0, "VACUUM of the empty table truncates it");
    assert_by_primary_key(&storage, "vacuumed empty and truncated").await;

    pool.close().await;
    schema.drop_schema().await;
}
