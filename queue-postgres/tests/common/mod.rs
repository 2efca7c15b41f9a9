//! What the PostgreSQL test binaries share: a fresh, migrated schema per
//! case or test. Each binary uses part of it.
#![allow(dead_code)]

use async_trait::async_trait;
use queue_core::Clock;
use queue_postgres::PgStorage;
use queue_testkit::harness::postgres::TestSchema;
use queue_testkit::suite::{Fixture, StorageFactory};

/// Makes a `PgStorage` in a new schema, dropped after the case.
pub(crate) struct PgFactory;

/// As [`PgFactory`], with keyless jobs left out of the unique-key index
/// (`PgStorage::index_keyless_jobs(false)`).
pub(crate) struct PgKeylessUnindexedFactory;

/// As [`PgFactory`], with claims committing asynchronously
/// (`PgStorage::with_async_claims(true)`).
pub(crate) struct PgAsyncClaimsFactory;

#[async_trait]
impl StorageFactory for PgFactory {
    type Storage = PgStorage;

    async fn create(&self, clock: Clock) -> Fixture<PgStorage> {
        fixture(clock, true, false).await
    }
}

#[async_trait]
impl StorageFactory for PgKeylessUnindexedFactory {
    type Storage = PgStorage;

    async fn create(&self, clock: Clock) -> Fixture<PgStorage> {
        fixture(clock, false, false).await
    }
}

#[async_trait]
impl StorageFactory for PgAsyncClaimsFactory {
    type Storage = PgStorage;

    async fn create(&self, clock: Clock) -> Fixture<PgStorage> {
        fixture(clock, true, true).await
    }
}

/// A storage on `clock` in a new schema, migrated, with keyless jobs in
/// the unique-key index or not, its claims committing asynchronously or not.
async fn fixture(clock: Clock, keyless_indexed: bool, async_claims: bool) -> Fixture<PgStorage> {
    let schema = TestSchema::create().await;
    let pool = schema.pool().await;
    let storage = PgStorage::from_pool(pool.clone())
        .with_schema(schema.name())
        .expect("test schema names are valid")
        .with_clock(clock.clone())
        .with_async_claims(async_claims);
    storage.migrate().await.expect("migrate the test schema");
    storage
        .index_keyless_jobs(keyless_indexed)
        .await
        .expect("the unique-key index's form");
    // Opened only for a case that asks; its connections close when the
    // case drops it, before the teardown drops the schema.
    let options = schema.connect_options();
    let name = schema.name().to_owned();
    let second = async move {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(8)
            .connect_with(options)
            .await
            .expect("a second pool on the test schema");
        PgStorage::from_pool(pool)
            .with_schema(&name)
            .expect("test schema names are valid")
            .with_clock(clock)
            .with_async_claims(async_claims)
    };
    Fixture::new(storage)
        .with_teardown(async move {
            pool.close().await;
            schema.drop_schema().await;
        })
        .with_second_handle(second)
}

/// A migrated storage in a new schema, and the pool it uses.
pub(crate) async fn storage_in_new_schema() -> (TestSchema, sqlx::PgPool, PgStorage) {
    let schema = TestSchema::create().await;
    let pool = schema.pool().await;
    let storage = PgStorage::from_pool(pool.clone())
        .with_schema(schema.name())
        .expect("test schema names are valid");
    storage.migrate().await.expect("migrate the test schema");
    (schema, pool, storage)
}

/// The variable naming a PgBouncer in session pooling mode in front of the
/// test database (scripts/pgbouncer.sh: 127.0.0.1:6433).
pub(crate) const PGBOUNCER_SESSION_URL_VAR: &str = "QUEUE_TEST_PGBOUNCER_SESSION_URL";

/// As [`PgFactory`], the storage's pool connected through PgBouncer in
/// session pooling mode (`QUEUE_TEST_PGBOUNCER_SESSION_URL`); the schema is
/// created and dropped directly. PgBouncer 1.18 does not forward the
/// `options` startup parameter (it is in `ignore_startup_parameters`), so the
/// pool's `search_path` is the default: the storage names its schema in
/// every statement.
pub(crate) struct PgBouncerSessionFactory;

#[async_trait]
impl StorageFactory for PgBouncerSessionFactory {
    type Storage = PgStorage;

    async fn create(&self, clock: Clock) -> Fixture<PgStorage> {
        let url = std::env::var(PGBOUNCER_SESSION_URL_VAR).unwrap_or_else(|_| {
            panic!(
                "{PGBOUNCER_SESSION_URL_VAR} is not set: these tests need a PgBouncer in session \
                 pooling mode (scripts/pgbouncer.sh start; then \
                 {PGBOUNCER_SESSION_URL_VAR}=postgres://postgres@127.0.0.1:6433/queue_test)"
            )
        });
        let schema = TestSchema::create().await;
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(8)
            .connect(&url)
            .await
            .unwrap_or_else(|e| panic!("cannot connect to {PGBOUNCER_SESSION_URL_VAR}: {e}"));
        let storage = PgStorage::from_pool(pool.clone())
            .with_schema(schema.name())
            .expect("test schema names are valid")
            .with_clock(clock);
        storage.migrate().await.expect("migrate the test schema");
        Fixture::new(storage).with_teardown(async move {
            pool.close().await;
            schema.drop_schema().await;
        })
    }
}

/// The variable naming a PgBouncer in transaction pooling mode in front of
/// the test database (scripts/pgbouncer.sh: 127.0.0.1:6432, a server pool
/// of 4).
pub(crate) const PGBOUNCER_URL_VAR: &str = "QUEUE_TEST_PGBOUNCER_URL";

