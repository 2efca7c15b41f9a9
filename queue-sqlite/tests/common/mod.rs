//! What the SQLite test binaries share: a fresh, migrated database per case.
#![allow(dead_code)]

use async_trait::async_trait;
use queue_core::Clock;
use queue_sqlite::SqliteStorage;
use queue_testkit::suite::{Fixture, StorageFactory};

/// Makes a `SqliteStorage` in a new in-memory database.
pub(crate) struct SqliteFactory;

#[async_trait]
impl StorageFactory for SqliteFactory {
    type Storage = SqliteStorage;

    async fn create(&self, clock: Clock) -> Fixture<SqliteStorage> {
        let storage = SqliteStorage::connect("sqlite::memory:")
            .await
            .expect("open an in-memory database")
            .with_clock(clock);
        Fixture::new(storage)
    }
}

/// Makes a `SqliteStorage` in a new file of its own (WAL, a pool of
/// several connections and the separate write connection), deleted after
/// the case.
pub(crate) struct SqliteFileFactory;

#[async_trait]
impl StorageFactory for SqliteFileFactory {
    type Storage = SqliteStorage;

    async fn create(&self, clock: Clock) -> Fixture<SqliteStorage> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("queue.db").display()
        );
        let storage = SqliteStorage::connect(&url)
            .await
            .expect("open a database file")
            .with_clock(clock.clone());
        Fixture::new(storage)
            .with_teardown(async move { drop(dir) })
            .with_second_handle(async move {
                SqliteStorage::connect(&url)
                    .await
                    .expect("a second handle on the database file")
                    .with_clock(clock)
            })
    }
}
