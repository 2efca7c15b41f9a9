//! The factory both test files share: a fresh traced storage per case.

use queue_core::Clock;
use queue_testkit::MemoryStorage;
use queue_testkit::suite::{Fixture, StorageFactory};
use traced_storage::TracedStorage;

/// Wraps a fresh `MemoryStorage` on the case's clock. A database backend
/// would create an isolated schema here and drop it in the teardown.
pub(crate) struct TracedFactory;

#[async_trait::async_trait]
impl StorageFactory for TracedFactory {
    type Storage = TracedStorage<MemoryStorage>;

    async fn create(&self, clock: Clock) -> Fixture<Self::Storage> {
        let storage = MemoryStorage::with_clock(clock);
        // The cases of promises across hosts need a second handle on the
        // same data: a database backend would open a second pool here.
        let second = TracedStorage::new(storage.handle());
        Fixture::new(TracedStorage::new(storage)).with_second_handle(async move { second })
    }
}
