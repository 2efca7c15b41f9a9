//! The command line.

use std::time::Duration;

use clap::{Args as ClapArgs, Parser, Subcommand, ValueEnum};

/// Measures the job queue on a real database; prints `result key=value ...`
/// lines, then a table.
#[derive(Debug, Parser)]
#[command(name = "queue-bench", version)]
pub(crate) struct Args {
    /// The storage engine.
    #[arg(long, value_enum)]
    pub(crate) backend: Backend,
    /// The server (default: this machine's, as in the README).
    #[arg(long)]
    pub(crate) url: Option<String>,
    /// The schema (PostgreSQL), database (MySQL) or key namespace (Redis)
    /// the run drops and recreates before every measurement.
    #[arg(long, default_value = "queue_bench")]
    pub(crate) schema: String,
    /// Connections in the storage's pool.
    #[arg(long, default_value_t = 10)]
    pub(crate) pool: u32,
    /// Jobs each queue claims ahead of its free slots (`QueueOptions::prefetch`).
    #[arg(long, default_value_t = 0)]
    pub(crate) prefetch: usize,
    /// Acks per completion batch (`WorkerOptions::completion_batch`; the
    /// library's default when absent).
    #[arg(long)]
    pub(crate) completion_batch: Option<usize>,
    /// Workers record no start lags and depths
    /// (`WorkerOptions::sample_interval` `None`), to measure what the
    /// charts' samples cost.
    #[arg(long)]
    pub(crate) no_samples: bool,
    /// Do not listen for PostgreSQL's notifications (the worker polls).
    #[arg(long)]
    pub(crate) no_notify: bool,
    /// PostgreSQL: keep jobs without a unique key out of the unique-key
    /// index in the schema the run creates
    /// (`PgStorage::index_keyless_jobs(false)`).
    #[arg(long)]
    pub(crate) keyless_unindexed: bool,
    /// PostgreSQL: claims commit without waiting for the WAL flush
    /// (`PgStorage::with_async_claims(true)`).
    #[arg(long)]
    pub(crate) async_claims: bool,
    /// PostgreSQL: `--url` is a PgBouncer in `pool_mode = transaction`
    /// (`PgStorage::with_transaction_pooling(true)`): unnamed statements,
    /// each in a transaction. Without `--listen-url` the worker polls.
    #[arg(long)]
    pub(crate) transaction_pooling: bool,
    /// PostgreSQL: LISTEN on a connection to this URL (the server itself)
    /// rather than on the pool (`PgStorage::with_listen_url`), as
    /// `--transaction-pooling` needs for wake-ups.
    #[arg(long)]
    pub(crate) listen_url: Option<String>,
    /// Redis: report a write done only once this many replicas have it
    /// (`RedisStorage::with_durable_writes`, WAIT with a 1 s timeout).
    #[arg(long)]
    pub(crate) wait_replicas: Option<u32>,
    /// Run through the facade's `queue::AnyStorage` (as `queue::connect`
    /// returns it) instead of the backend's own storage type.
    #[arg(long)]
    pub(crate) facade: bool,
    /// What to measure.
    #[command(subcommand)]
    pub(crate) workload: Workload,
}

/// A storage engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Backend {
    /// PostgreSQL 13+ through sqlx.
    Postgres,
    /// MySQL 8+ or MariaDB 10.6+ through diesel-async.
    Mysql,
    /// SQLite in a local file through sqlx (the file is deleted and
    /// recreated before every measurement).
    Sqlite,
    /// Redis 7+ (standalone, or `redis+cluster://` URLs) through the redis
    /// crate; `--schema` is the key namespace, cleared before every
    /// measurement.
    Redis,
}

impl Backend {
    pub(crate) fn default_url(self) -> &'static str {
        match self {
            Backend::Postgres => "postgres://postgres@127.0.0.1:5432/postgres",
            Backend::Mysql => "mysql://root@127.0.0.1:3306/",
            Backend::Sqlite => "sqlite://queue_bench.db?mode=rwc",
            Backend::Redis => "redis://127.0.0.1:6379",
        }
    }
}

