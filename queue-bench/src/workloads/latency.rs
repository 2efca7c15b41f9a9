//! `latency`: an idle worker; a producer of its own enqueues one job every
//! few milliseconds; the time to the handler's start from the enqueue
//! call's start (what an application sees: the enqueue's own round trips
//! included) and from its return (the commit's acknowledgement), and the
//! enqueue call's own duration.
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

    // Per job: when its enqueue call started and when it returned.
    let mut calls: HashMap<JobId, (Instant, Instant)> = HashMap::with_capacity(args.count);
    let mut ticks = tokio::time::interval(Duration::from_millis(args.interval_ms.max(1)));
    for i in 0..args.count {
        ticks.tick().await;
        let job = NewJob::new(QUEUE, json!({ "i": i }));
        let called = Instant::now();
        let outcome = storage.enqueue(job).await?;
        calls.insert(outcome.id, (called, Instant::now()));
    }
    let waited = progress.all_started(time_limit(args.count, 100)).await;
    worker.shutdown(Duration::from_secs(10)).await;
    waited?;

    let starts = starts.lock().unwrap_or_else(PoisonError::into_inner);
    let (mut from_call, mut from_return) = (Vec::new(), Vec::new());
    let enqueues: Vec<Duration> = calls
        .values()
        .map(|(called, returned)| *returned - *called)
        .collect();
    for (id, (called, returned)) in &calls {
        if let Some(start) = starts.get(id) {
            from_call.push(start.saturating_duration_since(*called));
            from_return.push(start.saturating_duration_since(*returned));
        }
    }
    let call = Spread::of(&from_call).ok_or("no latency sample")?;
    let ret = Spread::of(&from_return).ok_or("no latency sample")?;
    let enqueue = Spread::of(&enqueues).ok_or("no latency sample")?;
    report.push(
        Row::new("latency")
            .param("count", args.count)
            .param("interval_ms", args.interval_ms)
            .param("wake", if T::notifies(setup) { "notify" } else { "poll" })
            .ms("call_p50_ms", call.p50)
            .ms("call_p99_ms", call.p99)
            .ms("call_max_ms", call.max)
            .ms("return_p50_ms", ret.p50)
            .ms("return_p99_ms", ret.p99)
            .ms("return_max_ms", ret.max)
            .ms("enqueue_p50_ms", enqueue.p50)
            .ms("enqueue_p99_ms", enqueue.p99),
    );
    Ok(())
}
