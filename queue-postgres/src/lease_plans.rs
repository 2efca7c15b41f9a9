//! The statements by lease read `job_queue` through its primary key only,
//! even when the statistics say the table is empty (`sql.rs`, above
//! `ACK`). A test of the crate's own statements, so it lives beside them.

use queue_core::{DequeueRequest, NewJob, QueueName, Storage, WorkerId};
use queue_testkit::harness::postgres::TestSchema;
use serde_json::{Value, json};
use sqlx::Postgres;
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use std::time::Duration;

use crate::PgStorage;

fn explain(statement: &str) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(format!("EXPLAIN (FORMAT JSON) {statement}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_by_lease_use_the_primary_key_when_statistics_say_empty() {
    let schema = TestSchema::create().await;
    let pool = schema.pool().await;
    let storage = PgStorage::from_pool(pool.clone())
        .with_schema(schema.name())
        .expect("valid schema");
    storage.migrate().await.expect("migrate");
    let request = DequeueRequest::new(
        vec![QueueName::new("q").expect("valid")],
        1_000,
        Duration::from_secs(30),
        WorkerId::new("w").expect("valid"),
    )
    .expect("request");
    let mut leased = Vec::new();
    for round in 0..2 {
        let jobs = (0..5_000)
            .map(|i| NewJob::new("q", json!({ "i": i })))
            .collect();
        storage.enqueue_batch(jobs).await.expect("enqueue");
        leased = storage.dequeue(&request).await.expect("dequeue");
        assert_eq!(leased.len(), 1_000);
        if round == 0 {
            // Autovacuum's visit to a queue that was empty at that moment.
            schema.vacuum_job_queue_empty(&pool).await;
        }
    }

    let now: Option<chrono::DateTime<chrono::Utc>> = None;
    let ids = vec![leased[0].id.0, leased[1].id.0];
    let workers = vec!["w".to_owned(), "w".to_owned()];
    let attempts = vec![1_i32, 1];
    let sql = &storage.sql;
    let statements: Vec<(&str, Query<'_, Postgres, PgArguments>)> = vec![
        (
            "ack",
            sqlx::query(explain(sql.ack.as_str()))
                .bind(now)
                .bind(ids.clone())
                .bind(workers.clone())
                .bind(attempts.clone())
                .bind(vec![Option::<Value>::None, None]),
        ),
        (
            "heartbeat",
            sqlx::query(explain(sql.heartbeat.as_str()))
                .bind(now)
                .bind(ids.clone())
                .bind(workers.clone())
                .bind(attempts.clone())
                .bind(30_000_000_i64),
        ),
        (
            "nack",
            sqlx::query(explain(sql.nack.as_str()))
                .bind(now)
                .bind(ids[0])
                .bind("w")
                .bind(1_i32)
                .bind(json!({}))
                .bind(true)
                .bind(1_000_i64),
        ),
        (
            "release",
            sqlx::query(explain(sql.release.as_str()))
                .bind(now)
                .bind(ids[0])
                .bind("w")
                .bind(1_i32),
        ),
        (
            "snooze",
            sqlx::query(explain(sql.snooze.as_str()))
                .bind(now)
                .bind(ids[0])
                .bind("w")
                .bind(1_i32)
                .bind(1_000_i64),
        ),
    ];
    for (name, query) in statements {
        let plan: Value = query
            .fetch_one(&pool)
            .await
            .and_then(|row| sqlx::Row::try_get(&row, 0))
            .expect("explain");
        let steps = crate::explain::steps(&plan);
        let names: Vec<&str> = steps.iter().filter_map(|s| s.index.as_deref()).collect();
        let whole = steps
            .iter()
            .any(|s| s.operation == "Seq Scan" && s.table.as_deref() == Some("job_queue"));
        assert!(
            !whole && !names.is_empty() && names.iter().all(|n| *n == "job_queue_pkey"),
            "{name} does not read job_queue by its primary key alone: {names:?}, sequential scan: {whole}"
        );
    }
    pool.close().await;
    schema.drop_schema().await;
}