/// The workloads.
#[derive(Debug, Subcommand)]
pub(crate) enum Workload {
    /// Batch enqueue from one producer, then single enqueues from many.
    Enqueue(EnqueueArgs),
    /// Enqueue no-op jobs, then time a worker completing all of them.
    Drain(DrainArgs),
    /// Enqueue-commit to handler-start latency on an idle worker.
    Latency(LatencyArgs),
    /// Start lag of jobs due at spread times.
    Scheduled(ScheduledArgs),
    /// Drain with a large backlog in another queue and in the same queue.
    Backlog(BacklogArgs),
    /// The latency of each storage operation on its own, one at a time.
    Ops(OpsArgs),
    /// Operator reads (stats, the dashboard overview, job listings,
    /// throughput) with many live and finished jobs.
    Inspect(InspectArgs),
    /// Steady enqueue and drain at a fixed rate for a long time, with the
    /// tables' sizes, dead rows and the load average every sample.
    Soak(SoakArgs),
    /// Groups: a drain at group concurrency 1 over many keys against the
    /// same drain unlimited (checking that no key ever runs two jobs at
    /// once), and a small tenant's start lag behind a large tenant's
    /// backlog against an empty queue's.
    Fairness(FairnessArgs),
    /// Dependencies: a fan-out/fan-in graph (a root, its children, a join
    /// waiting for all of them) enqueued in one call and drained, against
    /// as many independent jobs.
    Workflow(WorkflowArgs),
    /// Many worker processes against one server: a drain by 1, 2, 4 and
    /// 8 processes of this binary, each with its own storage and pool;
    /// then the queue's concurrency limit checked across all of them.
    Hosts(HostsArgs),
    /// Every workload at a tiny size: proves the benchmark still works.
    Smoke,
}

/// `enqueue` settings.
#[derive(Debug, Clone, ClapArgs)]
pub(crate) struct EnqueueArgs {
    /// Jobs enqueued in batches.
    #[arg(long, default_value_t = 100_000)]
    pub(crate) n: usize,
    /// Jobs per batch.
    #[arg(long, default_value_t = 1_000)]
    pub(crate) batch: usize,
    /// Jobs enqueued one at a time.
    #[arg(long, default_value_t = 20_000)]
    pub(crate) single_n: usize,
    /// Concurrent producers of single jobs.
    #[arg(long, default_value_t = 16)]
    pub(crate) producers: usize,
}

/// `inspect` settings.
#[derive(Debug, Clone, ClapArgs)]
pub(crate) struct InspectArgs {
    /// Live jobs, over four queues (a tenth of each running).
    #[arg(long, default_value_t = 1_000_000)]
    pub(crate) live: usize,
    /// Jobs completed in the last hour.
    #[arg(long, default_value_t = 1_000_000)]
    pub(crate) history: usize,
    /// Calls of each read.
    #[arg(long, default_value_t = 20)]
    pub(crate) rounds: usize,
}

/// `ops` settings.
#[derive(Debug, Clone, ClapArgs)]
pub(crate) struct OpsArgs {
    /// Calls of each single-job operation (a tenth as many batched or
    /// inspecting ones).
    #[arg(long, default_value_t = 2_000)]
    pub(crate) n: usize,
}

/// `drain` settings.
#[derive(Debug, Clone, ClapArgs)]
pub(crate) struct DrainArgs {
    /// Jobs to complete.
    #[arg(long, default_value_t = 100_000)]
    pub(crate) n: usize,
    /// Worker concurrencies to measure, one run each.
    #[arg(long, value_delimiter = ',', default_value = "16")]
    pub(crate) concurrency: Vec<usize>,
    /// Gives the drained queue a concurrency limit of N
    /// (`Storage::configure_queue`) before each run, so that every claim
    /// takes the limited path (lock, count, narrow); none by default.
    #[arg(long)]
    pub(crate) queue_limit: Option<u32>,
    /// Completed history rows of another queue written before each run
    /// (PostgreSQL only: one `INSERT ... generate_series` per million),
    /// to time claims and acks beside a large history.
    #[arg(long, default_value_t = 0)]
    pub(crate) history: usize,
    /// How many days ago the `--history` rows finished: past the worker's
    /// completed retention (7 days), they are pruned during the drain.
    #[arg(long, default_value_t = 0)]
    pub(crate) history_age_days: u64,
}

