//! `fairness`: what group keys cost and give.
//!
//! The group drain: `n` no-op jobs over `keys` groups (round-robin), drained
//! once without limits and once at a group concurrency; jobs/s of each and
//! their ratio. While the limited drain runs, every handler counts the
//! jobs of its group running at that moment (from its start to its
//! return, which comes before its ack gives the slot back): more than the
//! limit at any time fails the run.
//!
//! The tenants: a large tenant's `backlog` jobs enqueued first, then a
//! small tenant enqueuing one job every `interval_ms`, `probes` in all,
//! while the worker drains; the small tenant's start lag (from its
//! enqueue's return to its handler's start) against the same probes on an
//! empty queue, and behind the backlog with the queue's fair groups set
//! (`QueueLimits::fair_groups`) where the storage has them. Without fair
//! claiming the small tenant waits behind the whole backlog. A last run
//! gives the small tenant's jobs a higher priority on the plain queue: each
//! is the next job any claim takes, the least a probe can wait behind a
//! busy worker, whatever the claim order (the floor for the fair run).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use queue_core::{Capability, GroupKey, JobId, NewJob, QueueLimits, QueueName};
use queue_worker::{JobContext, WorkerBuilder};
use serde_json::json;

use super::drain::FILL_BATCH;
use super::{Progress, QUEUE, queue_options, time_limit, worker_options};
use crate::BenchError;
use crate::args::FairnessArgs;
use crate::report::{Report, Row};
use crate::stats::Spread;
use crate::target::{Setup, Target};

pub(crate) async fn run<T: Target>(
    args: &FairnessArgs,
    setup: &Setup,
    report: &mut Report,
) -> Result<(), BenchError> {
    let unlimited = group_drain::<T>(args, setup, None).await?;
    let limited = group_drain::<T>(args, setup, Some(args.group_concurrency)).await?;
    report.push(
        Row::new("fairness_groups")
            .param("n", args.n)
            .param("keys", args.keys)
            .param("c", args.concurrency)
            .param("group_concurrency", args.group_concurrency)
            .figure("unlimited_jobs_per_s", unlimited.jobs_per_s.round())
            .figure("limited_jobs_per_s", limited.jobs_per_s.round())
            .figure(
                "ratio",
                format!("{:.3}", limited.jobs_per_s / unlimited.jobs_per_s),
            )
            .figure("most_running_in_a_group", limited.most_running),
    );
    let plain = |backlog| tenant_lag::<T>(args, setup, backlog, Probes::Plain);
    let empty = plain(0).await?.ok_or("no lag measured")?;
    let behind = plain(args.backlog).await?.ok_or("no lag measured")?;
    let fair = tenant_lag::<T>(args, setup, args.backlog, Probes::Fair).await?;
    let first = tenant_lag::<T>(args, setup, args.backlog, Probes::First)
        .await?
        .ok_or("no lag measured")?;
    let mut row = Row::new("fairness_tenants")
        .param("backlog", args.backlog)
        .param("probes", args.probes)
        .param("interval_ms", args.interval_ms)
        .param("c", args.concurrency)
        .ms("empty_p50_ms", empty.p50)
        .ms("empty_p99_ms", empty.p99)
        .ms("behind_p50_ms", behind.p50)
        .ms("behind_p99_ms", behind.p99)
        .figure(
            "p99_ratio",
            format!("{:.1}", behind.p99 / empty.p99.max(1e-9)),
        );
    if let Some(fair) = fair {
        row = row
            .ms("fair_p50_ms", fair.p50)
            .ms("fair_p99_ms", fair.p99)
            .figure(
                "fair_p99_ratio",
                format!("{:.1}", fair.p99 / empty.p99.max(1e-9)),
            );
    }
    report.push(
        row.ms("first_p50_ms", first.p50)
            .ms("first_p99_ms", first.p99)
            .figure(
                "first_p99_ratio",
                format!("{:.1}", first.p99 / empty.p99.max(1e-9)),
            ),
    );
    Ok(())
}

/// The group of job `i` of the group drain.
fn key_of(i: usize, keys: usize) -> String {
    format!("k{}", i % keys.max(1))
}

/// Jobs of one group running at once, as the handlers see them.
#[derive(Debug, Default)]
struct Running {
    now: HashMap<GroupKey, u32>,
    most: u32,
}

impl Running {
    fn start(&mut self, group: &GroupKey) {
        let count = self.now.entry(group.clone()).or_default();
        *count += 1;
        self.most = self.most.max(*count);
    }

    fn end(&mut self, group: &GroupKey) {
        if let Some(count) = self.now.get_mut(group) {
            *count = count.saturating_sub(1);
        }
    }
}

/// What one group drain measured.
struct GroupDrain {
    jobs_per_s: f64,
    most_running: u32,
}

