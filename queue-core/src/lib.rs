//! `queue-core`: the pure heart of a job queue that lives in the database an
//! application already runs.
//!
//! It holds the domain types ([`NewJob`], [`Job`], [`Lease`], …), their
//! validation, the derived job state ([`derive_state`]), retry [`Backoff`]
//! with jitter, the one error type [`QueueError`], and the async [`Storage`]
//! trait that every backend implements. It performs no I/O and starts no
//! runtime: backends (`queue-postgres`, `queue-mysql`) do the talking and
//! `queue-worker` does the running.

pub mod backend;
mod backoff;
mod batches;
mod capability;
mod clock;
mod dequeue;
mod error;
mod flow;
mod history;
mod ids;
mod job;
mod listing;
mod new_job;
mod outcome;
mod periodic;
mod samples;
mod search;
mod state;
mod stats;
mod storage;
pub mod time;
mod trace;
mod url;
mod wakeup;
mod worker;
mod workflow;

pub use backoff::Backoff;
pub use batches::{BatchCounts, batch, batch_closed};
pub use capability::{Capabilities, Capability};
pub use clock::{Clock, ManualClock};
pub use dequeue::{DequeueRequest, MAX_DEQUEUE_LIMIT, MAX_LEASE, validate_lease};
pub use error::{BoxError, QueueError, Result};
pub use flow::{
    Bucket, GroupLimit, GroupWeight, MAX_FLOW_LIMIT, MAX_GROUP_WEIGHT, MAX_PRIORITY_AGING,
    MIN_PRIORITY_AGING, QueueConfig, QueueLimits, RateLimit,
};
pub use history::{
    FinalStatus, HistoryFilter, HistoryPage, HistoryRecord, MAX_BATCH, MAX_PAGE_SIZE, PruneRequest,
    validate_limit,
};
pub use ids::{
    GroupKey, JobId, MAX_GROUP_KEY_BYTES, MAX_NAME_BYTES, QueueName, ScheduleName, UniqueKey,
    WorkerId, validate_name,
};
pub use job::{Job, Lease};
pub use listing::{
    JobFilter, JobPage, MAX_THROUGHPUT_WINDOW, Throughput, minute_of, validate_window,
};
pub use new_job::{DEFAULT_MAX_ATTEMPTS, MAX_MAX_ATTEMPTS, NewJob, Schedule, ValidJob};
pub use outcome::{Ack, EnqueueOutcome, NackOutcome, ReclaimOutcome, Retry};
pub use periodic::{PeriodicFire, ScheduleRecord, ValidFire};
pub use samples::{
    Depth, LagHistogram, MAX_LAG_BUCKET, MAX_SAMPLES_PER_CALL, QueueSample, SAMPLE_RETENTION,
    lag_bucket, lag_bucket_upper_ms, validate_samples,
};
pub use search::{
    DEFAULT_SEARCH_SCAN, MAX_MATCH_BYTES, MAX_PATH_STEPS, MAX_SEARCH_SCAN, PayloadMatch,
    SearchPage, search_history, search_jobs, validate_scan,
};
pub use state::{JobState, derive_state, state_of};
pub use stats::{DEFAULT_COUNT_CAP, QueueStats, validate_count_cap};
pub use storage::Storage;
pub use trace::{MAX_TRACESTATE_BYTES, TraceContext};
pub use url::{redact_secrets, redact_url, with_database};
pub use wakeup::{Wakeup, Wakeups};
pub use worker::{
    DEFAULT_FORGET_AFTER, DEFAULT_SILENT_AFTER, MAX_WORKER_CONCURRENCY, MAX_WORKER_QUEUES,
    WorkerAges, WorkerInfo, WorkerQueue, WorkerRecord, WorkerStatus,
};
pub use workflow::{
    Dependency, DependencyFailure, JobLink, JobLinks, LinkStatus, MAX_DEPENDENCIES,
    check_batch_dependencies, dependency_failed, failed_dependency, is_waiting, unknown_dependency,
    waiting_at,
};

pub use async_trait::async_trait;

// The README's examples, compiled (and the runnable ones run) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
