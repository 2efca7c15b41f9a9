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
//! - One dispatch loop claims as many jobs as each queue has free slots,
//!   woken by [`Worker::enqueue`], by a freed slot, by the storage's
//!   wake-ups (the worker subscribes by itself through
//!   [`queue_core::Storage::subscribe`]; PostgreSQL's LISTEN/NOTIFY), by a
//!   [`Waker`], or by its idle back-off, bounded by the poll interval.
//! - Each run gets a [`JobContext`] with a cancellation token. `Ok` acks,
//!   `Err(JobError)` nacks with the queue's backoff (or dead-letters when
//!   `retry` is false), a panic or a timeout is a failed attempt.
//! - `Err(JobError::snooze(d))` puts the job off for `d` without counting
//!   the attempt. A cancelled job ([`queue_core::Storage::cancel`]) has its
//!   token fired: at once where the storage has wake-ups, else at the next
//!   heartbeat.
//! - [`Periodic`] cron schedules (seconds optional, IANA time zones) fire
//!   without a leader: declare one on every worker, each fire time yields
//!   one job ([`WorkerBuilder::periodic`], [`Missed`] for fires missed).
//! - Each queue's lease and backoff come from its `queue_config` row where
//!   set ([`queue_core::Storage::configure_queue`]), read every second;
//!   its concurrency and rate limits are enforced by the storage's claim.
//! - Heartbeats extend all in-flight leases of a queue in one call every
//!   lease / 3; a lost lease fires the run's token and drops its result.
//! - Acks are batched (64 or 5 ms); reclaim and prune run on intervals.
//! - [`Worker::shutdown`] stops fetching, waits up to a deadline, then
//!   fires tokens and releases leases without counting the attempt.
//! - Spans per job (`queue`, `job_id`, `attempt`) through `tracing`;
//!   counters and histograms through `metrics` (`queue_jobs_started_total`,
//!   `…_completed_total`, `…_failed_total`, `…_dead_lettered_total`,
//!   `queue_lease_lost_total`, `queue_jobs_enqueued_total`,
//!   `queue_job_run_seconds`, `queue_fetch_seconds`, and
//!   `queue_job_wait_seconds`, from `available_at` to start by the worker's
//!   clock, so approximate).
//!
//! # Traces across the queue
//!
//! A job may carry its enqueuer's W3C trace context
//! ([`queue_core::TraceContext`], set by [`queue_core::NewJob::trace_context`]),
//! stored by every backend. Each run's `job` span records its traceparent
//! as the field `traceparent`. With the feature `opentelemetry`:
//!
//! - [`NewJobTraceExt::with_current_trace`] fills a job's context from the
//!   current `tracing` span's OpenTelemetry context
//!   ([`current_trace_context`]); [`Worker::enqueue`] does so for a job
//!   that has none.
//! - The `job` span is made a child of the stored context (the remote
//!   parent set with tracing-opentelemetry's `set_parent` before the span
//!   is first entered), so the enqueuer's trace continues in the handler:
//!   same trace id, the enqueuing span as the parent, the handler's own
//!   spans below it. Without an OpenTelemetry layer in the subscriber this
//!   does nothing.
//!
//! The versions that fit together: tracing-opentelemetry 0.34 on
//! opentelemetry 0.33 (and opentelemetry_sdk 0.33 for the exporter).

mod complete;
mod config;
mod dispatch;
mod execute;
mod handler;
mod heartbeat;
mod maintenance;
mod periodic;
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
