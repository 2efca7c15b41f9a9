//! The model-based property test: the same random operations applied to a
//! backend and to [`crate::MemoryStorage`], compared after every step.
//!
//! Ids are the one thing allowed to differ (databases burn sequence values
//! on conflicts and failed inserts), so the test keeps a map between the
//! model's ids and the backend's and compares everything else exactly:
//! outcomes, error kinds, claimed jobs in order, per-queue stats after every
//! step, and every live job and history row at the end and every
//! [`FULL_COMPARE_EVERY`] steps. Both storages read manual clocks that move
//! together. On a difference proptest shrinks the sequence and the panic
//! shows the smallest one it found.

mod ops;
mod pair;

use proptest::test_runner::{Config, TestCaseError, TestRunner};

use crate::suite::StorageFactory;

pub use ops::{JobSpec, Op, QUEUES};

/// Full live-job and history comparison happens every this many steps.
pub const FULL_COMPARE_EVERY: usize = 10;

/// How much the model test explores.
#[derive(Debug, Clone, Copy)]
pub struct ModelConfig {
    /// Random sequences to try.
    pub cases: u32,
    /// The longest sequence.
    pub max_ops: usize,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            cases: 32,
            max_ops: 40,
        }
    }
}

/// Runs the model test against storages from `factory`.
///
/// Call it from a plain `#[test]` (not `#[tokio::test]`): it builds its own
/// runtime, and every storage is made inside it.
///
/// # Panics
/// With the shrunk sequence of operations when the backend and the model
/// disagree.
pub fn check_against_model<F: StorageFactory>(factory: &F, config: ModelConfig) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime for the model test");
    let mut runner = TestRunner::new(Config {
        cases: config.cases,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = proptest::collection::vec(ops::op(), 1..=config.max_ops);
    let result = runner.run(&strategy, |sequence| {
        runtime.block_on(pair::run_sequence(factory, &sequence))
    });
    match result {
        Ok(()) => {}
        Err(proptest::test_runner::TestError::Abort(reason)) => {
            eprintln!("SKIPPED: model test: {reason}");
        }
        Err(error) => panic!("backend and model disagree: {error}"),
    }
}

fn fail(message: String) -> TestCaseError {
    TestCaseError::fail(message)
}
