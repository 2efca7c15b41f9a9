//! `inspect`: what operators wait for at size. With `--live` jobs waiting
//! (spread over four queues: pending, scheduled and running ones) and
//! `--history` jobs finished in the last hour, the time of `stats`, the
//! dashboard overview's reads (`stats`, `now`, `throughput` over 24 h),
//! one page of `list_jobs` with and without a state filter, and
//! `throughput` over one hour. The tables are settled first
//! ([`Target::settle`]: `VACUUM ANALYZE` on PostgreSQL, as autovacuum
//! would), so the reads are timed as a running server serves them.

use std::future::Future;
use std::time::{Duration, Instant};

use queue_core::{Ack, DequeueRequest, JobFilter, JobState, QueueName, WorkerId};

use super::fill;
use crate::BenchError;
use crate::args::InspectArgs;
use crate::report::{Report, Row};
use crate::stats::Spread;
use crate::target::{Setup, Target};

const QUEUES: [&str; 4] = ["inspect_a", "inspect_b", "inspect_c", "inspect_d"];

pub(crate) async fn run<T: Target>(
    args: &InspectArgs,
    setup: &Setup,
    report: &mut Report,
) -> Result<(), BenchError> {
    let storage = T::fresh(setup).await?;
    let filled = Instant::now();
    // History first: jobs enqueued, claimed and acked in batches.
    fill(&storage, "inspect_done", args.history, 0, 1_000, 2).await?;
    let request = DequeueRequest::new(
        vec![QueueName::new("inspect_done")?],
        1_000,
        Duration::from_secs(600),
        WorkerId::new("bench-inspect")?,
    )?;
    loop {
        let jobs = storage.dequeue(&request).await?;
        if jobs.is_empty() {
            break;
        }
        let acks: Vec<Ack> = jobs
            .iter()
            .filter_map(|job| job.lease())
            .map(|lease| Ack {
                lease,
                result: None,
            })
            .collect();
        storage.ack_batch(&acks).await?;
    }
    // Then the live jobs, a quarter per queue; a tenth of each claimed.
    for queue in QUEUES {
        fill(&storage, queue, args.live / QUEUES.len(), 0, 1_000, 2).await?;
        let claim = DequeueRequest::new(
            vec![QueueName::new(queue)?],
            u32::try_from((args.live / QUEUES.len() / 10).clamp(1, 1_000)).unwrap_or(1_000),
            Duration::from_secs(3_600),
            WorkerId::new("bench-inspect")?,
        )?;
        storage.dequeue(&claim).await?;
    }
    let fill_s = filled.elapsed().as_secs_f64();
    // As autovacuum would have by the time an operator looks.
    storage.settle().await?;

    let n = args.rounds.max(1);
    let state_filter = JobFilter {
        queue: Some(QueueName::new(QUEUES[0])?),
        state: Some(JobState::Running),
        limit: 50,
        ..JobFilter::default()
    };
    let first_page = JobFilter {
        limit: 50,
        ..JobFilter::default()
    };
    let reads: [(&str, Spread); 5] = [
        ("stats", timed(n, || storage.stats()).await?),
        (
            "overview",
            timed(n, || async {
                storage.stats().await?;
                storage.now().await?;
                storage.throughput(Duration::from_secs(24 * 3600)).await
            })
            .await?,
        ),
        (
            "list_jobs(50)",
            timed(n, || storage.list_jobs(&first_page)).await?,
        ),
        (
            "list_jobs(queue,running,50)",
            timed(n, || storage.list_jobs(&state_filter)).await?,
        ),
        (
            "throughput(1h)",
            timed(n, || storage.throughput(Duration::from_secs(3600))).await?,
        ),
    ];
    for (read, spread) in reads {
        report.push(
            Row::new("inspect")
                .param("read", read)
                .param("live", args.live)
                .param("history", args.history)
                .figure("n", n)
                .ms("p50_ms", spread.p50)
                .ms("p99_ms", spread.p99)
                .ms("max_ms", spread.max)
                .figure("fill_s", format!("{fill_s:.1}")),
        );
    }
    Ok(())
}

/// `n` calls of `read`, one at a time.
async fn timed<T, F, Fut>(n: usize, mut read: F) -> Result<Spread, BenchError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = queue_core::Result<T>>,
{
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        read().await?;
        samples.push(started.elapsed());
    }
    Ok(Spread::of(&samples).ok_or("no sample")?)
}
