//! `soak`: jobs enqueued at a steady rate and drained by one worker for a
//! long time (default 30 minutes), with the worker's history pruning on as
//! in production (`--retention`, `--prune-interval`).
//! One sample row a minute, one summary row, and a run that verifies itself
//! (every job ran exactly once, none left); server settings it changes are
//! restored ([`ServerSettings`]). What each row holds and the pressure
//! options: docs/design-notes.md, "queue-bench: the soak workload".

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use queue_core::NewJob;
use queue_worker::{JobContext, WorkerBuilder, WorkerOptions};
use serde_json::json;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use tokio::sync::Notify;
use tokio::time::MissedTickBehavior;

use super::drain::{FILL_BATCH, drain_once};
use super::pressure::{Pressure, PressureState};
use super::server_settings::ServerSettings;
use super::{QUEUE, fill, queue_options, time_limit, worker_options};
use crate::BenchError;
use crate::args::{Autovacuum, Backend, SoakArgs, Window};
use crate::report::{Report, Row};
use crate::stats::Spread;
use crate::target::{Setup, Target};

/// Jobs drained to measure the maximum rate when `--rate` is not given.
const MEASURE_JOBS: usize = 20_000;

/// The producer enqueues what is due every tick, in one batch.
const TICK: Duration = Duration::from_millis(50);

/// The largest batch the producer sends at once (when catching up).
const MAX_ENQUEUE_BATCH: u64 = 5_000;

/// Samples at each end of the run compared by the summary.
const WINDOW: usize = 5;

const MIB: f64 = 1024.0 * 1024.0;

pub(crate) async fn run<T: Target>(
    args: &SoakArgs,
    setup: &Setup,
    report: &mut Report,
) -> Result<(), BenchError> {
    args.check()?;
    let pressured = args.idle_in_tx.is_some() || args.readers > 0;
    if pressured && !matches!(setup.backend, Backend::Postgres | Backend::Mysql) {
        return Err("--idle-in-tx and --readers need --backend postgres or mysql".into());
    }
    let table_options = args.queue_table_options.is_some() || args.history_table_options.is_some();
    if table_options && setup.backend != Backend::Postgres {
        return Err("--queue-table-options and --history-table-options are PostgreSQL's".into());
    }
    if args.autovacuum_naptime.is_some() && setup.backend != Backend::Postgres {
        return Err("--autovacuum-naptime is PostgreSQL's".into());
    }
    let rate = match args.rate {
        Some(0) => return Err("--rate must be at least 1 job/s".into()),
        Some(rate) => rate,
        None => measure_rate::<T>(args, setup, report).await?,
    };
    let storage = T::fresh(setup).await?;
    let probe = Probe::open(setup).await?;
    if let Probe::Postgres { pool, schema } = &probe {
        for (table, options) in [
            ("job_queue", &args.queue_table_options),
            ("job_history", &args.history_table_options),
        ] {
            if let Some(options) = options {
                let sql = format!("ALTER TABLE \"{schema}\".{table} SET ({options})");
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone()))
                    .execute(pool)
                    .await
                    .map_err(|e| format!("{sql}: {e}"))?;
                println!("soak: {sql}");
            }
        }
    }
    let pressure = Pressure::prepare(args, setup).await?;
    let settings = match &probe {
        Probe::Postgres { pool, .. } => {
            let mut wanted = Vec::new();
            if args.autovacuum == Autovacuum::On {
                wanted.push(("autovacuum", "on".to_owned()));
            }
            if let Some(naptime) = args.autovacuum_naptime {
                wanted.push(("autovacuum_naptime", format!("{}s", naptime.as_secs())));
            }
            match ServerSettings::apply(pool.clone(), &wanted).await {
                Ok(settings) => Some(settings),
                Err(error) => {
                    if let Err(pressure_error) = pressure.finish().await {
                        eprintln!("{pressure_error}");
                    }
                    return Err(error);
                }
            }
        }
        _ => None,
    };
    let outcome = tokio::select! {
        outcome = soak(&storage, &probe, &pressure, args, setup, rate, report) => outcome,
        signal = interrupted() => Err(BenchError::from(format!("soak interrupted by {signal}"))),
    };
    if let Some(settings) = settings {
        settings.restore().await;
    }
    // The holder rolls back now if the run stopped before its end, and its
    // scratch table goes.
    let pressure_outcome = pressure.finish().await;
    probe.close().await;
    match (outcome, pressure_outcome) {
        (Ok(()), pressure_outcome) => pressure_outcome,
        (Err(error), Err(pressure_error)) => {
            eprintln!("{pressure_error}");
            Err(error)
        }
        (Err(error), Ok(())) => Err(error),
    }
}

