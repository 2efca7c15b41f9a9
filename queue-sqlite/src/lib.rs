//! SQLite storage for the job queue: an embedded database in one file (or
//! in memory), no server, on sqlx's SQLite driver with the bundled library.
//!
//! Writes run in `BEGIN IMMEDIATE` transactions (SQLite's one writer at a
//! time), retried a bounded number of times when SQLite reports the
//! database busy; wake-ups reach the subscribers of the same process, other
//! processes sharing the file poll.

#[macro_use]
mod error;
mod admin;
mod complete;
mod dequeue;
mod enqueue;
mod heartbeat;
mod inspect;
mod migrate;
mod reclaim;
mod rows;
mod sql;
mod storage;

pub use error::{OpenError, interpret_error};
pub use migrate::{MIGRATIONS, migrate};
pub use storage::{Durability, SqliteStorage};