/// `QUEUE_TEST_PGBOUNCER_URL`, or a panic naming it.
pub(crate) fn pgbouncer_url() -> String {
    std::env::var(PGBOUNCER_URL_VAR).unwrap_or_else(|_| {
        panic!(
            "{PGBOUNCER_URL_VAR} is not set: these tests need a PgBouncer in transaction \
             pooling mode (scripts/pgbouncer.sh start; then \
             {PGBOUNCER_URL_VAR}=postgres://postgres@127.0.0.1:6432/queue_test)"
        )
    })
}

/// A storage on `schema` whose pool goes through the transaction-pooling
/// PgBouncer, in the storage's transaction pooling mode
/// (`PgStorage::with_transaction_pooling`), listening for wake-ups on a
/// direct connection to the test database when `listen`.
pub(crate) async fn transaction_pooled(
    schema: &TestSchema,
    clock: Clock,
    listen: bool,
) -> PgStorage {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(8)
        .connect(&pgbouncer_url())
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {PGBOUNCER_URL_VAR}: {e}"));
    let storage = PgStorage::from_pool(pool)
        .with_transaction_pooling(true)
        .with_schema(schema.name())
        .expect("test schema names are valid")
        .with_clock(clock);
    if listen {
        storage
            .with_listen_url(schema.url())
            .expect("the test database URL is valid")
    } else {
        storage
    }
}

/// As [`PgFactory`], the storage (and the second handle) in transaction
/// pooling mode through PgBouncer (`QUEUE_TEST_PGBOUNCER_URL`), migrated
/// through it, listening on a direct connection (`QUEUE_TEST_POSTGRES_URL`);
/// the schema is created and dropped directly.
pub(crate) struct PgBouncerTransactionFactory;

#[async_trait]
impl StorageFactory for PgBouncerTransactionFactory {
    type Storage = PgStorage;

    async fn create(&self, clock: Clock) -> Fixture<PgStorage> {
        let schema = TestSchema::create().await;
        let storage = transaction_pooled(&schema, clock.clone(), true).await;
        storage.migrate().await.expect("migrate the test schema");
        let pool = storage.pool().clone();
        let second = {
            let url = schema.url().to_owned();
            let name = schema.name().to_owned();
            async move {
                let pool = sqlx::postgres::PgPoolOptions::new()
                    .max_connections(8)
                    .connect(&pgbouncer_url())
                    .await
                    .unwrap_or_else(|e| panic!("cannot connect to {PGBOUNCER_URL_VAR}: {e}"));
                PgStorage::from_pool(pool)
                    .with_transaction_pooling(true)
                    .with_schema(&name)
                    .expect("test schema names are valid")
                    .with_clock(clock)
                    .with_listen_url(&url)
                    .expect("the test database URL is valid")
            }
        };
        Fixture::new(storage)
            .with_teardown(async move {
                pool.close().await;
                schema.drop_schema().await;
            })
            .with_second_handle(second)
    }
}

/// A new schema migrated up to `version` alone, as a release of that time
/// left it, with `rows` (plain SQL, run with the schema on the search
/// path) written before the ledger records the versions: the starting
/// point of an upgrade test. The caller migrates the rest.
#[allow(dead_code, reason = "used by the upgrade tests, not every test binary")]
pub(crate) async fn schema_at(version: u32, rows: &str) -> (TestSchema, sqlx::PgPool) {
    use sqlx::AssertSqlSafe;
    let schema = TestSchema::create().await;
    let pool = schema.pool().await;
    let s = schema.name().to_owned();
    let mut tx = pool.begin().await.expect("begin");
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE SCHEMA IF NOT EXISTS \"{s}\"; SET LOCAL search_path TO \"{s}\""
    )))
    .execute(&mut *tx)
    .await
    .expect("schema");
    let applied = || {
        queue_postgres::MIGRATIONS
            .iter()
            .filter(|m| m.version <= version)
    };
    for migration in applied() {
        sqlx::raw_sql(migration.sql)
            .execute(&mut *tx)
            .await
            .unwrap_or_else(|e| panic!("migration {}: {e}", migration.version));
    }
    sqlx::raw_sql(
        "CREATE TABLE queue_schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,
                                               checksum BIGINT NOT NULL,
                                               applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
    )
    .execute(&mut *tx)
    .await
    .expect("ledger");
    sqlx::raw_sql(AssertSqlSafe(rows.to_owned()))
        .execute(&mut *tx)
        .await
        .expect("rows");
    for migration in applied() {
        sqlx::query(
            "INSERT INTO queue_schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
        )
        .bind(i32::try_from(migration.version).expect("small"))
        .bind(migration.name)
        .bind(migration.checksum())
        .execute(&mut *tx)
        .await
        .expect("ledger row");
    }
    tx.commit().await.expect("commit");
    (schema, pool)
}

/// The next wake-up of `wakeups` within `wait`, if any.
pub(crate) async fn next_within(
    wakeups: &mut queue_postgres::PgWakeups,
    wait: std::time::Duration,
) -> Option<queue_core::Wakeup> {
    tokio::time::timeout(wait, wakeups.next())
        .await
        .ok()
        .map(|w| w.expect("listener"))
}

/// The wake-up naming queue `name`.
pub(crate) fn queue(name: &str) -> queue_core::Wakeup {
    queue_core::Wakeup::Queue(queue_core::QueueName::new(name).expect("valid"))
}