/// Half the rate of a drain of [`MEASURE_JOBS`] jobs on a fresh schema.
async fn measure_rate<T: Target>(
    args: &SoakArgs,
    setup: &Setup,
    report: &mut Report,
) -> Result<u32, BenchError> {
    let storage = T::fresh(setup).await?;
    fill(&storage, QUEUE, MEASURE_JOBS, 0, FILL_BATCH, 2).await?;
    let drained = drain_once(&storage, setup, MEASURE_JOBS, args.concurrency).await?;
    report.push(drained.row("soak_max_drain", MEASURE_JOBS, args.concurrency));
    Ok(((drained.jobs_per_s / 2.0).round() as u32).max(1))
}

/// The run itself, on a fresh schema.
async fn soak<T: Target>(
    storage: &T,
    probe: &Probe,
    pressure: &Pressure,
    args: &SoakArgs,
    setup: &Setup,
    rate: u32,
    report: &mut Report,
) -> Result<(), BenchError> {
    let counts = Arc::new(Counts::new());
    pressure.start(counts.start);
    let seen = Arc::clone(&counts);
    let options = WorkerOptions {
        prune_interval: args.prune_interval,
        completed_retention: args.retention,
        dead_letter_retention: args.retention,
        ..worker_options(setup)
    };
    let worker = WorkerBuilder::new(storage.clone())
        .options(options)
        .queue(
            QUEUE,
            queue_options(setup, args.concurrency),
            move |ctx: JobContext| {
                seen.started(ctx.payload());
                async { Ok(None) }
            },
        )?
        .start()?;
    let producer = produce(storage.clone(), &counts, rate, args.duration);
    let sampler = sample_all(storage, probe, pressure.state(), &counts, args, report);
    let ((), rows) = tokio::try_join!(producer, sampler)?;

    // Drain what is left, then check every job ran exactly once.
    let enqueued = counts.enqueued();
    let left = enqueued.saturating_sub(counts.done());
    let limit = time_limit(usize::try_from(left).unwrap_or(usize::MAX), 200);
    counts.all_done(enqueued, limit).await?;
    let shutdown = worker.shutdown(Duration::from_secs(30)).await;
    if shutdown.cancelled > 0 {
        return Err(format!("{} runs were still going at shutdown", shutdown.cancelled).into());
    }
    let live = storage.count_live(QUEUE).await?;
    let (done, duplicates, malformed) = counts.verdict();
    if live != 0 || done != enqueued || duplicates != 0 || malformed != 0 {
        return Err(format!(
            "soak did not verify: {enqueued} enqueued, {done} handler runs, {duplicates} \
             repeated, {malformed} without the soak's payload, {live} left in the queue"
        )
        .into());
    }
    report.push(summary(&rows, args, rate, enqueued));
    Ok(())
}

/// Takes a sample every `--sample` until the run's end (the last one at or
/// after it), pushing each as a row.
async fn sample_all<T: Target>(
    storage: &T,
    probe: &Probe,
    pressure: &PressureState,
    counts: &Counts,
    args: &SoakArgs,
    report: &mut Report,
) -> Result<Vec<Sample>, BenchError> {
    let samples = args
        .duration
        .as_nanos()
        .div_ceil(args.sample.as_nanos().max(1));
    let mut rows = Vec::new();
    let (mut enqueued_before, mut done_before, mut at_before) = (0, 0, counts.start);
    for k in 1..=samples {
        let at = counts.start + args.sample * u32::try_from(k).unwrap_or(u32::MAX);
        tokio::time::sleep_until(at.into()).await;
        let now = Instant::now();
        let (enqueued, done) = (counts.enqueued(), counts.done());
        let (lags, calls) = counts.take_timings();
        let (readers, reader_scans) = pressure.take_readers();
        let sample = Sample {
            t_s: now.duration_since(counts.start).as_secs_f64(),
            enqueued: enqueued - enqueued_before,
            done: done - done_before,
            jobs_per_s: (done - done_before) as f64 / now.duration_since(at_before).as_secs_f64(),
            backlog: storage.count_live(QUEUE).await?,
            lag: Spread::of(&lags),
            enqueue_call: Spread::of(&calls),
            sizes: probe.sizes().await?,
            load: load_average(),
            holder: args
                .idle_in_tx
                .map(|_| pressure.holder_open_between(at_before, now)),
            readers: (args.readers > 0).then_some((readers, reader_scans)),
        };
        report.push(sample.row());
        rows.push(sample);
        (enqueued_before, done_before, at_before) = (enqueued, done, now);
    }
    Ok(rows)
}

