//! The model test runs clean on `MemoryStorage`, and catches a storage that
//! reads the wrong clock.

use async_trait::async_trait;
use queue_core::Clock;
use queue_core::FinalStatus;
use queue_testkit::broken::{BrokenFactory, Bug};
use queue_testkit::model::{JobSpec, ModelConfig, Op, check_against_model, replay};
use queue_testkit::suite::{Fixture, StorageFactory};
use queue_testkit::{MemoryFactory, MemoryStorage};

#[test]
fn memory_storage_agrees_with_the_model() {
    check_against_model(&MemoryFactory, ModelConfig::default());
}

/// A factory whose storage ignores the test clock and reads the system
/// clock, as a backend that calls its server's now() would.
struct WrongClock;

#[async_trait]
impl StorageFactory for WrongClock {
    type Storage = MemoryStorage;

    async fn create(&self, _clock: Clock) -> Fixture<MemoryStorage> {
        Fixture::new(MemoryStorage::with_clock(Clock::Database))
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

#[test]
fn a_fixed_sequence_replays_clean() {
    let job = JobSpec {
        queue: 0,
        key: Some(1),
        priority: 0,
        delay_secs: None,
        max_attempts: 2,
        invalid: false,
    };
    replay(
        &MemoryFactory,
        &[
            Op::Enqueue(job),
            Op::DequeueCapped {
                a: 1,
                b: 1,
                worker: 0,
            },
            Op::Nack(0, Some(5)),
            Op::NextDue(1),
            Op::Advance(6),
            Op::Reclaim(1),
            Op::ListHistory {
                queue: None,
                status: Some(FinalStatus::DeadLetter),
                before: None,
                limit: 2,
            },
        ],
    );
}

#[test]
#[should_panic(expected = "backend and model disagree")]
fn a_replayed_sequence_catches_a_broken_storage() {
    let job = JobSpec {
        queue: 0,
        key: None,
        priority: 0,
        delay_secs: None,
        max_attempts: 3,
        invalid: false,
    };
    replay(
        &BrokenFactory(Bug::NextDueIgnoresRetries),
        &[
            Op::Enqueue(job),
            Op::Dequeue {
                queues: 1,
                limit: 1,
                worker: 0,
                lease_secs: 30,
            },
            Op::Nack(0, Some(10)),
            Op::NextDue(1),
        ],
    );
}