/// `fairness` settings.
#[derive(Debug, Clone, ClapArgs)]
pub(crate) struct FairnessArgs {
    /// Jobs of the group drain, spread round-robin over `--keys` groups.
    #[arg(long, default_value_t = 20_000)]
    pub(crate) n: usize,
    /// Groups of the group drain.
    #[arg(long, default_value_t = 1_000)]
    pub(crate) keys: usize,
    /// The group concurrency of the limited drain.
    #[arg(long, default_value_t = 1)]
    pub(crate) group_concurrency: u32,
    /// The worker's concurrency in every run.
    #[arg(long, default_value_t = 16)]
    pub(crate) concurrency: usize,
    /// Jobs of the large tenant, enqueued before the small one's.
    #[arg(long, default_value_t = 100_000)]
    pub(crate) backlog: usize,
    /// Jobs the small tenant enqueues, one every `--interval-ms`.
    #[arg(long, default_value_t = 200)]
    pub(crate) probes: usize,
    /// Pause between two of the small tenant's enqueues, in milliseconds.
    #[arg(long, default_value_t = 10)]
    pub(crate) interval_ms: u64,
}

/// `workflow` settings.
#[derive(Debug, Clone, ClapArgs)]
pub(crate) struct WorkflowArgs {
    /// Jobs of each run: the graph's root, `n - 2` children and its join,
    /// or as many independent jobs.
    #[arg(long, default_value_t = 10_000, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(3..=50_001))]
    pub(crate) n: usize,
    /// The worker's concurrency.
    #[arg(long, default_value_t = 16)]
    pub(crate) concurrency: usize,
    /// Runs of each shape, in turn; the figures are their medians.
    #[arg(long, default_value_t = 3)]
    pub(crate) rounds: usize,
}

/// `hosts` settings.
#[derive(Debug, Clone, ClapArgs)]
pub(crate) struct HostsArgs {
    /// Jobs to drain at each process count.
    #[arg(long, default_value_t = 50_000)]
    pub(crate) n: usize,
    /// Worker process counts to measure, one drain each.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub(crate) procs: Vec<u32>,
    /// Each process's worker concurrency.
    #[arg(long, default_value_t = 16)]
    pub(crate) concurrency: usize,
    /// The limit check: the queue's concurrency limit
    /// (`Storage::configure_queue`) while the largest process count drains.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) limit: u32,
    /// Jobs of each of the limit check's two drains (without and with the
    /// limit).
    #[arg(long, default_value_t = 10_000)]
    pub(crate) limit_n: usize,
    /// How often the limit check reads the storage's stats, in
    /// milliseconds.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) sample_ms: u64,
}

/// `latency` settings.
#[derive(Debug, Clone, ClapArgs)]
pub(crate) struct LatencyArgs {
    /// Jobs to send.
    #[arg(long, default_value_t = 1_000)]
    pub(crate) count: usize,
    /// Pause between two enqueues, in milliseconds.
    #[arg(long, default_value_t = 5)]
    pub(crate) interval_ms: u64,
}

/// `scheduled` settings.
#[derive(Debug, Clone, ClapArgs)]
pub(crate) struct ScheduledArgs {
    /// Jobs to schedule.
    #[arg(long, default_value_t = 1_000)]
    pub(crate) count: usize,
    /// Due times spread evenly over this many milliseconds, the first one
    /// second after the jobs are enqueued.
    #[arg(long, default_value_t = 5_000)]
    pub(crate) spread_ms: u64,
    /// Jobs scheduled an hour ahead in the same queue, enqueued in batches
    /// before the measured jobs (the delay-queue case: most of the queue
    /// is not due yet).
    #[arg(long, default_value_t = 0)]
    pub(crate) backlog: usize,
    /// Idle claims timed with the backlog waiting and nothing due, one
    /// after another, before the measured jobs are enqueued.
    #[arg(long, default_value_t = 50)]
    pub(crate) idle_claims: usize,
}