/// Enqueues `rate` jobs a second for `duration`, what is due every
/// [`TICK`] in one batch. Each payload carries the job's sequence number
/// and the microsecond (since the start) its batch was built.
async fn produce<T: Target>(
    storage: T,
    counts: &Counts,
    rate: u32,
    duration: Duration,
) -> Result<(), BenchError> {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut sent: u64 = 0;
    loop {
        tick.tick().await;
        let elapsed = counts.start.elapsed().min(duration);
        let due = (f64::from(rate) * elapsed.as_secs_f64()) as u64;
        while sent < due {
            let n = (due - sent).min(MAX_ENQUEUE_BATCH);
            let t = counts.start.elapsed().as_micros() as u64;
            let jobs = (sent..sent + n)
                .map(|i| NewJob::new(QUEUE, json!({ "i": i, "t": t })))
                .collect();
            let began = Instant::now();
            storage.enqueue_batch(jobs).await?;
            counts.enqueued_batch(n, began.elapsed());
            sent += n;
        }
        if elapsed >= duration {
            return Ok(());
        }
    }
}

/// What the producer and the handlers count.
#[derive(Debug)]
struct Counts {
    start: Instant,
    enqueued: AtomicU64,
    calls: Mutex<Vec<Duration>>,
    runs: Mutex<Runs>,
    changed: Notify,
}

#[derive(Debug, Default)]
struct Runs {
    done: u64,
    duplicates: u64,
    malformed: u64,
    /// One bit per sequence number: whether the job has run.
    seen: Vec<u64>,
    lags: Vec<Duration>,
}

impl Counts {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            enqueued: AtomicU64::new(0),
            calls: Mutex::default(),
            runs: Mutex::default(),
            changed: Notify::new(),
        }
    }

    fn enqueued_batch(&self, n: u64, took: Duration) {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(took);
        self.enqueued.fetch_add(n, Ordering::Relaxed);
    }

    fn enqueued(&self) -> u64 {
        self.enqueued.load(Ordering::Relaxed)
    }

    /// A handler started the job with `payload`.
    fn started(&self, payload: &serde_json::Value) {
        let now = self.start.elapsed();
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        runs.done += 1;
        match (payload["i"].as_u64(), payload["t"].as_u64()) {
            (Some(i), Some(t)) => {
                let (word, bit) = ((i / 64) as usize, 1u64 << (i % 64));
                if runs.seen.len() <= word {
                    runs.seen.resize(word + 1, 0);
                }
                if runs.seen[word] & bit != 0 {
                    runs.duplicates += 1;
                }
                runs.seen[word] |= bit;
                runs.lags.push(now.saturating_sub(Duration::from_micros(t)));
            }
            _ => runs.malformed += 1,
        }
        drop(runs);
        self.changed.notify_one();
    }

    fn done(&self) -> u64 {
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .done
    }

    /// Start lags and enqueue call times since the last call.
    fn take_timings(&self) -> (Vec<Duration>, Vec<Duration>) {
        let lags = std::mem::take(
            &mut self
                .runs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .lags,
        );
        let calls = std::mem::take(&mut *self.calls.lock().unwrap_or_else(PoisonError::into_inner));
        (lags, calls)
    }

    /// Handler runs, repeated runs, runs of jobs the soak did not enqueue.
    fn verdict(&self) -> (u64, u64, u64) {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        (runs.done, runs.duplicates, runs.malformed)
    }

    /// Waits until `expected` handler runs happened, for at most `limit`.
    async fn all_done(&self, expected: u64, limit: Duration) -> Result<(), BenchError> {
        let deadline = Instant::now() + limit;
        loop {
            let changed = self.changed.notified();
            if self.done() >= expected {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || tokio::time::timeout(left, changed).await.is_err() {
                return Err(format!(
                    "only {} of {expected} jobs ran within {limit:?} of the soak's end",
                    self.done()
                )
                .into());
            }
        }
    }
}

