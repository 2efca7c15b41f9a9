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
