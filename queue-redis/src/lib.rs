//! Redis storage for the job queue (seed 004's delay-queue design): every
//! operation on a queue is one Lua script over sorted sets and hashes, so
//! it is atomic; the server's `TIME` is the clock; every key of a queue
//! carries the hash tag `{<queue>}`, so a queue's scripts run on one slot
//! of a Redis Cluster. Workflows and batches (`Capability::Dependencies`,
//! `Capability::Batches`) are declared on a standalone server only, where
//! a script may reach several queues.
//!
//! The key layout (version [`LAYOUT_VERSION`], written by
//! [`RedisStorage::migrate`]), flow control, what spans several slots and
//! durability: [`design`]; the guarantees under a crash or failover in
//! the repository's docs/reliability.md.

#![warn(missing_docs)]

mod admin;
mod bulk;
mod command;
mod complete;
mod connect;
mod dequeue;
mod durable;
mod enqueue;
mod error;
mod flow;
mod heartbeat;
mod inspect;
mod keys;
mod namespace;
mod periodic;
mod reclaim;
mod rows;
mod samples;
mod scripts;
mod storage;
mod wakeups;
mod workers;
mod workflow;

pub use durable::MAX_DURABLE_TIMEOUT;
pub use error::{NodeError, interpret_error};
pub use storage::{DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_NAMESPACE, LAYOUT_VERSION, RedisStorage};

/// The design of the storage, for operators and the next engineer: the key
/// layout, flow control, what spans several slots, durability.
/// Documentation only.
#[doc = include_str!("design.md")]
pub mod design {}

// The README's examples, compiled (and the runnable ones run) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
