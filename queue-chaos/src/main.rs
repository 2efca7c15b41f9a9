//! `queue-chaos`: worker processes of the project run a steady stream of
//! jobs while they are SIGKILLed, frozen past their lease, cut off from the
//! database by a proxy, and the database server is restarted; then the
//! recorded history is checked: every acknowledged enqueue completed
//! exactly once, nothing left live, one effect per job where the effect
//! commits with the ack, no ack from a stale lease.
//!
//! ```sh
//! cargo run --release -p queue-chaos -- run --backend postgres --duration 60s
//! cargo run --release -p queue-chaos -- run --backend mysql --mode plain \
//!     --stop 'mariadb-admin -uroot shutdown' --start '...'
//! ```
//!
//! Prints one `chaos ...` line of figures; exits 1 on any violation.

mod args;
mod check;
mod faults;
mod producer;
mod proxy;
mod target;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use clap::Parser;
use queue::{JobContext, QueueName, QueueOptions, Storage, WorkerBuilder, WorkerOptions};

use crate::args::{Args, Backend, Command, Mode, RunArgs, WorkerArgs};
use crate::faults::Workers;
use crate::proxy::Proxy;
use crate::target::QUEUE;

/// Why a run stopped.
#[derive(Debug)]
pub(crate) struct Failure(pub(crate) String);

macro_rules! failure_from {
    ($($source:ty),*) => {$(
        impl From<$source> for Failure {
            fn from(error: $source) -> Self {
                Self(error.to_string())
            }
        }
    )*};
}

failure_from!(
    queue::QueueError,
    sqlx::Error,
    mysql_async::Error,
    std::io::Error
);

#[tokio::main]
async fn main() -> ExitCode {
    let outcome = match Args::parse().command {
        Command::Run(args) => run(args).await,
        Command::Worker(args) => worker(args).await,
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(message)) => {
            eprintln!("queue-chaos: {message}");
            ExitCode::FAILURE
        }
    }
}

