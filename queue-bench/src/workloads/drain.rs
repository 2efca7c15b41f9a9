//! `drain`: N no-op jobs waiting, then a worker at concurrency C completes
//! them; jobs/s from the first handler start to the last ack committed.

use std::time::{Duration, Instant};

use queue_core::{QueueLimits, QueueName};
use queue_worker::{JobContext, WorkerBuilder};

use super::{Progress, QUEUE, fill, queue_options, time_limit, worker_options};
use crate::BenchError;
use crate::args::DrainArgs;
use crate::report::{Report, Row};
use crate::stats::resident_mib;
use crate::target::{Setup, Target};

/// Jobs per enqueue batch when filling.
pub(crate) const FILL_BATCH: usize = 1_000;

/// The queue of the `--history` rows.
const HISTORY_QUEUE: &str = "history_filler";

pub(crate) async fn run<T: Target>(
    args: &DrainArgs,
    setup: &Setup,
    report: &mut Report,
) -> Result<(), BenchError> {
    for &concurrency in &args.concurrency {
        let storage = T::fresh(setup).await?;
        if args.history > 0 {
            let age = Duration::from_secs(args.history_age_days * 24 * 3600);
            storage
                .fill_history(HISTORY_QUEUE, args.history, age)
                .await?;
            storage.settle().await?;
        }
        fill(&storage, QUEUE, args.n, 0, FILL_BATCH, 2).await?;
        if let Some(limit) = args.queue_limit {
            let limits = QueueLimits {
                concurrency: Some(limit),
                ..QueueLimits::default()
            };
            storage
                .configure_queue(&QueueName::new(QUEUE)?, &limits)
                .await?;
        }
        let drained = drain_once(&storage, setup, args.n, concurrency).await?;
        let mut row = drained.row("drain", args.n, concurrency);
        if let Some(limit) = args.queue_limit {
            row = row.param("queue_limit", limit);
        }
        if args.history > 0 {
            row = row
                .param("history", args.history)
                .param("history_age_days", args.history_age_days);
        }
        report.push(row);
    }
    Ok(())
}

/// What one drain measured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Drained {
    pub(crate) jobs_per_s: f64,
    pub(crate) seconds: f64,
    /// From the last job's start to the last ack committed: how far the
    /// acks trailed the runs.
    pub(crate) ack_tail_seconds: f64,
    pub(crate) rss_mib: f64,
    pub(crate) peak_rss_mib: f64,
}

impl Drained {
    pub(crate) fn row(&self, workload: &str, n: usize, concurrency: usize) -> Row {
        Row::new(workload)
            .param("c", concurrency)
            .param("n", n)
            .figure("jobs_per_s", self.jobs_per_s.round())
            .figure("seconds", format!("{:.3}", self.seconds))
            .figure("ack_tail_s", format!("{:.3}", self.ack_tail_seconds))
            .figure("rss_mib", format!("{:.1}", self.rss_mib))
            .figure("peak_rss_mib", format!("{:.1}", self.peak_rss_mib))
    }
}

/// Runs a worker over `QUEUE` until its `n` jobs of priority >= 0 (already
/// enqueued) have all run and been acked, then checks that history holds
/// exactly `n` completions of them and the queue none.
pub(crate) async fn drain_once<T: Target>(
    storage: &T,
    setup: &Setup,
    n: usize,
    concurrency: usize,
) -> Result<Drained, BenchError> {
    let progress = Progress::new(n);
    let seen = progress.clone();
    let worker = WorkerBuilder::new(storage.clone())
        .options(worker_options(setup))
        .queue(
            QUEUE,
            queue_options(setup, concurrency),
            move |ctx: JobContext| {
                if ctx.job().priority >= 0 {
                    seen.started(ctx.job().id);
                }
                async { Ok(None) }
            },
        )?
        .start()?;
    let first_start = progress.all_started(time_limit(n, 200)).await;
    let all_started = Instant::now();
    let memory = resident_mib().unwrap_or_default();
    // Shutdown flushes the last acks: its return is the last completion.
    let report = worker.shutdown(Duration::from_secs(30)).await;
    let end = Instant::now();
    let first_start = first_start?;
    if report.cancelled > 0 {
        return Err(format!("{} runs were still going at shutdown", report.cancelled).into());
    }
    let seconds = end.duration_since(first_start).as_secs_f64();

    let completed = storage.count_completed(QUEUE).await?;
    let live = storage.count_live(QUEUE).await?;
    if completed != n as i64 || live != 0 || progress.distinct() != n {
        return Err(format!(
            "drain of {n} jobs did not verify: {completed} completed in history, \
             {live} left in the queue, {} distinct jobs started",
            progress.distinct()
        )
        .into());
    }
    if progress.runs() != n {
        return Err(format!("{} runs for {n} jobs: some job ran twice", progress.runs()).into());
    }
    Ok(Drained {
        jobs_per_s: n as f64 / seconds,
        seconds,
        ack_tail_seconds: end.duration_since(all_started).as_secs_f64(),
        rss_mib: memory.0,
        peak_rss_mib: memory.1,
    })
}
