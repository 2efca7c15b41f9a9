//! `queue-testkit`: what a storage backend needs to prove itself.
//!
//! - [`MemoryStorage`]: the reference implementation of the contract, also
//!   handy as a fast storage in users' own unit tests.
//! - [`suite`]: the conformance suite, one named case per contract bullet,
//!   run by [`conformance_tests!`] (one test per case) or
//!   [`suite::run_all`] (one report).
//! - [`model`]: a property test applying the same random operations to a
//!   backend and to [`MemoryStorage`] and comparing every result and state.
//! - [`broken`]: a catalogue of deliberately broken storages, each of which
//!   the suite and the model test reject: what the kit guarantees to catch.
//! - [`transactional`]: the cases of enqueue, ack and nack inside the
//!   caller's own transaction, run by [`transactional_tests!`], for a
//!   storage that offers them.
//! - [`restricted`]: a storage seen through fewer capabilities, as a backend
//!   that never implemented the others would be.
//! - [`placement`]: data where a real queue has it (rare rows the oldest),
//!   for the backends' explain tests.
//! - [`harness`]: databases from environment URLs, one isolated schema or
//!   database per test.

pub mod broken;
pub mod harness;
pub mod interop;
mod macros;
mod memory;
pub mod model;
pub mod placement;
pub mod restricted;
pub mod suite;
pub mod transactional;

pub use memory::{MemoryFactory, MemoryStorage};

// The README's examples, compiled (and the runnable ones run) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
