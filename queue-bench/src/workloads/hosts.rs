//! `hosts`: many worker processes against one server.
//!
//! For each `--procs` count P: `--n` no-op jobs waiting, then P processes
//! of this binary (the same command line, [`HOST_VAR`] set), each opening
//! its own storage and pool ([`Target::open`]) and running a worker at
//! `--concurrency`. Each says it is ready; the parent releases them all at
//! once and times until the storage's stats show no live job of the queue
//! (read every few milliseconds), then checks that history holds N
//! completions, none is left live, and the processes ran N jobs between
//! them (a job run twice, by two processes, fails the run). Beside the
//! rate: how busy the machine's CPUs were, and the share the worker
//! processes used (the rest is the server's, the parent's and anything
//! else on the machine).
//!
//! The limit check, at the largest count: two drains of `--limit-n` jobs
//! while the parent reads the storage's stats every `--sample-ms` and
//! keeps the most jobs of the queue holding a lease at once; the first
//! without a limit (showing the check sees overlap), the second with
//! `configure_queue` concurrency `--limit`, set before the processes
//! start. More leases at once than the limit fails the run.

mod host;

use std::time::{Duration, Instant};

use queue_core::{QueueLimits, QueueName, QueueStats};

use self::host::Host;
pub(crate) use self::host::{HOST_VAR, serve};
use super::drain::FILL_BATCH;
use super::{QUEUE, fill, time_limit};
use crate::BenchError;
use crate::args::HostsArgs;
use crate::report::{Report, Row};
use crate::stats::{MachineTicks, machine_ticks};
use crate::target::{Setup, Target};

/// How long a process may take to open its storage and say `ready`.
const READY_LIMIT: Duration = Duration::from_secs(60);

/// How often the timed drains read the stats for the end.
const FINISH_POLL: Duration = Duration::from_millis(10);

pub(crate) async fn run<T: Target>(
    args: &HostsArgs,
    setup: &Setup,
    report: &mut Report,
) -> Result<(), BenchError> {
    for &procs in &args.procs {
        let across = drain_across::<T>(args, setup, args.n, procs, Watch::Finish).await?;
        let per_process = across.jobs_per_s / f64::from(procs);
        report.push(
            Row::new("hosts")
                .param("procs", procs)
                .param("c", args.concurrency)
                .param("n", args.n)
                .figure("jobs_per_s", across.jobs_per_s.round())
                .figure("per_process_jobs_per_s", per_process.round())
                .figure("seconds", format!("{:.3}", across.seconds))
                .figure("cpu_busy", share(across.cpu_busy))
                .figure("cpu_workers", share(across.cpu_workers))
                .figure(
                    "cpu_rest",
                    share(across.cpu_busy.zip(across.cpu_workers).map(|(b, w)| b - w)),
                ),
        );
    }
    let Some(&procs) = args.procs.iter().max() else {
        return Ok(());
    };
    let n = args.limit_n;
    let unlimited = drain_across::<T>(args, setup, n, procs, Watch::Leases(None)).await?;
    let limit = args.limit;
    let limited = drain_across::<T>(args, setup, n, procs, Watch::Leases(Some(limit))).await?;
    let held = limited.most_leased <= u64::from(limit);
    report.push(
        Row::new("hosts_limit")
            .param("procs", procs)
            .param("c", args.concurrency)
            .param("n", n)
            .param("limit", limit)
            .param("sample_ms", args.sample_ms)
            .figure("unlimited_max_leased", unlimited.most_leased)
            .figure("limited_max_leased", limited.most_leased)
            .figure("limited_samples", limited.samples)
            .figure("unlimited_jobs_per_s", unlimited.jobs_per_s.round())
            .figure("limited_jobs_per_s", limited.jobs_per_s.round())
            .figure("held", held),
    );
    if !held {
        return Err(format!(
            "the queue's concurrency limit of {limit} did not hold across {procs} processes: \
             the stats showed {} of its jobs leased at once",
            limited.most_leased
        )
        .into());
    }
    Ok(())
}

/// A fraction with two decimals, `-` when unknown.
fn share(fraction: Option<f64>) -> String {
    fraction.map_or_else(|| "-".to_owned(), |f| format!("{f:.2}"))
}

/// What the parent reads while the processes drain.
#[derive(Debug, Clone, Copy)]
enum Watch {
    /// Only for the end.
    Finish,
    /// The jobs leased at once, every `--sample-ms`, with the queue's
    /// concurrency limit set to this first when given.
    Leases(Option<u32>),
}

/// What one drain across processes measured.
#[derive(Debug, Clone, Copy)]
struct Across {
    jobs_per_s: f64,
    seconds: f64,
    /// The machine's CPUs' busy share during the drain.
    cpu_busy: Option<f64>,
    /// The worker processes' share of the machine's CPU time.
    cpu_workers: Option<f64>,
    /// The most jobs of the queue the stats showed leased at once.
    most_leased: u64,
    /// Stats read during the drain.
    samples: usize,
}

