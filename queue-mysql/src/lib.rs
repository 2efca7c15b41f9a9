//! `queue-mysql`: the MySQL 8+ / MariaDB 10.6+ storage of the job queue, on
//! diesel-async (pure Rust, no C client library).
//!
//! ```no_run
//! # async fn demo() -> queue_core::Result<()> {
//! use queue_core::{NewJob, Storage};
//! use queue_mysql::MySqlStorage;
//!
//! let storage = MySqlStorage::connect("mysql://app@localhost/app")?;
//! storage.migrate().await?;
//! storage.enqueue(NewJob::new("emails", serde_json::json!({"to": "ada"}))).await?;
//! # Ok(()) }
//! ```
//!
//! Operations are short transactions at READ COMMITTED (claims use
//! `FOR UPDATE SKIP LOCKED` on the `job_queue_dequeue` index); lock
//! conflicts (deadlock, lock wait timeout) are retried a few times.
//! [`MySqlStorage::enqueue_in`], [`MySqlStorage::ack_in`] and
//! [`MySqlStorage::nack_in`] run inside the caller's diesel-async
//! transaction (as savepoints).
//!
//! No LISTEN/NOTIFY: workers poll. Connection advice (prefer `127.0.0.1`
//! to `localhost`): docs/design-notes.md, "queue-mysql".

mod admin;
mod bind;
mod complete;
mod dequeue;
mod enqueue;
mod error;
mod explain;
mod fair;
mod flow;
mod galera;
mod group_slots;
mod heartbeat;
mod inspect;
mod lease;
mod migrate;
mod periodic;
mod ready_ring;
mod reclaim;
mod rows;
mod samples;
mod sql;
mod storage;
mod workers;
mod workflow;

pub use diesel_async::AsyncMysqlConnection;
pub use error::{interpret_connection_error, interpret_error};
pub use migrate::{MIGRATIONS, migrate};
pub use storage::{MySqlPool, MySqlStorage, SESSION_SETUP};

// The README's examples, compiled (and the runnable ones run) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
