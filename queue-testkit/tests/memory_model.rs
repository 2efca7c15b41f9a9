//! The model test runs clean on `MemoryStorage`, and catches a storage that
//! reads the wrong clock.

use async_trait::async_trait;
use queue_core::Clock;
use queue_testkit::model::{ModelConfig, check_against_model};
use queue_testkit::suite::{Fixture, StorageFactory};
use queue_testkit::{MemoryFactory, MemoryStorage};

#[test]
fn memory_storage_agrees_with_the_model() {
    check_against_model(
        &MemoryFactory,
        ModelConfig {
            cases: 64,
            max_ops: 60,
        },
    );
}

/// A factory whose storage ignores the test clock and reads the system
/// clock, as a backend that calls its server's now() would.
struct WrongClock;

#[async_trait]
impl StorageFactory for WrongClock {
    type Storage = MemoryStorage;

    async fn create(&self, _clock: Clock) -> Option<Fixture<MemoryStorage>> {
        Some(Fixture::new(MemoryStorage::with_clock(Clock::Database)))
    }
}

#[test]
#[should_panic(expected = "backend and model disagree")]
fn a_storage_on_the_wrong_clock_is_caught() {
    check_against_model(
        &WrongClock,
        ModelConfig {
            cases: 16,
            max_ops: 20,
        },
    );
}
