//! The model-based property test: the same random operations applied to a
//! backend and to [`crate::MemoryStorage`], compared after every step.
//! Only ids may differ. The sequences come from [`SEEDS`] unless
//! `QUEUE_MODEL_SEEDS` / `QUEUE_MODEL_CASES` say otherwise; what is compared
//! and how to explore further: docs/writing-a-backend.md, "5. The model
//! test".
//!
//! A failure prints the shrunk sequence; paste it into a regression test
//! that calls [`replay`]:
//!
//! ```ignore
//! use queue_core::FinalStatus::*;
//! use queue_testkit::model::{JobSpec, Op::*, replay};
//!
//! #[test]
//! fn nack_then_reclaim_regression() {
//!     replay(&MyFactory, &[Enqueue(JobSpec { queue: 0, key: None, priority: 0,
//!         delay_secs: None, max_attempts: 1, invalid: false }), Reclaim(1)]);
//! }
//! ```

mod ops;
mod pair;
mod queries;

use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

use crate::suite::StorageFactory;

pub use ops::{JobSpec, Op, QUEUES, Selection};

/// Full live-job and history comparison happens every this many steps.
pub const FULL_COMPARE_EVERY: usize = 10;

/// The seeds every run uses unless `QUEUE_MODEL_SEEDS` says otherwise.
pub const SEEDS: [u64; 4] = [0x5EED_0001, 0x0DD5_EED2, 0xC0FF_EE03, 0xBAD5_EED4];

/// How much the model test explores.
#[derive(Debug, Clone, Copy)]
pub struct ModelConfig {
    /// Random sequences per seed.
    pub cases: u32,
    /// The longest sequence.
    pub max_ops: usize,
}

impl Default for ModelConfig {
    /// 96 sequences per seed (384 in all) of up to 100 steps: about a
    /// second on `MemoryStorage`, three or four minutes on a database. The
    /// configuration to use on every backend: a test checks that it rejects
    /// every storage of [`crate::broken`], and smaller ones miss some (64
    /// per seed did once fair groups joined the operations).
    fn default() -> Self {
        Self {
            cases: 96,
            max_ops: 100,
        }
    }
}

/// The seeds to run: `QUEUE_MODEL_SEEDS` or [`SEEDS`].
fn seeds() -> Vec<u64> {
    match std::env::var("QUEUE_MODEL_SEEDS") {
        Ok(value) if value.trim() == "random" => {
            let fresh: Vec<u64> = (0..SEEDS.len()).map(|_| rand::random()).collect();
            eprintln!("model test: QUEUE_MODEL_SEEDS={}", join(&fresh));
            fresh
        }
        Ok(value) => value
            .split(',')
            .map(|seed| {
                let seed = seed.trim();
                seed.parse()
                    .unwrap_or_else(|_| panic!("QUEUE_MODEL_SEEDS: {seed:?} is not a u64"))
            })
            .collect(),
        Err(_) => SEEDS.to_vec(),
    }
}

fn join(seeds: &[u64]) -> String {
    seeds
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime for the model test")
}

/// Runs the model test against storages from `factory`, `config.cases`
/// sequences for each seed.
///
/// Call it from a plain `#[test]` (not `#[tokio::test]`): it builds its own
/// runtime, and every storage is made inside it.
///
/// # Panics
/// With the seed and the shrunk sequence of operations when the backend and
/// the model disagree.
pub fn check_against_model<F: StorageFactory>(factory: &F, config: ModelConfig) {
    let cases = std::env::var("QUEUE_MODEL_CASES")
        .ok()
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(config.cases);
    let runtime = runtime();
    let strategy = proptest::collection::vec(ops::op(), 1..=config.max_ops);
    for seed in seeds() {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
        let mut runner = TestRunner::new_with_rng(
            Config {
                cases,
                failure_persistence: None,
                ..Config::default()
            },
            rng,
        );
        let result = runner.run(&strategy, |sequence| {
            runtime.block_on(pair::run_sequence(factory, &sequence))
        });
        match result {
            Ok(()) => {}
            Err(proptest::test_runner::TestError::Abort(reason)) => {
                panic!("model test aborted (seed {seed}): {reason}")
            }
            Err(error) => panic!(
                "backend and model disagree (seed {seed}; rerun with QUEUE_MODEL_SEEDS={seed}): {error}"
            ),
        }
    }
}

/// Runs one fixed sequence on a fresh backend and model, as a regression
/// test for a sequence the model test once found.
///
/// # Panics
/// With the step and the difference when the backend and the model disagree.
pub fn replay<F: StorageFactory>(factory: &F, sequence: &[Op]) {
    if let Err(error) = runtime().block_on(pair::run_sequence(factory, sequence)) {
        panic!("backend and model disagree: {error}");
    }
}

fn fail(message: String) -> TestCaseError {
    TestCaseError::fail(message)
}