/// One sample's figures.
#[derive(Debug)]
struct Sample {
    t_s: f64,
    enqueued: u64,
    done: u64,
    jobs_per_s: f64,
    backlog: i64,
    lag: Option<Spread>,
    enqueue_call: Option<Spread>,
    sizes: Option<Sizes>,
    load: Option<[f64; 3]>,
    /// With `--idle-in-tx`: whether the holder's transaction was open at
    /// some moment of the sample.
    holder: Option<bool>,
    /// With `--readers`: the most readers running at once during the
    /// sample, and their transactions committed.
    readers: Option<(usize, u64)>,
}

impl Sample {
    fn row(&self) -> Row {
        let mut row = Row::new("soak_sample")
            .param("t_s", format!("{:.0}", self.t_s))
            .figure("enqueued", self.enqueued)
            .figure("done", self.done)
            .figure("jobs_per_s", format!("{:.0}", self.jobs_per_s))
            .figure("backlog", self.backlog);
        if let Some(holder) = self.holder {
            row = row.figure("holder", u8::from(holder));
        }
        if let Some((readers, scans)) = self.readers {
            row = row.figure("readers", readers).figure("reader_scans", scans);
        }
        if let Some(lag) = self.lag {
            row = row.ms("lag_p50_ms", lag.p50).ms("lag_p99_ms", lag.p99);
        }
        if let Some(call) = self.enqueue_call {
            row = row.ms("enqueue_p99_ms", call.p99);
        }
        if let Some(sizes) = &self.sizes {
            for (key, value) in &sizes.figures {
                row = row.figure(key, value);
            }
        }
        if let Some([one, five, _]) = self.load {
            row = row
                .figure("load1", format!("{one:.2}"))
                .figure("load5", format!("{five:.2}"));
        }
        row
    }
}

/// The summary: throughput of the first and last [`WINDOW`] samples (fewer
/// in a short run), the queue table's growth after the first sample.
fn summary(rows: &[Sample], args: &SoakArgs, rate: u32, enqueued: u64) -> Row {
    let window = WINDOW.min(rows.len() / 2).max(1).min(rows.len());
    let mean = |samples: &[Sample], f: &dyn Fn(&Sample) -> f64| {
        samples.iter().map(f).sum::<f64>() / samples.len().max(1) as f64
    };
    let first = &rows[..window];
    let last = &rows[rows.len() - window..];
    let first_rate = mean(first, &|s| s.jobs_per_s);
    let last_rate = mean(last, &|s| s.jobs_per_s);
    let worst_p99 = |samples: &[Sample]| {
        samples
            .iter()
            .filter_map(|s| s.lag.map(|l| l.p99))
            .fold(0.0, f64::max)
    };
    let mut row = Row::new("soak")
        .param("rate", rate)
        .param("duration_s", args.duration.as_secs())
        .param("sample_s", args.sample.as_secs_f64())
        .param("c", args.concurrency)
        .param("retention_s", args.retention.as_secs())
        .figure("enqueued", enqueued)
        .figure("window", window)
        .figure("first_jobs_per_s", format!("{first_rate:.0}"))
        .figure("last_jobs_per_s", format!("{last_rate:.0}"))
        .figure(
            "throughput_ratio",
            format!("{:.3}", last_rate / first_rate.max(f64::MIN_POSITIVE)),
        )
        .ms("lag_p99_first_ms", worst_p99(first))
        .ms("lag_p99_last_ms", worst_p99(last));
    let queue: Vec<u64> = rows
        .iter()
        .filter_map(|s| s.sizes.as_ref().map(|z| z.queue_total))
        .collect();
    if let (Some(&base), Some(&max), Some(&end)) = (queue.first(), queue.iter().max(), queue.last())
    {
        row = row
            .figure("queue_mib_first", mib(base))
            .figure("queue_mib_max", mib(max))
            .figure("queue_mib_end", mib(end))
            .figure(
                "queue_growth",
                format!("{:.2}", max as f64 / (base.max(1)) as f64),
            );
    }
    let history: Vec<u64> = rows
        .iter()
        .filter_map(|s| s.sizes.as_ref().map(|z| z.history_total))
        .collect();
    if let (Some(&max), Some(&end)) = (history.iter().max(), history.last()) {
        row = row
            .figure("history_mib_max", mib(max))
            .figure("history_mib_end", mib(end));
    }
    let loads: Vec<f64> = rows.iter().filter_map(|s| s.load.map(|l| l[0])).collect();
    if !loads.is_empty() {
        row = row.figure(
            "load1_mean",
            format!("{:.2}", loads.iter().sum::<f64>() / loads.len() as f64),
        );
    }
    if args.readers > 0 {
        row = row
            .param("readers", args.readers)
            .param("readers_window", args.readers_window());
    }
    if let Some(window) = args.idle_in_tx {
        row = holder_figures(row.param("idle_in_tx", window), rows, window);
    }
    row
}