/// `n` jobs waiting, then `procs` worker processes until the storage has
/// none of them live; verified against history and the processes' counts.
async fn drain_across<T: Target>(
    args: &HostsArgs,
    setup: &Setup,
    n: usize,
    procs: u32,
    watch: Watch,
) -> Result<Across, BenchError> {
    let storage = T::fresh(setup).await?;
    fill(&storage, QUEUE, n, 0, FILL_BATCH, 2).await?;
    if let Watch::Leases(Some(limit)) = watch {
        let limits = QueueLimits {
            concurrency: Some(limit),
            ..QueueLimits::default()
        };
        storage
            .configure_queue(&QueueName::new(QUEUE)?, &limits)
            .await?;
    }
    let mut hosts = (0..procs).map(Host::spawn).collect::<Result<Vec<_>, _>>()?;
    for host in &mut hosts {
        host.expect("ready", READY_LIMIT).await?;
    }
    let (interval, cap) = match watch {
        Watch::Finish => (FINISH_POLL, 1),
        // Above the jobs there are, so that the running count is exact:
        // leases are not bounded by the processes' slots, since a slot is
        // free again when its handler returns, before its batched ack.
        Watch::Leases(_) => (Duration::from_millis(args.sample_ms), n as u64 + 1),
    };
    let before = Ticks::read(&hosts);
    let start = Instant::now();
    for host in &mut hosts {
        host.tell("go")?;
    }
    let limit = time_limit(n, 100);
    let (mut most_leased, mut samples) = (0, 0);
    loop {
        let stats = storage.stats_capped(cap).await?;
        let queue = stats.iter().find(|s| s.queue.as_str() == QUEUE);
        most_leased = most_leased.max(queue.map_or(0, leased));
        samples += 1;
        // Stats may miss a job: MySQL's reads its states in several
        // statements, and a job claimed between the one counting leases
        // and the one counting unleased jobs is in neither. The exact
        // count confirms the end (a CI run ended a MariaDB drain with two
        // jobs running on a zero from stats alone).
        if queue.map_or(0, live) == 0 && storage.count_live(QUEUE).await? == 0 {
            break;
        }
        for host in &mut hosts {
            host.check_running()?;
        }
        if start.elapsed() > limit {
            return Err(format!(
                "{procs} worker processes did not drain {n} jobs within {limit:?}"
            )
            .into());
        }
        tokio::time::sleep(interval).await;
    }
    let seconds = start.elapsed().as_secs_f64();
    let after = Ticks::read(&hosts);

    let completed = storage.count_completed(QUEUE).await?;
    let left = storage.count_live(QUEUE).await?;
    if completed != n as i64 || left != 0 {
        return Err(format!(
            "drain of {n} jobs by {procs} processes did not verify: {completed} completed in \
             history, {left} left in the queue"
        )
        .into());
    }
    for host in &mut hosts {
        host.tell("stop")?;
    }
    let mut runs = 0;
    for host in hosts {
        runs += host.finish().await?;
    }
    if runs != n {
        return Err(format!(
            "{procs} worker processes ran {runs} jobs for {n}: some job ran twice"
        )
        .into());
    }
    let (cpu_busy, cpu_workers) = before.shares(&after);
    Ok(Across {
        jobs_per_s: n as f64 / seconds,
        seconds,
        cpu_busy,
        cpu_workers,
        most_leased,
        samples,
    })
}

/// The queue's jobs holding a lease (running, or stalled until reclaimed).
fn leased(stats: &QueueStats) -> u64 {
    stats.running + stats.stalled
}

/// The queue's live jobs, in any state.
fn live(stats: &QueueStats) -> u64 {
    stats.pending + stats.scheduled + stats.running + stats.stalled + stats.exhausted
}

/// CPU time at one moment: the machine's and the worker processes'.
#[derive(Debug, Clone, Copy)]
struct Ticks {
    machine: Option<MachineTicks>,
    workers: Option<u64>,
}

impl Ticks {
    fn read(hosts: &[Host]) -> Self {
        Self {
            machine: machine_ticks(),
            workers: hosts.iter().map(Host::cpu_ticks).sum(),
        }
    }

    /// From `self` to `later`: the machine's busy share, and the workers'
    /// share of the machine's time.
    fn shares(&self, later: &Self) -> (Option<f64>, Option<f64>) {
        let Some((before, after)) = self.machine.zip(later.machine) else {
            return (None, None);
        };
        let total = after.total.saturating_sub(before.total);
        if total == 0 {
            return (None, None);
        }
        let busy = after.busy.saturating_sub(before.busy) as f64 / total as f64;
        let workers = self
            .workers
            .zip(later.workers)
            .map(|(b, a)| a.saturating_sub(b) as f64 / total as f64);
        (Some(busy), workers)
    }
}