/// `backlog` settings.
#[derive(Debug, Clone, ClapArgs)]
pub(crate) struct BacklogArgs {
    /// Jobs to drain.
    #[arg(long, default_value_t = 100_000)]
    pub(crate) n: usize,
    /// Jobs waiting before the drain starts.
    #[arg(long, default_value_t = 1_000_000)]
    pub(crate) backlog: usize,
    /// Worker concurrency.
    #[arg(long, default_value_t = 16)]
    pub(crate) concurrency: usize,
}

/// `soak` settings.
#[derive(Debug, Clone, ClapArgs)]
pub(crate) struct SoakArgs {
    /// Jobs enqueued per second. Default: half the rate of a drain of
    /// 20,000 jobs at `--concurrency`, measured first on a fresh schema.
    #[arg(long)]
    pub(crate) rate: Option<u32>,
    /// How long jobs are enqueued (`90s`, `30m`, `2h`; a bare number is
    /// seconds).
    #[arg(long, default_value = "30m", value_parser = parse_duration)]
    pub(crate) duration: Duration,
    /// Time between two samples (one report row each).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub(crate) sample: Duration,
    /// Worker concurrency.
    #[arg(long, default_value_t = 16)]
    pub(crate) concurrency: usize,
    /// History retention for completed jobs (and dead letters): the
    /// worker's prune, as in production, so history stops growing.
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub(crate) retention: Duration,
    /// How often the worker prunes history.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub(crate) prune_interval: Duration,
    /// PostgreSQL: `on` turns autovacuum on for the run (`ALTER SYSTEM`
    /// and a reload) and restores the previous setting afterwards, also
    /// after an error, Ctrl-C or SIGTERM; `keep` leaves the server as it is.
    #[arg(long, value_enum, default_value_t = Autovacuum::On)]
    pub(crate) autovacuum: Autovacuum,
    /// PostgreSQL: `autovacuum_naptime` for the run (whole seconds, at
    /// least 1s; e.g. `10s`), restored afterwards as `--autovacuum` is.
    /// Default: the server's (PostgreSQL's default is a minute).
    #[arg(long, value_parser = parse_naptime)]
    pub(crate) autovacuum_naptime: Option<Duration>,
    /// PostgreSQL: storage parameters set on `job_queue` before the run,
    /// as in `ALTER TABLE job_queue SET (...)`, e.g.
    /// `autovacuum_vacuum_cost_delay=0,autovacuum_vacuum_scale_factor=0`.
    #[arg(long)]
    pub(crate) queue_table_options: Option<String>,
    /// PostgreSQL: storage parameters set on `job_history` before the run.
    #[arg(long)]
    pub(crate) history_table_options: Option<String>,
    /// PostgreSQL and MySQL: from FROM to TO after the soak starts
    /// enqueueing (`5m..25m`; times as `--duration`, FROM may be `0`), a
    /// connection of its own (not the storage's pool) holds one REPEATABLE
    /// READ transaction open and idle, as a forgotten reporting session
    /// would: it inserts a row into a scratch table the run creates in its
    /// schema (`soak_holder`, so the transaction has an xid) and reads
    /// `count(*)` of `job_queue` (so it has a snapshot), then waits. At TO
    /// it rolls back by itself (also on an error, Ctrl-C or SIGTERM) and the
    /// scratch table is dropped at the end of the run. The rows then show
    /// `holder` (1 when it was open during the sample) and the summary the
    /// lag and queue table size before, during and after it.
    #[arg(long, value_name = "FROM..TO", value_parser = parse_window)]
    pub(crate) idle_in_tx: Option<Window>,
    /// PostgreSQL and MySQL: N reporting connections of their own, each in
    /// a loop: a REPEATABLE READ transaction that counts `job_queue`
    /// (`count(*)`, `max(created_at)`) and the last minute of `job_history`,
    /// stays open a second, then commits. They run for the whole soak or
    /// `--readers-window`, and stop by themselves.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) readers: u32,
    /// When the `--readers` run (`FROM..TO` after the soak starts
    /// enqueueing, as `--idle-in-tx`). Default: the whole `--duration`.
    #[arg(long, value_name = "FROM..TO", value_parser = parse_window)]
    pub(crate) readers_window: Option<Window>,
}

