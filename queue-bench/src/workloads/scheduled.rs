//! `scheduled`: jobs due at spread times on an idle worker; each handler
//! start minus its job's due time (`available_at`, on the database's clock).
//!
//! Start times are read on this machine's wall clock and moved onto the
//! database's by the offset measured at the start (half a round trip of
//! uncertainty; zero in effect when the server runs on this machine).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use queue_core::{JobId, NewJob};
use queue_worker::{JobContext, WorkerBuilder};
use serde_json::json;

use super::{Progress, QUEUE, queue_options, worker_options};
use crate::BenchError;
use crate::args::ScheduledArgs;
use crate::report::{Report, Row};
use crate::stats::Spread;
use crate::target::{Setup, Target};

/// Each job's start and due time, on the database's clock.
type Starts = HashMap<JobId, (DateTime<Utc>, DateTime<Utc>)>;

/// The first job is due this long after the batch is enqueued.
const LEAD: Duration = Duration::from_secs(1);

pub(crate) async fn run<T: Target>(
    args: &ScheduledArgs,
    setup: &Setup,
    report: &mut Report,
) -> Result<(), BenchError> {
    let storage = T::fresh(setup).await?;
    wait_an_hour(&storage, args.waiting).await?;
    let offset = clock_offset(&storage).await?;
    let starts: Arc<Mutex<Starts>> = Arc::default();
    let progress = Progress::new(args.count);
    let (record, seen) = (Arc::clone(&starts), progress.clone());
    let worker = WorkerBuilder::new(storage.clone())
        .options(worker_options(setup))
        .queue(QUEUE, queue_options(setup, 16), move |ctx: JobContext| {
            let now = Utc::now() + offset;
            record
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(ctx.job().id)
                .or_insert((now, ctx.job().available_at));
            seen.started(ctx.job().id);
            async { Ok(None) }
        })?
        .start()?;

    let step = Duration::from_millis(args.spread_ms)
        / u32::try_from(args.count.max(1)).unwrap_or(u32::MAX);
    let jobs = (0..args.count)
        .map(|i| {
            let delay = LEAD + step * u32::try_from(i).unwrap_or(u32::MAX);
            NewJob::new(QUEUE, json!({ "i": i })).delay(delay)
        })
        .collect();
    storage.enqueue_batch(jobs).await?;
    let limit = LEAD + Duration::from_millis(args.spread_ms) + Duration::from_secs(30);
    let waited = progress.all_started(limit).await;
    worker.shutdown(Duration::from_secs(10)).await;
    waited?;

    let starts = starts.lock().unwrap_or_else(PoisonError::into_inner);
    let mut early = 0;
    let samples: Vec<Duration> = starts
        .values()
        .map(|(start, due)| {
            let lag = *start - *due;
            if lag < TimeDelta::zero() {
                early += 1;
            }
            lag.to_std().unwrap_or(Duration::ZERO)
        })
        .collect();
    let spread = Spread::of(&samples).ok_or("no start-lag sample")?;
    report.push(
        Row::new("scheduled")
            .param("count", args.count)
            .param("spread_ms", args.spread_ms)
            .param("waiting", args.waiting)
            .param("wake", if T::notifies(setup) { "notify" } else { "poll" })
            .ms("p50_ms", spread.p50)
            .ms("p99_ms", spread.p99)
            .ms("max_ms", spread.max)
            .figure("early", early)
            .ms("clock_offset_ms", offset.as_seconds_f64() * 1e3),
    );
    Ok(())
}

/// Schedules `n` filler jobs (priority -1) an hour ahead in the measured
/// queue, in batches of 1,000.
async fn wait_an_hour<T: Target>(storage: &T, n: usize) -> Result<(), BenchError> {
    for start in (0..n).step_by(1_000) {
        let jobs = (start..(start + 1_000).min(n))
            .map(|i| {
                NewJob::new(QUEUE, json!({ "filler": i }))
                    .priority(-1)
                    .delay(Duration::from_secs(3_600))
            })
            .collect();
        storage.enqueue_batch(jobs).await?;
    }
    Ok(())
}

/// The database's clock minus this machine's: the median of a few reads,
/// each taken at the middle of its round trip.
async fn clock_offset<T: Target>(storage: &T) -> Result<TimeDelta, BenchError> {
    let mut offsets = Vec::new();
    for _ in 0..7 {
        let before = Utc::now();
        let sent = Instant::now();
        let database = storage.now().await?;
        let half = TimeDelta::from_std(sent.elapsed() / 2).unwrap_or_default();
        offsets.push(database - (before + half));
    }
    offsets.sort();
    Ok(offsets[offsets.len() / 2])
}
