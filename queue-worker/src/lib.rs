//! `queue-worker`: the tokio runtime that runs jobs from any
//! [`queue_core::Storage`].
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> queue_core::Result<()> {
//! use std::time::Duration;
//!
//! use queue_core::NewJob;
//! use queue_testkit::MemoryStorage;
//! use queue_worker::{JobContext, JobError, QueueOptions, WorkerBuilder};
//!
//! let worker = WorkerBuilder::new(MemoryStorage::new())
//!     .queue("emails", QueueOptions::with_concurrency(4), |ctx: JobContext| async move {
//!         let to = ctx.payload()["to"].as_str().ok_or_else(|| JobError::discard("no address"))?;
//!         Ok(Some(serde_json::json!({ "sent_to": to })))
//!     })?
//!     .start()?;
//! worker.enqueue(NewJob::new("emails", serde_json::json!({ "to": "ada" }))).await?;
//! worker.shutdown(Duration::from_secs(5)).await;
//! # Ok(())
//! # }
//! ```
//!
//! One dispatch loop claims as many jobs as each queue has free slots; each
//! run holds a lease that heartbeats extend, and a lost lease fires the
//! run's cancellation token and drops its result. [`Worker::shutdown`]
//! stops fetching, waits up to a deadline, then releases what still runs.
//! How dispatch, handlers, periodic schedules, heartbeats, batched acks,
//! metrics and trace propagation work: docs/design-notes.md,
//! "queue-worker".

mod complete;
mod config;
mod dispatch;
mod execute;
mod handler;
mod heartbeat;
mod maintenance;
mod periodic;
mod registry;
mod samples;
mod settings;
mod shared;
mod trace;
mod typed;
mod wakeups;
mod worker;

pub use config::{QueueOptions, WorkerOptions};
pub use handler::{Handler, HandlerResult, JobContext, JobError};
pub use periodic::{LATE_AFTER, Missed, Periodic, ScheduleInfo};
#[cfg(feature = "opentelemetry")]
pub use trace::{NewJobTraceExt, current_trace_context};
pub use typed::{Typed, TypedJob, typed};
pub use worker::{ShutdownReport, Waker, Worker, WorkerBuilder};

// The README's examples, compiled (and the runnable ones run) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