impl SoakArgs {
    /// The checks across flags that clap cannot make: the windows inside
    /// `--duration`, `--readers-window` only with readers.
    pub(crate) fn check(&self) -> Result<(), String> {
        for (flag, window) in [
            ("--idle-in-tx", self.idle_in_tx),
            ("--readers-window", self.readers_window),
        ] {
            if let Some(window) = window
                && window.to > self.duration
            {
                return Err(format!(
                    "{flag} {window} ends after --duration {}",
                    show_duration(self.duration)
                ));
            }
        }
        if self.readers == 0
            && let Some(window) = self.readers_window
        {
            return Err(format!(
                "--readers-window {window} needs --readers N with N at least 1"
            ));
        }
        Ok(())
    }

    /// When the readers run: `--readers-window`, or the whole run.
    pub(crate) fn readers_window(&self) -> Window {
        self.readers_window.unwrap_or(Window {
            from: Duration::ZERO,
            to: self.duration,
        })
    }
}

/// `FROM..TO`: a part of the soak, as offsets from its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    /// When it begins, after the soak starts enqueueing.
    pub(crate) from: Duration,
    /// When it ends (after `from`).
    pub(crate) to: Duration,
}

impl std::fmt::Display for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}..{}",
            show_duration(self.from),
            show_duration(self.to)
        )
    }
}

/// `FROM..TO` with FROM before TO, each as [`parse_duration`] takes it
/// (FROM may be zero): `5m..25m`, `0..90s`, `500ms..2s`.
pub(crate) fn parse_window(text: &str) -> Result<Window, String> {
    let Some((from, to)) = text.trim().split_once("..") else {
        return Err(
            "expected FROM..TO, e.g. 5m..25m (times after the soak starts enqueueing)".to_owned(),
        );
    };
    let from = parse_offset(from).map_err(|e| format!("FROM {e}"))?;
    let to = parse_offset(to).map_err(|e| format!("TO {e}"))?;
    if from >= to {
        return Err(format!(
            "FROM ({}) must be before TO ({})",
            show_duration(from),
            show_duration(to)
        ));
    }
    Ok(Window { from, to })
}

/// A duration the way the flags take it: `500ms`, `90s`, `25m`, `2h`.
pub(crate) fn show_duration(duration: Duration) -> String {
    let ms = duration.as_millis();
    if !ms.is_multiple_of(1_000) {
        format!("{ms}ms")
    } else if ms == 0 {
        "0s".to_owned()
    } else if ms.is_multiple_of(3_600_000) {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else {
        format!("{}s", ms / 1_000)
    }
}

/// What `soak` does with PostgreSQL's autovacuum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Autovacuum {
    /// Leave the server's setting alone.
    Keep,
    /// On for the run, the previous setting restored after.
    On,
}

/// A duration in whole seconds, at least one (`autovacuum_naptime`).
fn parse_naptime(text: &str) -> Result<Duration, String> {
    let naptime = parse_duration(text)?;
    if naptime < Duration::from_secs(1) || naptime.subsec_nanos() != 0 {
        return Err(format!(
            "{text:?}: autovacuum_naptime takes whole seconds, at least 1s"
        ));
    }
    Ok(naptime)
}

/// `90`, `90s`, `30m`, `2h`, `500ms`.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let duration = parse_offset(text)?;
    if duration.is_zero() {
        return Err(format!("{:?}: must be greater than zero", text.trim()));
    }
    Ok(duration)
}