/// A worker process: serves the run's queue until it is killed.
async fn worker(args: WorkerArgs) -> Result<(), Failure> {
    let storage = loop {
        // The proxy may be cutting connections right now.
        match target::open(args.backend, &args.url).await {
            Ok(storage) => break storage,
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    let mode = args.mode;
    let in_handler = storage.clone();
    let _worker = WorkerBuilder::new(storage)
        .options(WorkerOptions {
            poll_interval: Duration::from_millis(200),
            reclaim_interval: Duration::from_millis(500),
            ..WorkerOptions::default()
        })
        .queue(
            QUEUE,
            QueueOptions {
                lease: args.lease,
                ..QueueOptions::with_concurrency(8)
            },
            move |ctx: JobContext| target::handle(in_handler.clone(), mode, ctx),
        )?
        .start()?;
    std::future::pending::<()>().await;
    Ok(())
}

/// What the faults did.
#[derive(Debug, Default)]
struct Faults {
    kills: u32,
    stops: u32,
    restarts: u32,
    cuts: u32,
    /// When the restart's stop command and its start command returned (the
    /// server down, then up or promoted), on the clock the history's
    /// timestamps use (one machine).
    restart: Option<(DateTime<Utc>, DateTime<Utc>)>,
}

/// A whole run.
async fn run(args: RunArgs) -> Result<(), Failure> {
    let url = args.url.clone().unwrap_or_else(|| {
        match args.backend {
            Backend::Postgres => "postgres://postgres@127.0.0.1:5432/queue_test",
            Backend::Mysql => "mysql://root@127.0.0.1:3306/queue_chaos",
            Backend::Sqlite => "sqlite://queue-chaos.db?mode=rwc",
        }
        .to_owned()
    });
    let several = target::several_hosts(&url) || !args.worker_urls.is_empty();
    if several && args.cuts > 0 {
        return Err(Failure(
            "--cuts needs one server: the proxy that cuts stands in front of one \
             (a URL of several hosts or --worker-urls spread the run over several; pass --cuts 0)"
                .to_owned(),
        ));
    }
    let storage = target::prepare(args.backend, &url).await?;
    // A file has no connection to cut: SQLite's workers open it directly;
    // nor has a URL of several hosts (the failover run).
    let proxy = match args.backend {
        Backend::Sqlite => None,
        _ if several => None,
        _ => Some(Proxy::start(target::server_address(&url)).await?),
    };
    let worker_urls = match &proxy {
        Some(proxy) => vec![target::via_proxy(&url, proxy.port())],
        None if !args.worker_urls.is_empty() => args.worker_urls.clone(),
        None => vec![url.clone()],
    };
    let mut workers = Workers::start(&args, worker_urls)?;
    let producer = tokio::spawn(producer::produce(storage.clone(), args.rate, args.duration));

    let faults = inject(&args, &mut workers, proxy.as_deref()).await?;
    let produced = producer
        .await
        .map_err(|e| Failure(format!("the producer panicked: {e}")))??;

    let faults_stopped = Instant::now();
    let queue = QueueName::new(QUEUE)?;
    let expected = produced.ids.len();
    loop {
        let live = live_jobs(&storage, &queue).await?;
        let archived = check::history(&storage).await?.len();
        if live == 0 && archived >= expected {
            break;
        }
        if faults_stopped.elapsed() > args.drain_limit {
            eprintln!(
                "queue-chaos: not drained after {:?}: {live} live, {archived} of {expected} archived",
                args.drain_limit
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let drain = faults_stopped.elapsed();
    workers.stop_all();

    let records = check::history(&storage).await?;
    let live = live_jobs(&storage, &queue).await?;
    let effects = target::effects(&storage, &url).await?;
    let verdict = check::check(args.mode, &produced, &records, live, &effects);
    let outage = faults
        .restart
        .map(|(stopped, started)| check::outage(&records, stopped, started));
    println!(
        "chaos backend={} mode={} workers={} seconds={} jobs={} kills={} stops={} restarts={} cuts={} \
         enqueue_errors={} lost={} double_effects={} stale_acks={} unfinished={} duplicate_jobs={} \
         producer_duplicates={} retries={} max_attempts={} drain_s={:.1}{}",
        format!("{:?}", args.backend).to_lowercase(),
        if args.mode == Mode::Transactional {
            "transactional"
        } else {
            "plain"
        },
        args.workers,
        args.duration.as_secs(),
        expected,
        faults.kills,
        faults.stops,
        faults.restarts,
        faults.cuts,
        produced.errors,
        verdict.lost,
        verdict.double_effects,
        verdict.stale_acks,
        verdict.unfinished,
        verdict.duplicate_jobs,
        verdict.producer_duplicates,
        verdict.retries,
        verdict.max_attempts,
        drain.as_secs_f64(),
        outage.map_or_else(String::new, |outage| outage.to_string())
    );
    if verdict.violated() {
        return Err(Failure("violations found: see the figures above".into()));
    }
    Ok(())
}

/// Live jobs of the run's queue.
async fn live_jobs(storage: &queue::AnyStorage, queue: &QueueName) -> Result<u64, Failure> {
    Ok(storage
        .stats()
        .await?
        .iter()
        .find(|s| &s.queue == queue)
        .map_or(0, queue::QueueStats::live))
}

/// The fault schedule, for `args.duration`: a kill every `kill_every`;
/// freezes and cuts spread evenly (every other cut a 1 s stall); one
/// restart half-way when commands are given.
async fn inject(
    args: &RunArgs,
    workers: &mut Workers,
    proxy: Option<&Proxy>,
) -> Result<Faults, Failure> {
    let start = Instant::now();
    let at = |i: u32, n: u32| args.duration.mul_f64(f64::from(i + 1) / f64::from(n + 1));
    let mut faults = Faults::default();
    let mut next_kill = args.kill_every;
    let mut thawing = Vec::new();
    let restart = args.stop.clone().zip(args.start.clone());
    let mut restarted = restart.is_none();
    while start.elapsed() < args.duration {
        let now = start.elapsed();
        if now >= next_kill {
            workers.kill_one()?;
            faults.kills += 1;
            next_kill += args.kill_every;
        }
        if faults.stops < args.freezes && now >= at(faults.stops, args.freezes) {
            let pid = workers.random_pid();
            thawing.push(tokio::spawn(faults::freeze(
                pid,
                args.lease + Duration::from_secs(1),
            )));
            faults.stops += 1;
        }
        if let Some(proxy) = proxy
            && faults.cuts < args.cuts
            && now >= at(faults.cuts, args.cuts)
        {
            if faults.cuts % 2 == 0 {
                proxy.cut();
            } else {
                proxy.stall(Duration::from_secs(1)).await;
            }
            faults.cuts += 1;
        }
        if !restarted && now >= args.duration / 2 {
            if let Some((stop, start_command)) = &restart {
                faults::shell(stop).await?;
                let stopped = Utc::now();
                tokio::time::sleep(Duration::from_secs(2)).await;
                faults::shell(start_command).await?;
                faults.restart = Some((stopped, Utc::now()));
                faults.restarts += 1;
            }
            restarted = true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for thaw in thawing {
        let _ = thaw.await;
    }
    Ok(faults)
}
