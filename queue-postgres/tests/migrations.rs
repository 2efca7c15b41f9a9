//! The PostgreSQL migrations against a real server.

use std::path::Path;

use queue_core::QueueError;
use queue_postgres::{MIGRATIONS, migrate};
use queue_testkit::harness::assert_migrations_match_dir;
use queue_testkit::harness::postgres::TestSchema;
use sqlx::PgPool;

async fn tables(pool: &PgPool, schema: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
    )
    .bind(schema)
    .fetch_all(pool)
    .await
    .expect("list tables")
}

/// A migrated schema and a pool on it.
async fn migrated() -> Option<(TestSchema, PgPool)> {
    let schema = TestSchema::create().await?;
    let pool = schema.pool().await;
    migrate(&pool, schema.name()).await.expect("migrate");
    Some((schema, pool))
}

async fn finish(schema: TestSchema, pool: PgPool) {
    pool.close().await;
    schema.drop_schema().await;
}

fn all_versions() -> Vec<u32> {
    MIGRATIONS.iter().map(|m| m.version).collect()
}

#[test]
fn every_migration_file_is_embedded_unchanged() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations/postgres");
    assert_migrations_match_dir(&dir, MIGRATIONS);
}

#[tokio::test]
async fn migrations_apply_to_an_empty_schema() {
    let Some(schema) = TestSchema::create().await else {
        return;
    };
    let pool = schema.pool().await;
    assert_eq!(tables(&pool, schema.name()).await, Vec::<String>::new());

    assert_eq!(
        migrate(&pool, schema.name()).await.expect("migrate"),
        all_versions()
    );
    assert_eq!(
        tables(&pool, schema.name()).await,
        [
            "job_history",
            "job_queue",
            "queue_config",
            "queue_schema_migrations"
        ]
    );
    finish(schema, pool).await;
}

#[tokio::test]
async fn applying_migrations_twice_is_a_no_op() {
    let Some((schema, pool)) = migrated().await else {
        return;
    };
    assert_eq!(
        migrate(&pool, schema.name()).await.expect("second migrate"),
        Vec::<u32>::new()
    );
    finish(schema, pool).await;
}

#[tokio::test]
async fn concurrent_migrations_apply_each_version_once() {
    let Some(schema) = TestSchema::create().await else {
        return;
    };
    let pool = schema.pool().await;
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let pool = pool.clone();
            let name = schema.name().to_owned();
            tokio::spawn(async move { migrate(&pool, &name).await })
        })
        .collect();
    let mut applied = Vec::new();
    for run in runs {
        applied.extend(run.await.expect("task").expect("migrate"));
    }
    assert_eq!(applied, all_versions());
    finish(schema, pool).await;
}

#[tokio::test]
async fn an_edited_migration_is_a_conflict() {
    let Some((schema, pool)) = migrated().await else {
        return;
    };
    sqlx::query("UPDATE queue_schema_migrations SET checksum = checksum + 1 WHERE version = 1")
        .execute(&pool)
        .await
        .expect("tamper");
    let err = migrate(&pool, schema.name())
        .await
        .expect_err("edited migration");
    assert!(matches!(err, QueueError::Conflict { .. }), "{err:?}");
    finish(schema, pool).await;
}

#[tokio::test]
async fn dequeue_index_is_partial_and_led_by_queue_then_priority_desc() {
    let Some((schema, pool)) = migrated().await else {
        return;
    };
    let definition: String = sqlx::query_scalar(
        "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'job_queue_dequeue'",
    )
    .bind(schema.name())
    .fetch_one(&pool)
    .await
    .expect("index exists");
    assert!(
        definition
            .contains("(queue_name, priority DESC, available_at, id) WHERE (lease_until IS NULL)"),
        "{definition}"
    );
    finish(schema, pool).await;
}

#[tokio::test]
async fn an_application_can_upsert_on_the_unique_key_itself() {
    let Some((schema, pool)) = migrated().await else {
        return;
    };
    let insert = "INSERT INTO job_queue (queue_name, unique_key, payload, max_attempts) \
                  VALUES ('q', 'k', '{}', 1) ON CONFLICT (queue_name, unique_key) DO NOTHING";
    for _ in 0..2 {
        sqlx::query(insert)
            .execute(&pool)
            .await
            .expect("ON CONFLICT infers the plain unique index");
    }
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM job_queue")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(count, 1);
    finish(schema, pool).await;
}

#[tokio::test]
async fn a_lease_without_a_holder_is_refused_by_the_schema() {
    let Some((schema, pool)) = migrated().await else {
        return;
    };
    let err = sqlx::query(
        "INSERT INTO job_queue (queue_name, payload, max_attempts, lease_until) \
         VALUES ('q', '{}', 1, now())",
    )
    .execute(&pool)
    .await
    .expect_err("check constraint");
    assert!(
        err.to_string().contains("job_queue_lease_has_holder"),
        "{err}"
    );
    finish(schema, pool).await;
}