/// A duration as [`parse_duration`] reads it, zero included (`0`, `0s`).
fn parse_offset(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: expected a number with an optional unit (ms, s, m, h)"))?;
    let duration = match unit {
        "ms" => Some(Duration::from_millis(number)),
        "" | "s" => Some(Duration::from_secs(number)),
        "m" => number.checked_mul(60).map(Duration::from_secs),
        "h" => number.checked_mul(3_600).map(Duration::from_secs),
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (ms, s, m, h)")),
    };
    duration.ok_or_else(|| format!("{text:?}: too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1_800)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7_200)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("5d").is_err());
        assert!(parse_duration("m").is_err());
    }

    fn window(from: u64, to: u64) -> Window {
        Window {
            from: Duration::from_secs(from),
            to: Duration::from_secs(to),
        }
    }

    #[test]
    fn windows_parse() {
        assert_eq!(parse_window("5m..25m"), Ok(window(300, 1_500)));
        assert_eq!(parse_window("0..90"), Ok(window(0, 90)));
        assert_eq!(parse_window(" 0s..1h "), Ok(window(0, 3_600)));
        assert_eq!(
            parse_window("500ms..2s"),
            Ok(Window {
                from: Duration::from_millis(500),
                to: Duration::from_secs(2),
            })
        );
        assert_eq!(window(300, 1_500).to_string(), "5m..25m");
    }

    #[test]
    fn bad_windows_are_refused_in_one_line() {
        for (text, expected) in [
            ("25m..5m", "FROM (25m) must be before TO (5m)"),
            ("5m..5m", "FROM (5m) must be before TO (5m)"),
            ("5m", "expected FROM..TO"),
            ("5m-25m", "expected FROM..TO"),
            ("..25m", "FROM"),
            ("5m..", "TO"),
            ("5m..25m..30m", "TO"),
            ("5x..25m", "unknown unit"),
            ("5m..0", "FROM (5m) must be before TO (0s)"),
            ("-5m..25m", "expected a number"),
            ("", "expected FROM..TO"),
        ] {
            let error = parse_window(text).expect_err(text);
            assert!(error.contains(expected), "{text:?}: {error}");
            assert!(!error.contains('\n'), "{text:?}: {error}");
        }
    }

    /// The soak's flags as the command line gives them.
    fn soak(flags: &[&str]) -> Result<SoakArgs, String> {
        #[derive(Debug, Parser)]
        struct Command {
            #[command(flatten)]
            soak: SoakArgs,
        }
        Command::try_parse_from(std::iter::once("soak").chain(flags.iter().copied()))
            .map(|c| c.soak)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn pressure_flags_are_checked_against_the_run() {
        let ok = soak(&[
            "--duration",
            "30m",
            "--idle-in-tx",
            "5m..25m",
            "--readers",
            "4",
        ])
        .expect("parses");
        assert_eq!(ok.check(), Ok(()));
        assert_eq!(ok.idle_in_tx, Some(window(300, 1_500)));
        assert_eq!(ok.readers_window(), window(0, 1_800));
        let edge = soak(&["--duration", "30m", "--idle-in-tx", "0..30m"]).expect("parses");
        assert_eq!(edge.check(), Ok(()));
        let windowed = soak(&["--readers", "2", "--readers-window", "1m..2m"]).expect("parses");
        assert_eq!(windowed.readers_window(), window(60, 120));

        let late = soak(&["--duration", "30m", "--idle-in-tx", "5m..40m"]).expect("parses");
        assert_eq!(
            late.check(),
            Err("--idle-in-tx 5m..40m ends after --duration 30m".to_owned())
        );
        let late = soak(&[
            "--duration",
            "90s",
            "--readers",
            "1",
            "--readers-window",
            "1m..2m",
        ])
        .expect("parses");
        assert_eq!(
            late.check(),
            Err("--readers-window 1m..2m ends after --duration 90s".to_owned())
        );
        let idle = soak(&["--readers-window", "1m..2m"]).expect("parses");
        assert_eq!(
            idle.check(),
            Err("--readers-window 1m..2m needs --readers N with N at least 1".to_owned())
        );
        let idle = soak(&["--readers", "0", "--readers-window", "1m..2m"]).expect("parses");
        assert!(idle.check().is_err());

        let error = soak(&["--idle-in-tx", "25m..5m"]).expect_err("refused");
        assert!(
            error.contains("FROM (25m) must be before TO (5m)"),
            "{error}"
        );
        let error = soak(&["--readers", "many"]).expect_err("refused");
        assert!(error.contains("--readers"), "{error}");
    }
}
