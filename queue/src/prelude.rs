//! What most applications use, in one import: `use queue::prelude::*;`.

pub use crate::{
    AnyStorage, Backoff, JobContext, JobError, Missed, NewJob, Periodic, QueueLimits, QueueOptions,
    RateLimit, Retry, Storage, TypedJob, Worker, WorkerBuilder, WorkerOptions, connect,
};
