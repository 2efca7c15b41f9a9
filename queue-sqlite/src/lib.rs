//! SQLite storage for the job queue: an embedded database in one file (or
//! in memory), no server, on sqlx's SQLite driver with the bundled library.
//!
//! Every write is one `BEGIN IMMEDIATE` transaction or one autocommit
//! statement, retried a bounded number of times when SQLite reports the
//! database busy. Files are in WAL mode with `synchronous=NORMAL` by
//! default ([`Durability::Normal`]); [`Durability::Full`] syncs every commit.
//! Writes, flow control and durability in full: docs/design-notes.md,
//! "queue-sqlite", and docs/reliability.md.

mod error;
mod explain;
#[macro_use]
mod write;
mod admin;
mod checkpoint;
mod complete;
mod dequeue;
mod enqueue;
mod fair;
mod flow;
mod heartbeat;
mod inspect;
mod listing;
mod migrate;
mod periodic;
mod reclaim;
mod rows;
mod samples;
mod sql;
mod storage;
mod workers;
mod workflow;

pub use error::{OpenError, interpret_error};
pub use migrate::{MIGRATIONS, migrate};
pub use storage::{Durability, SqliteStorage};

// The README's examples, compiled (and the runnable ones run) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
