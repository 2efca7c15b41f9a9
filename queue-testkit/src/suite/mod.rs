//! The conformance suite: one named case per contract bullet of
//! [`queue_core::Storage`], grouped one file per area.
//!
//! A backend supplies a [`StorageFactory`] and either expands
//! [`conformance_tests!`](crate::conformance_tests) (one `#[tokio::test]` per
//! case) or calls [`run_all`] (one report). Every case gets a fresh, empty
//! storage on a [`ManualClock`] that starts at [`START`], and moves time by
//! advancing that clock: nothing sleeps.

pub mod ack;
pub mod admin;
pub mod bulk;
pub mod cancel;
pub mod concurrency;
pub mod dequeue;
pub mod enqueue;
pub mod flow;
pub mod heartbeat;
mod helpers;
pub mod inspect;
pub mod listing;
pub mod nack;
pub mod periodic;
pub mod reclaim;
pub mod release;
pub mod snooze;
pub mod trace;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use queue_core::{Clock, ManualClock, Storage};

pub use helpers::*;

/// A boxed, sendable future, as cases and teardowns are stored.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Where every case's manual clock starts: far from the real date, so a
/// backend that reads its server clock instead of the bound one fails loudly.
pub fn start() -> DateTime<Utc> {
    DateTime::from_timestamp_micros(START).unwrap_or(DateTime::UNIX_EPOCH)
}

/// [`start`] as microseconds since the epoch: 2031-03-04T05:06:07.123456Z.
pub const START: i64 = 1_930_453_567_123_456;

/// A fresh storage for one case, and what to run after it.
pub struct Fixture<S> {
    storage: S,
    teardown: Option<BoxFuture<()>>,
}

impl<S> Fixture<S> {
    /// A storage that needs no clean-up.
    pub fn new(storage: S) -> Self {
        Self {
            storage,
            teardown: None,
        }
    }

    /// Runs `teardown` after the case, once the storage is dropped (e.g. to
    /// drop the case's schema or database).
    pub fn with_teardown(mut self, teardown: impl Future<Output = ()> + Send + 'static) -> Self {
        self.teardown = Some(Box::pin(teardown));
        self
    }

    /// The storage and the teardown, to run them by hand.
    pub fn into_parts(self) -> (S, Option<BoxFuture<()>>) {
        (self.storage, self.teardown)
    }
}

/// Makes a fresh, empty, isolated storage per case.
#[async_trait]
pub trait StorageFactory: Send + Sync {
    /// The storage under test.
    type Storage: Storage;

    /// A new storage that reads `clock` for every "now", with nothing in it.
    /// A factory that cannot make one (no database configured, a server
    /// unreachable) panics with the reason: a case never passes without
    /// having run.
    async fn create(&self, clock: Clock) -> Fixture<Self::Storage>;
}

/// What a case receives: the storage and the clock it reads.
pub struct Ctx<S> {
    /// The storage under test, shareable across tasks.
    pub storage: Arc<S>,
    /// Its clock; advance it to let time pass.
    pub clock: ManualClock,
}

impl<S> Clone for Ctx<S> {
    fn clone(&self) -> Self {
        Self {
            storage: Arc::clone(&self.storage),
            clock: self.clock.clone(),
        }
    }
}

/// One conformance case.
pub struct Case<S> {
    /// The area file it lives in, e.g. `enqueue`.
    pub area: &'static str,
    /// Its function name.
    pub name: &'static str,
    /// Runs it; a failed case panics.
    pub run: fn(Ctx<S>) -> BoxFuture<()>,
}

/// Runs one case on a fresh storage from `factory`, then its teardown.
/// Panics (fails the calling test) when the case fails.
pub async fn run_case<F: StorageFactory>(factory: &F, run: fn(Ctx<F::Storage>) -> BoxFuture<()>) {
    let clock = ManualClock::new(start());
    let fixture = factory.create(Clock::Manual(clock.clone())).await;
    let ctx = Ctx {
        storage: Arc::new(fixture.storage),
        clock,
    };
    let outcome = tokio::spawn(run(ctx)).await;
    if let Some(teardown) = fixture.teardown {
        teardown.await;
    }
    if let Err(error) = outcome {
        match error.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(error) => panic!("case did not finish: {error}"),
        }
    }
}

/// Runs `future` to completion on a fresh multi-threaded tokio runtime (two
/// workers, time and I/O enabled), as every test made by
/// [`conformance_tests!`](crate::conformance_tests) does.
///
/// # Panics
/// When the runtime cannot be built, or with the future's panic.
pub fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime for a conformance case")
        .block_on(future)
}

/// The outcome of [`run_all`].
#[derive(Debug, Default)]
pub struct Report {
    /// `area::name` of each case that passed.
    pub passed: Vec<String>,
    /// `area::name` and the panic message of each case that failed.
    pub failed: Vec<(String, String)>,
}

impl Report {
    /// True when no case failed.
    pub fn is_success(&self) -> bool {
        self.failed.is_empty()
    }
}

/// Runs every case in turn on fresh storages and reports each outcome, for
/// harnesses that want one runtime and one result.
pub async fn run_all<F: StorageFactory>(factory: &F) -> Report {
    let mut report = Report::default();
    for case in cases::<F::Storage>() {
        let label = format!("{}::{}", case.area, case.name);
        let clock = ManualClock::new(start());
        let fixture = factory.create(Clock::Manual(clock.clone())).await;
        let ctx = Ctx {
            storage: Arc::new(fixture.storage),
            clock,
        };
        let outcome = tokio::spawn((case.run)(ctx)).await;
        if let Some(teardown) = fixture.teardown {
            teardown.await;
        }
        match outcome {
            Ok(()) => report.passed.push(label),
            Err(error) => report.failed.push((label, panic_message(error))),
        }
    }
    report
}

fn panic_message(error: tokio::task::JoinError) -> String {
    match error.try_into_panic() {
        Ok(panic) => panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "panicked".into()),
        Err(error) => error.to_string(),
    }
}

macro_rules! case_list {
    (; $($area:ident :: $name:ident),* $(,)?) => {
        /// Every case of the suite, in file order.
        pub fn cases<S: Storage>() -> Vec<Case<S>> {
            vec![$(Case {
                area: stringify!($area),
                name: stringify!($name),
                run: |ctx| Box::pin($area::$name(ctx)),
            }),*]
        }
    };
}

crate::for_each_case!([case_list]);
