//! The data `inspect` reads, placed where a real queue has it: history
//! with its dead letters oldest, and per live queue a few unique-keyed
//! jobs first, then the bulk; the oldest jobs leased (running), some of
//! those failed back to scheduled (old ids waiting for their retry), the
//! next few stalled (their lease expired), and the newest few scheduled
//! (enqueued with a delay) except in [`RETRIES_ONLY`]; and, where the
//! storage keeps samples, a day of them per live queue, as workers would
//! have recorded.

use std::time::Duration;

use queue_core::{
    Ack, Capability, Depth, DequeueRequest, Job, JobId, MAX_SAMPLES_PER_CALL, NewJob, QueueName,
    QueueSample, Retry, WorkerId,
};
use serde_json::json;

use super::super::{fill, fill_with};
use crate::BenchError;
use crate::args::InspectArgs;
use crate::target::Target;

/// The live queues, a quarter of the live jobs each.
pub(super) const QUEUES: [&str; 4] = ["inspect_a", "inspect_b", "inspect_c", "inspect_d"];

/// The live queue without delayed jobs: its scheduled jobs are retries,
/// among its oldest ids.
pub(super) const RETRIES_ONLY: &str = QUEUES[1];

/// The queue history is written through.
pub(super) const DONE: &str = "inspect_done";

/// Unique-keyed jobs at the head of each live queue.
const UNIQUE: usize = 5;

/// What was placed, for the reads to name.
pub(super) struct Placed {
    /// A running job (the oldest leased).
    pub(super) running: JobId,
    /// A unique key held by an old live job.
    pub(super) unique_key: String,
    /// An id in the middle of the live jobs: a deep page starts below it.
    pub(super) middle: JobId,
    /// A finished job.
    pub(super) finished: JobId,
}

/// Writes `args.history` finished jobs (the oldest hundredth of them dead
/// letters) and `args.live` live jobs over [`QUEUES`].
pub(super) async fn place<T: Target>(
    storage: &T,
    args: &InspectArgs,
) -> Result<Placed, BenchError> {
    let dead = args.history / 100;
    fill(storage, DONE, dead, 0, 1_000, 2).await?;
    let finished = finish(storage, true).await?;
    fill(storage, DONE, args.history - dead, 0, 1_000, 2).await?;
    let finished = finish(storage, false)
        .await?
        .or(finished)
        .ok_or("no history")?;

    let per_queue = (args.live / QUEUES.len()).max(UNIQUE);
    let leased = (per_queue / 10).clamp(1, 1_000);
    let mut running = None;
    let mut middle = None;
    for queue in QUEUES {
        let keyed = (0..UNIQUE)
            .map(|i| NewJob::new(queue, json!({ "i": i })).unique_key(format!("{queue}-{i}")))
            .collect::<Vec<_>>();
        storage.enqueue_batch(keyed).await?;
        fill(storage, queue, per_queue - UNIQUE, 0, 1_000, 2).await?;
        // The oldest leased; a tenth of them failed back to wait an hour.
        let held = claim(storage, queue, leased, Duration::from_secs(3_600)).await?;
        running = running.or_else(|| held.last().map(|job| job.id));
        for job in held.iter().step_by(10) {
            let lease = job.lease().ok_or("a claimed job without a lease")?;
            let error = json!({ "kind": "bench" });
            storage
                .nack(&lease, error, Retry::After(Duration::from_secs(3_600)))
                .await?;
        }
        // The next ones stalled: their lease ends at once.
        claim(
            storage,
            queue,
            (leased / 10).max(1),
            Duration::from_millis(1),
        )
        .await?;
        // The newest scheduled, but in [`RETRIES_ONLY`], whose only
        // scheduled jobs are the old ones waiting for their retry.
        if queue != RETRIES_ONLY {
            let delay = Some(Duration::from_secs(3_600));
            fill_with(storage, queue, (per_queue / 100).max(1), 0, delay, 1_000, 2).await?;
        }
        if middle.is_none() {
            middle = held
                .last()
                .map(|job| JobId(job.id.0 + (per_queue as i64) / 2));
        }
    }
    if storage.capabilities().supports(Capability::Samples) {
        record_a_day_of_samples(storage).await?;
    }
    Ok(Placed {
        running: running.ok_or("no running job")?,
        unique_key: format!("{}-{}", QUEUES[0], UNIQUE - 1),
        middle: middle.ok_or("no live job")?,
        finished,
    })
}

/// Claims up to `n` jobs of `queue` with `lease`.
async fn claim<T: Target>(
    storage: &T,
    queue: &str,
    n: usize,
    lease: Duration,
) -> Result<Vec<Job>, BenchError> {
    let request = DequeueRequest::new(
        vec![QueueName::new(queue)?],
        u32::try_from(n).unwrap_or(u32::MAX),
        lease,
        WorkerId::new("bench-inspect")?,
    )?;
    Ok(storage.dequeue(&request).await?)
}

/// Claims and finishes every job of [`DONE`]: dead-letters them when
/// `dead`, else acks them. Returns the last id finished.
async fn finish<T: Target>(storage: &T, dead: bool) -> Result<Option<JobId>, BenchError> {
    let mut last = None;
    loop {
        let jobs = claim(storage, DONE, 1_000, Duration::from_secs(600)).await?;
        let Some(job) = jobs.last() else {
            return Ok(last);
        };
        last = Some(job.id);
        let leases = jobs.iter().filter_map(Job::lease);
        if dead {
            for lease in leases {
                storage
                    .nack(&lease, json!({ "kind": "bench" }), Retry::Never)
                    .await?;
            }
        } else {
            let acks: Vec<Ack> = leases
                .map(|lease| Ack {
                    lease,
                    result: None,
                })
                .collect();
            storage.ack_batch(&acks).await?;
        }
    }
}

/// Records, for every live queue and each minute of the last day, the
/// start lags of 100 jobs and a depth: what a worker at every minute
/// leaves for the charts page.
async fn record_a_day_of_samples<T: Target>(storage: &T) -> Result<(), BenchError> {
    let now = queue_core::minute_of(storage.now().await?);
    let mut samples = Vec::with_capacity(QUEUES.len() * 24 * 60);
    for queue in QUEUES {
        let name = QueueName::new(queue)?;
        for ago in 0..24 * 60u64 {
            let minute = now - chrono::TimeDelta::minutes(ago as i64);
            let mut sample = QueueSample::new(name.clone(), minute);
            for k in 0..100u64 {
                sample
                    .lag
                    .record(Duration::from_micros(200 + (k * k + ago) * 37));
            }
            sample.depth = Some(Depth {
                pending: 200_000 + ago * 7,
                scheduled: 2_500,
                running: 900 + ago % 100,
            });
            samples.push(sample);
        }
    }
    for chunk in samples.chunks(MAX_SAMPLES_PER_CALL) {
        storage.record_samples(chunk).await?;
    }
    Ok(())
}
