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
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: expected a number with an optional unit (ms, s, m, h)"))?;
    let duration = match unit {
        "ms" => Duration::from_millis(number),
        "" | "s" => Duration::from_secs(number),
        "m" => Duration::from_secs(number * 60),
        "h" => Duration::from_secs(number * 3_600),
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (ms, s, m, h)")),
    };
    if duration.is_zero() {
        return Err(format!("{text:?}: must be greater than zero"));
    }
    Ok(duration)
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
}
