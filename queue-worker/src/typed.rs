//! Typed jobs: a payload type with its queue, enqueued and handled as itself.

use std::future::Future;
use std::marker::PhantomData;

use async_trait::async_trait;
use queue_core::NewJob;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::handler::{Handler, HandlerResult, JobContext, JobError};

/// A job type: its value is the payload, and it names its queue.
pub trait TypedJob: Serialize + DeserializeOwned + Send + 'static {
    /// The queue jobs of this type go to.
    const QUEUE: &'static str;

    /// This value as a job to enqueue (set priority, key, … on the result).
    fn to_job(&self) -> NewJob {
        NewJob::new(Self::QUEUE, self)
    }
}

/// A handler taking the decoded job; see [`typed`].
pub struct Typed<J, F> {
    handle: F,
    job: PhantomData<fn() -> J>,
}

/// Wraps `handle(job, ctx)` as a [`Handler`]: the payload is decoded as
/// `J`; a payload that does not decode fails its attempt without retry
/// (no retry can fix it), with an error naming the type.
pub fn typed<J, F, Fut>(handle: F) -> Typed<J, F>
where
    J: TypedJob,
    F: Fn(J, JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HandlerResult> + Send + 'static,
{
    Typed {
        handle,
        job: PhantomData,
    }
}

#[async_trait]
impl<J, F, Fut> Handler for Typed<J, F>
where
    J: TypedJob,
    F: Fn(J, JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HandlerResult> + Send + 'static,
{
    async fn handle(&self, ctx: JobContext) -> HandlerResult {
        let job: J = serde_json::from_value(ctx.payload().clone()).map_err(|e| {
            JobError::discard(format!(
                "payload does not decode as {}: {e}",
                std::any::type_name::<J>()
            ))
        })?;
        (self.handle)(job, ctx).await
    }
}
