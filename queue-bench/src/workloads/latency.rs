//! `latency`: an idle worker; a producer of its own enqueues one job every
//! few milliseconds; the time from the enqueue's commit (its call
//! returning) to the handler's start.
//!
//! The producer enqueues through the storage, not through the worker, so
//! the worker learns of the job the way a worker in another process would:
//! by the backend's notification (PostgreSQL) or by polling (MySQL, or
//! `--no-notify`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use queue_core::{JobId, NewJob};
use queue_worker::{JobContext, WorkerBuilder};
use serde_json::json;

use super::{Progress, QUEUE, queue_options, time_limit, worker_options};
use crate::BenchError;
use crate::args::LatencyArgs;
use crate::report::{Report, Row};
use crate::stats::Spread;
use crate::target::{Setup, Target};

pub(crate) async fn run<T: Target>(
    args: &LatencyArgs,
    setup: &Setup,
    report: &mut Report,
) -> Result<(), BenchError> {
    let storage = T::fresh(setup).await?;
    let starts: Arc<Mutex<HashMap<JobId, Instant>>> = Arc::default();
    let progress = Progress::new(args.count);
    let (record, seen) = (Arc::clone(&starts), progress.clone());
    let worker = WorkerBuilder::new(storage.clone())
        .options(worker_options(setup))
        .queue(QUEUE, queue_options(setup, 16), move |ctx: JobContext| {
            let now = Instant::now();
            record
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(ctx.job().id)
                .or_insert(now);
            seen.started(ctx.job().id);
            async { Ok(None) }
        })?
        .start()?;
    // Let the worker settle into idleness first.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let mut commits = HashMap::with_capacity(args.count);
    let mut ticks = tokio::time::interval(Duration::from_millis(args.interval_ms.max(1)));
    for i in 0..args.count {
        ticks.tick().await;
        let outcome = storage
            .enqueue(NewJob::new(QUEUE, json!({ "i": i })))
            .await?;
        commits.insert(outcome.id, Instant::now());
    }
    let waited = progress.all_started(time_limit(args.count, 100)).await;
    worker.shutdown(Duration::from_secs(10)).await;
    waited?;

    let starts = starts.lock().unwrap_or_else(PoisonError::into_inner);
    let samples: Vec<Duration> = commits
        .iter()
        .filter_map(|(id, commit)| Some(starts.get(id)?.saturating_duration_since(*commit)))
        .collect();
    let spread = Spread::of(&samples).ok_or("no latency sample")?;
    report.push(
        Row::new("latency")
            .param("count", args.count)
            .param("interval_ms", args.interval_ms)
            .param("wake", if T::notifies(setup) { "notify" } else { "poll" })
            .ms("p50_ms", spread.p50)
            .ms("p99_ms", spread.p99)
            .ms("max_ms", spread.max),
    );
    Ok(())
}