/// Fills a fresh queue with the group drain's jobs, gives it the group
/// concurrency `limit` (none: no limit), and drains it.
async fn group_drain<T: Target>(
    args: &FairnessArgs,
    setup: &Setup,
    limit: Option<u32>,
) -> Result<GroupDrain, BenchError> {
    let storage = T::fresh(setup).await?;
    for start in (0..args.n).step_by(FILL_BATCH) {
        let jobs = (start..(start + FILL_BATCH).min(args.n))
            .map(|i| NewJob::new(QUEUE, json!({ "i": i })).group_key(key_of(i, args.keys)))
            .collect();
        storage.enqueue_batch(jobs).await?;
    }
    if let Some(limit) = limit {
        let limits = QueueLimits {
            group_concurrency: Some(limit),
            ..QueueLimits::default()
        };
        storage
            .configure_queue(&QueueName::new(QUEUE)?, &limits)
            .await?;
    }
    let running: Arc<Mutex<Running>> = Arc::default();
    let progress = Progress::new(args.n);
    let (seen, counted) = (progress.clone(), Arc::clone(&running));
    let worker = WorkerBuilder::new(storage.clone())
        .options(worker_options(setup))
        .queue(
            QUEUE,
            queue_options(setup, args.concurrency),
            move |ctx: JobContext| {
                let group = ctx.job().group_key.clone();
                if let Some(group) = &group {
                    lock(&counted).start(group);
                }
                seen.started(ctx.job().id);
                let counted = Arc::clone(&counted);
                async move {
                    // Yield once, so that runs of one group that the claim
                    // wrongly let overlap do overlap here.
                    tokio::task::yield_now().await;
                    if let Some(group) = &group {
                        lock(&counted).end(group);
                    }
                    Ok(None)
                }
            },
        )?
        .start()?;
    let first_start = progress.all_started(time_limit(args.n, 100)).await;
    let report = worker.shutdown(Duration::from_secs(30)).await;
    let end = Instant::now();
    let first_start = first_start?;
    if report.cancelled > 0 {
        return Err(format!("{} runs were still going at shutdown", report.cancelled).into());
    }
    if progress.runs() != args.n {
        return Err(format!("{} runs for {} jobs", progress.runs(), args.n).into());
    }
    let most_running = lock(&running).most;
    if let Some(limit) = limit
        && most_running > limit
    {
        return Err(format!(
            "a group ran {most_running} jobs at once under a group concurrency of {limit}"
        )
        .into());
    }
    Ok(GroupDrain {
        jobs_per_s: args.n as f64 / end.duration_since(first_start).as_secs_f64(),
        most_running,
    })
}

fn lock(running: &Mutex<Running>) -> std::sync::MutexGuard<'_, Running> {
    running.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How the small tenant's jobs meet the backlog.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Probes {
    /// On the plain queue, at the backlog's priority.
    Plain,
    /// On a queue with fair groups.
    Fair,
    /// On the plain queue, one priority level above the backlog.
    First,
}

/// The small tenant's start lag (from its enqueue's return to its
/// handler's start), behind `backlog` jobs of the large tenant enqueued
/// first, as `probes` says (`None` for [`Probes::Fair`] when the storage
/// has no fair groups).
async fn tenant_lag<T: Target>(
    args: &FairnessArgs,
    setup: &Setup,
    backlog: usize,
    probes: Probes,
) -> Result<Option<Spread>, BenchError> {
    let storage = T::fresh(setup).await?;
    let fair = probes == Probes::Fair;
    if fair && !storage.capabilities().supports(Capability::FairGroups) {
        return Ok(None);
    }
    if fair {
        let limits = QueueLimits {
            fair_groups: true,
            ..QueueLimits::default()
        };
        storage
            .configure_queue(&QueueName::new(QUEUE)?, &limits)
            .await?;
    }
    for start in (0..backlog).step_by(FILL_BATCH) {
        let jobs = (start..(start + FILL_BATCH).min(backlog))
            .map(|i| NewJob::new(QUEUE, json!({ "i": i })).group_key("large"))
            .collect();
        storage.enqueue_batch(jobs).await?;
    }
    let small = GroupKey::new("small")?;
    let starts: Arc<Mutex<HashMap<JobId, Instant>>> = Arc::default();
    let progress = Progress::new(args.probes);
    let (record, seen) = (Arc::clone(&starts), progress.clone());
    let worker = WorkerBuilder::new(storage.clone())
        .options(worker_options(setup))
        .queue(
            QUEUE,
            queue_options(setup, args.concurrency),
            move |ctx: JobContext| {
                if ctx.job().group_key.as_ref() == Some(&small) {
                    let now = Instant::now();
                    (record.lock().unwrap_or_else(PoisonError::into_inner))
                        .entry(ctx.job().id)
                        .or_insert(now);
                    seen.started(ctx.job().id);
                }
                async { Ok(None) }
            },
        )?
        .start()?;
    // The worker is busy with the backlog (or idle) before the first probe.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut sent: HashMap<JobId, Instant> = HashMap::with_capacity(args.probes);
    let mut ticks = tokio::time::interval(Duration::from_millis(args.interval_ms.max(1)));
    for i in 0..args.probes {
        ticks.tick().await;
        let mut job = NewJob::new(QUEUE, json!({ "probe": i })).group_key("small");
        if probes == Probes::First {
            job = job.priority(1);
        }
        let outcome = storage.enqueue(job).await?;
        sent.insert(outcome.id, Instant::now());
    }
    let waited = progress
        .all_started(time_limit(backlog + args.probes, 100))
        .await;
    worker.shutdown(Duration::from_secs(30)).await;
    waited?;
    let starts = starts.lock().unwrap_or_else(PoisonError::into_inner);
    let lags: Vec<Duration> = sent
        .iter()
        .filter_map(|(id, at)| {
            starts
                .get(id)
                .map(|start| start.saturating_duration_since(*at))
        })
        .collect();
    Spread::of(&lags)
        .map(Some)
        .ok_or_else(|| "no probe started".into())
}