/// The summary's figures around the holder: its samples are those with
/// `holder=1`, "before" every sample ahead of them, "after" every one
/// behind them. Start lag p99 (the worst sample's) and the queue table's
/// largest size before, during and after, and how long after TO the table
/// was back at or under its size before (`queue_back_s`: the first sample
/// after the holder at or under `queue_mib_before`, `never` when none was).
/// A figure without samples to read it from is `-`.
fn holder_figures(row: Row, rows: &[Sample], window: Window) -> Row {
    let held = |s: &Sample| s.holder == Some(true);
    let (Some(first), Some(last)) = (rows.iter().position(held), rows.iter().rposition(held))
    else {
        return row.figure("holder_samples", 0);
    };
    let (before, during, after) = (&rows[..first], &rows[first..=last], &rows[last + 1..]);
    let p99 = |samples: &[Sample]| {
        samples
            .iter()
            .filter_map(|s| s.lag.map(|l| l.p99))
            .reduce(f64::max)
    };
    let largest = |samples: &[Sample], f: &dyn Fn(&Sizes) -> Option<u64>| {
        samples
            .iter()
            .filter_map(|s| s.sizes.as_ref().and_then(f))
            .max()
    };
    let queue = |z: &Sizes| Some(z.queue_total);
    let ms = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"));
    let size = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), mib);
    let count = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "-".to_owned(),
    };
    let queue_before = largest(before, &queue);
    let queue_during = largest(during, &queue);
    let back = match (queue_before, after.is_empty()) {
        (None, _) | (_, true) => "-".to_owned(),
        (Some(limit), false) => after
            .iter()
            .find(|s| s.sizes.as_ref().is_some_and(|z| z.queue_total <= limit))
            .map_or_else(
                || "never".to_owned(),
                |s| format!("{:.0}", s.t_s - window.to.as_secs_f64()),
            ),
    };
    let mut row = row
        .figure("holder_samples", during.len())
        .figure("lag_p99_before_ms", ms(p99(before)))
        .figure("lag_p99_holder_ms", ms(p99(during)))
        .figure("lag_p99_after_ms", ms(p99(after)))
        .figure("lag_p99_holder_ratio", ratio(p99(during), p99(before)))
        .figure("queue_mib_before", size(queue_before))
        .figure("queue_mib_holder_max", size(queue_during))
        .figure("queue_mib_after_max", size(largest(after, &queue)))
        .figure(
            "queue_holder_growth",
            ratio(
                queue_during.map(|v| v as f64),
                queue_before.map(|v| v as f64),
            ),
        )
        .figure("queue_back_s", back);
    let xmin = |z: &Sizes| z.xmin_age;
    if largest(rows, &xmin).is_some() {
        row = row
            .figure("xmin_age_before_max", count(largest(before, &xmin)))
            .figure("xmin_age_holder_max", count(largest(during, &xmin)));
    }
    let purge = |z: &Sizes| z.purge_lag;
    if largest(rows, &purge).is_some() {
        row = row
            .figure("purge_lag_before_max", count(largest(before, &purge)))
            .figure("purge_lag_holder_max", count(largest(during, &purge)))
            .figure(
                "purge_lag_end",
                count(rows.last().and_then(|s| s.sizes.as_ref()?.purge_lag)),
            );
    }
    row
}

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / MIB)
}

/// The 1, 5 and 15 minute load averages (Linux; `None` elsewhere).
fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut fields = text.split_whitespace().map(str::parse::<f64>);
    Some([
        fields.next()?.ok()?,
        fields.next()?.ok()?,
        fields.next()?.ok()?,
    ])
}

