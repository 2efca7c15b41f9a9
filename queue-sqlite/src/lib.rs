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
//! # Flow control, snooze, cancel, periodic fires
//!
//! Migration 0002 (`queue-sqlite/migrations/0002_flow_control.sql`) adds what
//! migration 0004 adds on PostgreSQL and MySQL (SQLite's versions count on
//! their own: its first release folded the others' 0001 to 0003 into one
//! file): the limits and token bucket of `queue_config`, `snoozes` on
//! `job_queue` and `job_history`, the final status `cancelled` (the
//! history table is rebuilt inside the migration's transaction, its
//! indexes recreated) and `queue_schedule`.
//!
//! A claim naming a queue with a concurrency or rate limit runs in one
//! `BEGIN IMMEDIATE` transaction that reads the limits, counts the held
//! leases through the index of held leases (so its cost grows with the
//! leases held in the whole file, not with the queue's waiting jobs),
//! claims what `QueueLimits::allowance` allows and stores the bucket;
//! claims naming no such queue keep the plain path, which queues are
//! limited being read at most once a second. Cancel and discard tell this
//! process's subscribers `Wakeup::Cancelled`; other processes sharing the
//! file learn at their worker's next heartbeat.
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
//! docs/reliability.md. The storage's writes never checkpoint the WAL
//! themselves: a task of the storage does, four times a second, so that no
//! enqueue or claim waits for a checkpoint's copy and disk sync.

#[macro_use]
mod error;
mod admin;
mod checkpoint;
mod complete;
mod dequeue;
mod enqueue;
mod flow;
mod heartbeat;
mod inspect;
mod migrate;
mod periodic;
mod reclaim;
mod rows;
mod sql;
mod storage;

pub use error::{OpenError, interpret_error};
pub use migrate::{MIGRATIONS, migrate};
pub use storage::{Durability, SqliteStorage};

// The README's examples, compiled (and the runnable ones run) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
