//! What most applications use, in one import: `use queue::prelude::*;`.

pub use crate::{
    AnyStorage, Backoff, GroupKey, JobContext, JobError, Missed, NewJob, Periodic, QueueLimits,
    QueueOptions, RateLimit, Retry, Storage, TraceContext, TypedJob, Worker, WorkerBuilder,
    WorkerOptions, connect,
};

#[cfg(feature = "opentelemetry")]
pub use crate::NewJobTraceExt;