/// Which signal ended the run: Ctrl-C (SIGINT), SIGTERM or SIGHUP.
async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut hangup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        // Without the handlers, only Ctrl-C is caught.
        return match tokio::signal::ctrl_c().await {
            Ok(()) => "Ctrl-C",
            Err(_) => std::future::pending().await,
        };
    };
    tokio::select! {
        Ok(()) = tokio::signal::ctrl_c() => "Ctrl-C",
        Some(()) = term.recv() => "SIGTERM",
        Some(()) = hangup.recv() => "SIGHUP",
        else => std::future::pending().await,
    }
}

/// The tables' sizes, through a connection of the benchmark's own.
#[derive(Debug)]
enum Probe {
    Postgres {
        pool: PgPool,
        schema: String,
    },
    Mysql {
        conn: Mutex<Option<mysql_async::Conn>>,
        schema: String,
    },
    /// SQLite and Redis: no table sizes.
    None,
}

/// One sample of the tables.
#[derive(Debug)]
struct Sizes {
    /// Printed as they are.
    figures: Vec<(&'static str, String)>,
    /// The queue table and its indexes, in bytes.
    queue_total: u64,
    /// The history table and its indexes, in bytes.
    history_total: u64,
    /// PostgreSQL: the age in transactions of the oldest snapshot or
    /// transaction id of a client session on the run's database
    /// (`xmin_age`, what holds vacuum back).
    xmin_age: Option<u64>,
    /// MySQL: InnoDB's history list length (`purge_lag`).
    purge_lag: Option<u64>,
}

impl Probe {
    async fn open(setup: &Setup) -> Result<Self, BenchError> {
        Ok(match setup.backend {
            Backend::Postgres => Probe::Postgres {
                pool: PgPoolOptions::new()
                    .max_connections(1)
                    .connect(&setup.url)
                    .await?,
                schema: setup.schema.clone(),
            },
            Backend::Mysql => {
                let opts = mysql_async::Opts::from_url(&setup.url)
                    .map_err(|e| BenchError::from(e.to_string()))?;
                Probe::Mysql {
                    conn: Mutex::new(Some(mysql_async::Conn::new(opts).await?)),
                    schema: setup.schema.clone(),
                }
            }
            Backend::Sqlite | Backend::Redis => Probe::None,
        })
    }

    async fn sizes(&self) -> Result<Option<Sizes>, BenchError> {
        match self {
            Probe::Postgres { pool, schema } => Ok(Some(postgres_sizes(pool, schema).await?)),
            Probe::Mysql { conn, schema } => {
                let taken = conn.lock().unwrap_or_else(PoisonError::into_inner).take();
                let Some(mut taken) = taken else {
                    return Err("the MySQL probe connection was lost".into());
                };
                let sizes = mysql_sizes(&mut taken, schema).await;
                *conn.lock().unwrap_or_else(PoisonError::into_inner) = Some(taken);
                Ok(Some(sizes?))
            }
            Probe::None => Ok(None),
        }
    }

