//! `queue`: a reliable job queue in the database an application already
//! runs. This is the one dependency an application adds: it re-exports the
//! domain types and the [`Storage`] trait of `queue-core`, the worker of
//! `queue-worker`, and one backend per feature, and [`connect`] picks the
//! backend from the URL.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use queue::prelude::*;
//!
//! # async fn demo() -> queue::Result<()> {
//! let storage = queue::connect("postgres://app@127.0.0.1/app").await?;
//! storage.migrate().await?; // safe in every process at start-up
//! storage.enqueue(NewJob::new("emails", serde_json::json!({ "to": "ada" }))).await?;
//!
//! let worker = WorkerBuilder::new(storage)
//!     .queue("emails", QueueOptions::with_concurrency(4), |ctx: JobContext| async move {
//!         println!("sending to {}", ctx.payload()["to"]);
//!         Ok(None)
//!     })?
//!     .start()?; // subscribes to the storage's wake-ups by itself
//! # worker.shutdown(Duration::from_secs(5)).await;
//! # Ok(()) }
//! ```
//!
//! Each backend is a feature, all on by default, so that a URL alone picks
//! one. The features, their URL schemes, and how to reach a backend's own
//! types: docs/design-notes.md, "queue (the facade)".

#[cfg(not(any(
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite",
    feature = "redis"
)))]
compile_error!(
    "the `queue` crate needs at least one backend feature: `sqlite`, `postgres`, `mysql` or `redis`"
);

mod any;
mod connect;
pub mod prelude;

pub use any::AnyStorage;
pub use connect::connect;
pub use queue_core::*;
pub use queue_worker::{
    Handler, HandlerResult, JobContext, JobError, LATE_AFTER, Missed, Periodic, QueueOptions,
    ScheduleInfo, ShutdownReport, Typed, TypedJob, Waker, Worker, WorkerBuilder, WorkerOptions,
    typed,
};
/// Trace propagation: capture the current span's OpenTelemetry context
/// into a job (feature `opentelemetry`).
#[cfg(feature = "opentelemetry")]
pub use queue_worker::{NewJobTraceExt, current_trace_context};

/// The MySQL / MariaDB backend (`queue-mysql`).
#[cfg(feature = "mysql")]
pub use queue_mysql as mysql;
/// The PostgreSQL backend (`queue-postgres`).
#[cfg(feature = "postgres")]
pub use queue_postgres as postgres;
/// The Redis backend (`queue-redis`).
#[cfg(feature = "redis")]
pub use queue_redis as redis;
/// The SQLite backend (`queue-sqlite`).
#[cfg(feature = "sqlite")]
pub use queue_sqlite as sqlite;

// The README's examples, compiled (and the runnable ones run) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
