//! `enqueue`: batch enqueue from one producer, then single enqueues from
//! many concurrent producers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use queue_core::NewJob;
use serde_json::json;

use super::{QUEUE, fill};
use crate::BenchError;
use crate::args::EnqueueArgs;
use crate::report::{Report, Row};
use crate::target::{Setup, Target};

pub(crate) async fn run<T: Target>(
    args: &EnqueueArgs,
    setup: &Setup,
    report: &mut Report,
) -> Result<(), BenchError> {
    let storage = T::fresh(setup).await?;
    let started = Instant::now();
    fill(&storage, QUEUE, args.n, 0, args.batch, 1).await?;
    let seconds = started.elapsed().as_secs_f64();
    verify_live(&storage, args.n).await?;
    report.push(
        Row::new("enqueue")
            .param("mode", "batch")
            .param("n", args.n)
            .param("batch", args.batch)
            .param("producers", 1)
            .figure("jobs_per_s", (args.n as f64 / seconds).round())
            .figure("seconds", format!("{seconds:.3}")),
    );

    let storage = T::fresh(setup).await?;
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut producers = Vec::new();
    for _ in 0..args.producers.max(1) {
        let (storage, next, total) = (storage.clone(), Arc::clone(&next), args.single_n);
        producers.push(tokio::spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < total {
                storage
                    .enqueue(NewJob::new(QUEUE, json!({ "single": true })))
                    .await?;
            }
            Ok::<(), BenchError>(())
        }));
    }
    for producer in producers {
        producer
            .await
            .map_err(|e| BenchError::from(e.to_string()))??;
    }
    let seconds = started.elapsed().as_secs_f64();
    verify_live(&storage, args.single_n).await?;
    report.push(
        Row::new("enqueue")
            .param("mode", "single")
            .param("n", args.single_n)
            .param("producers", args.producers)
            .figure("jobs_per_s", (args.single_n as f64 / seconds).round())
            .figure("seconds", format!("{seconds:.3}")),
    );
    Ok(())
}

async fn verify_live<T: Target>(storage: &T, expected: usize) -> Result<(), BenchError> {
    let live = storage.count_live(QUEUE).await?;
    if live != expected as i64 {
        return Err(format!("enqueued {expected} jobs but {live} are in the queue").into());
    }
    Ok(())
}
