//! `queue-postgres`: the PostgreSQL storage of the job queue, on sqlx.
//!
//! ```no_run
//! # async fn demo() -> queue_core::Result<()> {
//! use queue_core::{NewJob, Storage};
//! use queue_postgres::PgStorage;
//!
//! let storage = PgStorage::connect("postgres://localhost/app").await?;
//! storage.migrate().await?;
//! storage.enqueue(NewJob::new("emails", serde_json::json!({"to": "ada"}))).await?;
//! # Ok(()) }
//! ```
//!
//! Every operation of [`queue_core::Storage`] is one SQL statement, hence
//! one round trip; batches (enqueue, ack, heartbeat) too. Claims use
//! `FOR UPDATE SKIP LOCKED` on the partial dequeue index. Enqueues signal
//! their queue on a LISTEN/NOTIFY channel once per statement
//! ([`PgStorage::listen`]). [`PgStorage::enqueue_in`], [`PgStorage::ack_in`]
//! and [`PgStorage::nack_in`] run on the caller's transaction.
//!
//! Pooled enqueues signal after their commit, enqueues in the caller's
//! transaction inside it (the `signals` module); why: docs/design-notes.md,
//! "queue-postgres".
//!
//! Through a PgBouncer in transaction pooling, set
//! [`PgStorage::with_transaction_pooling`] (every statement unnamed and in a
//! transaction) and, for wake-ups, [`PgStorage::with_listen_url`] (LISTEN on
//! a direct connection): docs/high-availability.md, "PgBouncer".

mod admin;
#[cfg(test)]
mod async_claims;
mod complete;
mod copy_in;
mod database;
mod dequeue;
mod enqueue;
mod error;
mod exec;
mod explain;
mod flow;
mod heartbeat;
mod hosts;
mod inspect;
mod lease;
#[cfg(test)]
mod lease_plans;
mod migrate;
mod notify;
mod periodic;
mod ready_ring;
mod reclaim;
mod rows;
mod samples;
mod signals;
mod sql;
mod storage;
#[cfg(test)]
mod test_schema;
mod unique_index;
mod workers;
mod workflow;

pub use database::create_database_if_missing;
pub use error::interpret_error;
pub use migrate::{MIGRATIONS, migrate};
pub use notify::PgWakeups;
pub use queue_core::backend::PING_IDLE_AFTER;
pub use storage::{DEFAULT_SCHEMA, PgStorage, pool_options};

// The README's examples, compiled (and the runnable ones run) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
