//! What the MySQL test binaries share: a fresh, migrated database per case
//! or test. Each binary uses part of it.
#![allow(dead_code)]

use async_trait::async_trait;
use queue_core::Clock;
use queue_mysql::MySqlStorage;
use queue_testkit::harness::mysql::TestDatabase;
use queue_testkit::suite::{Fixture, StorageFactory};

/// Makes a `MySqlStorage` in a new database, dropped after the case.
pub(crate) struct MySqlFactory;

#[async_trait]
impl StorageFactory for MySqlFactory {
    type Storage = MySqlStorage;

    async fn create(&self, clock: Clock) -> Fixture<MySqlStorage> {
        let (db, storage) = storage_in_new_database().await;
        let url = db.url();
        let second_clock = clock.clone();
        Fixture::new(storage.with_clock(clock))
            .with_teardown(db.drop_database())
            .with_second_handle(async move {
                MySqlStorage::connect_with_size(&url, 4)
                    .expect("a second pool on the test database")
                    .with_clock(second_clock)
            })
    }
}

/// A migrated storage in a new database (4 connections at most).
pub(crate) async fn storage_in_new_database() -> (TestDatabase, MySqlStorage) {
    storage_in_new_database_of(4).await
}

/// A migrated storage in a new database, `size` connections at most.
pub(crate) async fn storage_in_new_database_of(size: usize) -> (TestDatabase, MySqlStorage) {
    let db = TestDatabase::create().await;
    let storage = MySqlStorage::connect_with_size(&db.url(), size).expect("pool");
    storage.migrate().await.expect("migrate the test database");
    (db, storage)
}

/// A claim of up to `limit` jobs of `queue`, leases of a minute.
pub(crate) fn request(queue: &str, limit: u32) -> queue_core::DequeueRequest {
    queue_core::DequeueRequest::new(
        vec![queue_core::QueueName::new(queue).expect("valid")],
        limit,
        std::time::Duration::from_secs(60),
        queue_core::WorkerId::new("ring").expect("valid"),
    )
    .expect("valid request")
}

/// A connection of its own to the test database.
pub(crate) async fn connect(db: &TestDatabase) -> diesel_async::AsyncMysqlConnection {
    use diesel_async::AsyncConnection;
    diesel_async::AsyncMysqlConnection::establish(&db.url())
        .await
        .expect("connect to the test database")
}

/// The first two nodes' server URLs of the Galera cluster in
/// `QUEUE_TEST_GALERA_URLS` (galera.rs, galera_node_kill.rs).
pub(crate) fn galera_nodes() -> (String, String) {
    let urls = std::env::var("QUEUE_TEST_GALERA_URLS").unwrap_or_else(|_| {
        panic!(
            "QUEUE_TEST_GALERA_URLS is not set: the URLs of a Galera cluster's nodes, \
             comma-separated (scripts/galera.sh start; scripts/test.sh sets it)"
        )
    });
    let mut nodes = urls.split(',').map(str::to_owned);
    match (nodes.next(), nodes.next()) {
        (Some(first), Some(second)) => (first, second),
        _ => panic!("QUEUE_TEST_GALERA_URLS names fewer than two nodes: {urls}"),
    }
}

/// A new database on the cluster: the storage on node 1, the second
/// handle on node 2.
pub(crate) struct GaleraFactory;

#[async_trait]
impl StorageFactory for GaleraFactory {
    type Storage = MySqlStorage;

    async fn create(&self, clock: Clock) -> Fixture<MySqlStorage> {
        let (first, second) = galera_nodes();
        let db = TestDatabase::create_on(first).await;
        let storage = MySqlStorage::connect_with_size(&db.url(), 4).expect("pool on node 1");
        storage.migrate().await.expect("migrate on node 1");
        let other = queue_core::with_database(&second, db.name());
        let second_clock = clock.clone();
        Fixture::new(storage.with_clock(clock))
            .with_teardown(db.drop_database())
            .with_second_handle(async move {
                MySqlStorage::connect_with_size(&other, 4)
                    .expect("a second pool, on node 2")
                    .with_clock(second_clock)
            })
    }
}

/// A new database holding the schema as the migrations before `version`
/// left it (each recorded in the ledger, as `migrate` records them), and a
/// connection to it: where an upgrade test writes the previous release's
/// rows before migrating the rest.
pub(crate) async fn schema_before(
    version: u32,
) -> (TestDatabase, diesel_async::AsyncMysqlConnection) {
    use diesel_async::SimpleAsyncConnection;
    let db = TestDatabase::create().await;
    let mut conn = connect(&db).await;
    conn.batch_execute(
        "CREATE TABLE queue_schema_migrations (version INT NOT NULL PRIMARY KEY, \
         name VARCHAR(191) NOT NULL, checksum BIGINT NOT NULL, applied_at DATETIME(6) NOT NULL)",
    )
    .await
    .expect("ledger");
    for migration in queue_mysql::MIGRATIONS
        .iter()
        .filter(|m| m.version < version)
    {
        for statement in migration.statements() {
            conn.batch_execute(statement).await.expect("old migration");
        }
        conn.batch_execute(&format!(
            "INSERT INTO queue_schema_migrations VALUES ({}, '{}', {}, UTC_TIMESTAMP(6))",
            migration.version,
            migration.name,
            migration.checksum()
        ))
        .await
        .expect("record it");
    }
    (db, conn)
}
