//! The conformance suite: one named case per contract bullet of
//! [`queue_core::Storage`], grouped one file per area.
//!
//! A backend supplies a [`StorageFactory`] and either expands
//! [`conformance_tests!`](crate::conformance_tests) (one `#[tokio::test]` per
//! case) or calls [`run_all`] (one report). Every case gets a fresh, empty
//! storage on a [`queue_core::ManualClock`] that starts at [`START`], and moves time by
//! advancing that clock: nothing sleeps.

pub mod ack;
pub mod admin;
pub mod aging;
pub mod batches;
pub mod bulk;
pub mod cancel;
mod case;
pub mod concurrency;
pub mod dequeue;
pub mod enqueue;
pub mod fairness;
pub mod flow;
pub mod groups;
pub mod handles;
pub mod heartbeat;
mod helpers;
pub mod inspect;
pub mod listing;
pub mod nack;
pub mod periodic;
pub mod reclaim;
pub mod release;
mod run;
pub mod samples;
pub mod search;
pub mod snooze;
pub mod trace;
pub mod weights;
pub mod workers;
pub mod workflows;

use std::future::Future;
use std::pin::Pin;

use chrono::{DateTime, Utc};
use queue_core::{Capability, Storage};

pub use case::{Case, Ctx, Fixture, StorageFactory};
pub use helpers::*;
pub use run::{NotRun, Report, run_all, run_all_of, run_case};

/// A boxed, sendable future, as cases and teardowns are stored.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Where every case's manual clock starts: far from the real date, so a
/// backend that reads its server clock instead of the bound one fails loudly.
pub fn start() -> DateTime<Utc> {
    DateTime::from_timestamp_micros(START).unwrap_or(DateTime::UNIX_EPOCH)
}

/// [`start`] as microseconds since the epoch: 2031-03-04T05:06:07.123456Z.
pub const START: i64 = 1_930_453_567_123_456;

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

macro_rules! case_list {
    (; $($area:ident :: $name:ident $([$($capability:ident),+])? $(@ $handles:literal)?),* $(,)?) => {
        /// Every case of the suite, in file order.
        pub fn cases<S: Storage>() -> Vec<Case<S>> {
            vec![$(Case {
                area: stringify!($area),
                name: stringify!($name),
                requires: &[$($(Capability::$capability),+)?],
                handles: 1 $(- 1 + $handles)?,
                run: |ctx| Box::pin($area::$name(ctx)),
            }),*]
        }
    };
}

crate::for_each_case!([case_list]);

/// The case `area::name` of [`cases`], as [`conformance_tests!`](crate::conformance_tests)
/// runs it.
///
/// # Panics
/// When the suite has no such case.
pub fn case<S: Storage>(area: &str, name: &str) -> Case<S> {
    (cases().into_iter())
        .find(|case| case.area == area && case.name == name)
        .unwrap_or_else(|| panic!("the suite has no case {area}::{name}"))
}