    async fn close(self) {
        match self {
            Probe::Postgres { pool, .. } => pool.close().await,
            Probe::Mysql { conn, .. } => {
                let taken = conn.into_inner().unwrap_or_else(PoisonError::into_inner);
                if let Some(conn) = taken {
                    let _ = conn.disconnect().await;
                }
            }
            Probe::None => {}
        }
    }
}

async fn postgres_sizes(pool: &PgPool, schema: &str) -> Result<Sizes, BenchError> {
    type TableRow = (String, i64, i64, i64, i64, i64, i64);
    let rows: Vec<TableRow> = sqlx::query_as(
        "SELECT c.relname::text, pg_relation_size(c.oid), pg_indexes_size(c.oid), \
                pg_total_relation_size(c.oid), s.n_live_tup, s.n_dead_tup, s.autovacuum_count \
         FROM pg_class c \
         JOIN pg_namespace n ON n.oid = c.relnamespace \
         JOIN pg_stat_user_tables s ON s.relid = c.oid \
         WHERE n.nspname = $1 AND c.relname IN ('job_queue', 'job_history')",
    )
    .bind(schema)
    .fetch_all(pool)
    .await?;
    let table = |name: &str| {
        rows.iter()
            .find(|r| r.0 == name)
            .ok_or_else(|| BenchError::from(format!("no table {schema}.{name}")))
    };
    let queue = table("job_queue")?;
    let history = table("job_history")?;
    // Client sessions only: autovacuum's own snapshot does not hold other
    // vacuums back. Sessions of other databases do not hold back this
    // one's tables.
    let xmin_age: i64 = sqlx::query_scalar(
        "SELECT coalesce(max(greatest(age(backend_xmin), age(backend_xid))), 0)::bigint \
         FROM pg_stat_activity \
         WHERE datname = current_database() AND backend_type = 'client backend' \
           AND pid <> pg_backend_pid()",
    )
    .fetch_one(pool)
    .await?;
    let bytes = |v: i64| u64::try_from(v).unwrap_or(0);
    Ok(Sizes {
        figures: vec![
            ("queue_heap_mib", mib(bytes(queue.1))),
            ("queue_index_mib", mib(bytes(queue.2))),
            ("queue_total_mib", mib(bytes(queue.3))),
            ("queue_dead", queue.5.to_string()),
            ("queue_autovacuums", queue.6.to_string()),
            ("history_rows", history.4.to_string()),
            ("history_total_mib", mib(bytes(history.3))),
            ("history_dead", history.5.to_string()),
            ("history_autovacuums", history.6.to_string()),
            ("xmin_age", xmin_age.to_string()),
        ],
        queue_total: bytes(queue.3),
        history_total: bytes(history.3),
        xmin_age: Some(u64::try_from(xmin_age).unwrap_or(0)),
        purge_lag: None,
    })
}

async fn mysql_sizes(conn: &mut mysql_async::Conn, schema: &str) -> Result<Sizes, BenchError> {
    type TableRow = (String, u64, u64, u64, u64);
    let tables: Vec<TableRow> = conn
        .exec(
            "SELECT TABLE_NAME, DATA_LENGTH, INDEX_LENGTH, DATA_FREE, TABLE_ROWS \
             FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME IN ('job_queue', 'job_history')",
            (schema,),
        )
        .await?;
    let files: Vec<(String, u64)> = conn
        .exec(
            "SELECT NAME, FILE_SIZE FROM information_schema.INNODB_SYS_TABLESPACES \
             WHERE NAME IN (?, ?)",
            (
                format!("{schema}/job_queue"),
                format!("{schema}/job_history"),
            ),
        )
        .await?;
    let purge_lag: Option<u64> = conn
        .query_first(
            "SELECT COUNT FROM information_schema.INNODB_METRICS \
             WHERE NAME = 'trx_rseg_history_len'",
        )
        .await?;
    // The oldest open InnoDB transaction, server-wide (as the purge lag).
    let oldest_trx: Option<i64> = conn
        .query_first(
            "SELECT COALESCE(MAX(TIMESTAMPDIFF(SECOND, trx_started, NOW())), 0) \
             FROM information_schema.INNODB_TRX",
        )
        .await?;
    let table = |name: &str| {
        tables
            .iter()
            .find(|r| r.0.eq_ignore_ascii_case(name))
            .ok_or_else(|| BenchError::from(format!("no table {schema}.{name}")))
    };
    let file = |name: &str| {
        let full = format!("{schema}/{name}");
        files.iter().find(|f| f.0 == full).map(|f| f.1)
    };
    let queue = table("job_queue")?;
    let history = table("job_history")?;
    let mut figures = vec![
        ("queue_data_mib", mib(queue.1)),
        ("queue_index_mib", mib(queue.2)),
        ("queue_free_mib", mib(queue.3)),
    ];
    if let Some(size) = file("job_queue") {
        figures.push(("queue_file_mib", mib(size)));
    }
    figures.extend([
        ("history_rows", history.4.to_string()),
        ("history_data_mib", mib(history.1)),
        ("history_index_mib", mib(history.2)),
        ("history_free_mib", mib(history.3)),
    ]);
    if let Some(size) = file("job_history") {
        figures.push(("history_file_mib", mib(size)));
    }
    if let Some(lag) = purge_lag {
        figures.push(("purge_lag", lag.to_string()));
    }
    if let Some(age) = oldest_trx {
        figures.push(("oldest_trx_s", age.to_string()));
    }
    Ok(Sizes {
        figures,
        queue_total: queue.1 + queue.2,
        history_total: history.1 + history.2,
        xmin_age: None,
        purge_lag,
    })
}
