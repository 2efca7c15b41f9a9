//! What most applications use, in one import: `use queue::prelude::*;`.

pub use crate::{
    AnyStorage, Backoff, JobContext, JobError, NewJob, QueueOptions, Retry, Storage, TypedJob,
    Worker, WorkerBuilder, WorkerOptions, connect,
};
