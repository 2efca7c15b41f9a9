//! SQLite storage for the job queue: an embedded database in one file (or
//! in memory), no server, on sqlx's SQLite driver with the bundled library.
//!
//! Writes run in `BEGIN IMMEDIATE` transactions (SQLite's one writer at a
//! time), or as one autocommit statement where a single statement does the
//! whole write (a claim from one queue, a batch of jobs without unique
//! keys), retried a bounded number of times when SQLite reports the
//! database busy. The writers of one process take turns on an in-process
//! lock, so they wait for each other without SQLite's busy handler, which
//! sleeps between looks at the lock. Batches are written with multi-row
//! statements, chunked under SQLite's parameter limit. Wake-ups reach the
//! subscribers of the same process; other processes sharing the file poll.
//!
//! # Durability
//!
//! Files are in WAL mode with `synchronous=NORMAL` by default
//! ([`Durability::Normal`]): a commit survives the application crashing or
//! being killed, and a power loss or operating-system crash may lose the
//! last commits but never corrupts the file. Syncing the disk at every
//! commit would bound every enqueue, claim and ack to the disk's sync rate;
//! an application that needs commits to survive power loss opens the file
//! with `synchronous=full` in the URL ([`Durability::Full`]). See
//! docs/reliability.md.

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
