//! The command line.

use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::{Parser, Subcommand, ValueEnum};
use queue::{FinalStatus, JobState};

/// Operate a job queue in PostgreSQL or MySQL / MariaDB.
#[derive(Debug, Parser)]
#[command(name = "queue", version)]
pub(crate) struct Args {
    /// The database: postgres://… or mysql://… (mariadb://…).
    #[arg(
        long,
        env = "QUEUE_DATABASE_URL",
        global = true,
        hide_env_values = true
    )]
    pub(crate) database_url: Option<String>,
    /// A PostgreSQL standby to read from: stats, listings and job reads
    /// (and the dashboard's pages) come from it, behind the primary by its
    /// replay lag; every write and claim still goes to --database-url.
    #[arg(long, env = "QUEUE_READ_URL", global = true, hide_env_values = true)]
    pub(crate) read_url: Option<String>,
    /// The PostgreSQL schema holding the queue's tables (default `public`).
    #[arg(long, env = "QUEUE_SCHEMA", global = true)]
    pub(crate) schema: Option<String>,
    /// Print reads as JSON instead of text.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Create or upgrade the queue's tables (safe to repeat).
    Migrate,
    /// Add a job.
    Enqueue {
        /// The queue.
        queue: String,
        /// The payload as JSON; `-` or nothing reads it from standard input.
        payload: Option<String>,
        /// Higher runs first.
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        priority: i32,
        /// At most one live job per queue carries this key.
        #[arg(long)]
        unique_key: Option<String>,
        /// Attempts before the job becomes a dead letter.
        #[arg(long)]
        max_attempts: Option<u32>,
        /// Run after this delay (e.g. `90s`, `5m`, `2h`).
        #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "at")]
        delay: Option<Duration>,
        /// Run at this time (RFC 3339, e.g. `2030-01-01T09:00:00Z`).
        #[arg(long)]
        at: Option<DateTime<Utc>>,
        /// The job's group (a tenant, a customer), whose running jobs a
        /// group limit counts; on storages with group limits.
        #[arg(long)]
        group: Option<String>,
        /// A job (by id, live or finished) this one waits for; repeat for
        /// more. On storages with dependencies.
        #[arg(long = "depends-on", value_name = "ID")]
        depends_on: Vec<i64>,
        /// Run even if a dependency is dead-lettered, discarded or
        /// cancelled (by default the job is then cancelled).
        #[arg(long, requires = "depends_on")]
        run_if_dependency_fails: bool,
        /// Join the open batch whose callback is this job: the callback
        /// waits for this one too (refused once the batch has closed). On
        /// storages with batches.
        #[arg(long, value_name = "CALLBACK_ID")]
        joins: Option<i64>,
    },
    /// Live jobs per queue by state; a count that reaches the cap shows as
    /// "10,000+".
    Stats {
        /// Print again every this many seconds until interrupted.
        #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "2")]
        watch: Option<u64>,
        /// Count each state up to this many jobs (counting stops there, so
        /// a large cap costs time on a large backlog).
        #[arg(long, value_name = "N", default_value_t = queue::DEFAULT_COUNT_CAP,
              value_parser = clap::value_parser!(u64).range(1..))]
        cap: u64,
    },
    /// One job, live or finished.
    Show {
        /// The job's id.
        id: i64,
    },
    /// Finished jobs, newest first.
    History {
        /// Only this queue.
        #[arg(long)]
        queue: Option<String>,
        /// Only this final status.
        #[arg(long, value_enum)]
        status: Option<Status>,
        /// Only ids below this one (the `next` of the previous page).
        #[arg(long)]
        before: Option<i64>,
        /// Rows per page.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Search the payload.
        #[command(flatten)]
        search: Search,
    },
    /// Live jobs, newest first, by queue, state, id, unique key or a value
    /// in the payload.
    Jobs {
        /// Which jobs.
        #[command(flatten)]
        filter: JobSelection,
        /// Only ids below this one (the `next` of the previous page).
        #[arg(long)]
        before: Option<i64>,
        /// Jobs per page.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Search the payload.
        #[command(flatten)]
        search: Search,
    },
    /// Put dead letters back into their queue, attempts reset: one by id,
    /// or every one of `--queue` (or `--all`).
    Retry {
        /// The dead letter's id.
        id: Option<i64>,
        /// Every dead letter of this queue.
        #[arg(long, conflicts_with = "id")]
        queue: Option<String>,
        /// Every dead letter.
        #[arg(long, conflicts_with_all = ["id", "queue"])]
        all: bool,
        /// Do not ask for confirmation.
        #[arg(long, short)]
        yes: bool,
    },
    /// Move live jobs, in any state, to history as `discarded`: one by id,
    /// or every job a filter selects.
    Discard {
        /// The job's id.
        id: Option<i64>,
        /// Which jobs.
        #[command(flatten)]
        filter: JobSelection,
        /// Do not ask for confirmation.
        #[arg(long, short)]
        yes: bool,
    },
    /// Make scheduled jobs (delayed, or waiting to retry) available now: one
    /// by id, or every one a filter selects.
    RunNow {
        /// The job's id.
        id: Option<i64>,
        /// Which jobs.
        #[command(flatten)]
        filter: JobSelection,
        /// Do not ask for confirmation.
        #[arg(long, short)]
        yes: bool,
    },
    /// Cancel a live job: it goes to history as `cancelled`; a worker
    /// running it has its cancellation token fired.
    Cancel {
        /// The job's id.
        id: i64,
    },
    /// Set a queue's limits (every limit not given is lifted), enforced by
    /// every worker's claim on every host.
    Config {
        /// The queue.
        queue: String,
        /// At most this many of its jobs running at once, across all workers.
        #[arg(long)]
        concurrency: Option<u32>,
        /// At most this many jobs of one group (a job's group key) running
        /// at once, across all workers; on storages with group limits.
        #[arg(long)]
        group_concurrency: Option<u32>,
        /// Priority aging: a job waiting this long (e.g. `60s`, 1 s to 30
        /// days) is claimed as if one priority level higher, one more per
        /// period, so no level starves; on storages with priority aging.
        #[arg(long, value_parser = humantime::parse_duration)]
        priority_aging: Option<Duration>,
        /// Fair claiming between groups: within each priority level,
        /// claims serve the queue's groups in turn (the group served longest
        /// ago first), so one group's backlog cannot hold back the others;
        /// on storages with fair groups.
        #[arg(long)]
        fair_groups: bool,
        /// At most this many jobs started per second (fractions allowed).
        #[arg(long)]
        rate: Option<f64>,
        /// Jobs that may start at once after a quiet spell (default: the
        /// rate rounded up).
        #[arg(long, requires = "rate")]
        burst: Option<u32>,
        /// The lease workers take on its jobs (e.g. `45s`).
        #[arg(long, value_parser = humantime::parse_duration)]
        lease: Option<Duration>,
        /// Retry backoff: the first delay (e.g. `2s`).
        #[arg(long, value_parser = humantime::parse_duration)]
        backoff_base: Option<Duration>,
        /// Retry backoff: the longest delay (default one hour).
        #[arg(long, value_parser = humantime::parse_duration, requires = "backoff_base")]
        backoff_max: Option<Duration>,
        /// Retry backoff: the jitter fraction in [0, 1] (default 0.2).
        #[arg(long, requires = "backoff_base")]
        backoff_jitter: Option<f64>,
    },
    /// Give one group of a queue its own limit (replacing the queue's
    /// group concurrency for it), or lift it with `--clear`. The queue must
    /// be configured or paused first.
    GroupLimit {
        /// The queue.
        queue: String,
        /// The group key.
        group: String,
        /// At most this many of the group's jobs running at once.
        #[arg(required_unless_present = "clear")]
        limit: Option<u32>,
        /// Lift the group's own limit (the queue's group concurrency
        /// applies again).
        #[arg(long, conflicts_with = "limit")]
        clear: bool,
    },
    /// Give one group of a fair queue its own weight: each time its turn
    /// comes, it takes this many jobs in a row (1 without one); lift it
    /// with `--clear`. The queue must be configured or paused first.
    GroupWeight {
        /// The queue.
        queue: String,
        /// The group key.
        group: String,
        /// How many of the group's jobs a turn takes, 1 to 1000.
        #[arg(
            required_unless_present = "clear",
            allow_negative_numbers = true,
            value_parser = clap::value_parser!(u32).range(1..=i64::from(queue::MAX_GROUP_WEIGHT))
        )]
        weight: Option<u32>,
        /// Lift the group's own weight (weight 1 again).
        #[arg(long, conflicts_with = "weight")]
        clear: bool,
    },
    /// Every group's own limit and weight, by queue, then group.
    Groups,
    /// Every queue that is paused or has limits, with its settings.
    Queues,
    /// Periodic schedules that have fired: latest and next fire time.
    Schedules,
    /// Registered workers: host, pid, version, queues with their
    /// concurrency, start and last heartbeat; live or silent.
    Workers {
        /// A worker not heard from for this long is shown silent.
        #[arg(long, value_parser = humantime::parse_duration, default_value = "60s")]
        silent_after: Duration,
        /// A worker not heard from for this long is deleted from the
        /// registry (taken for dead).
        #[arg(long, value_parser = humantime::parse_duration, default_value = "10m")]
        forget_after: Duration,
    },
    /// Stop workers from claiming a queue's jobs.
    Pause {
        /// The queue.
        queue: String,
    },
    /// Let workers claim a paused queue's jobs again.
    Resume {
        /// The queue.
        queue: String,
    },
    /// Serve the web dashboard (and /metrics, /healthz) until interrupted.
    Dashboard {
        /// The address to listen on; other than loopback needs a token.
        #[arg(long, default_value = "127.0.0.1:8080")]
        bind: std::net::SocketAddr,
        /// Every request must carry this token (16+ URL-safe characters).
        #[arg(long, env = "QUEUE_DASHBOARD_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Refuse every mutation.
        #[arg(long)]
        read_only: bool,
        /// Pages update in place every this many seconds (at least 1); 0
        /// turns it off.
        #[arg(long, default_value_t = 5)]
        refresh: u64,
        /// Without a token, also answer to this Host (`name` or
        /// `name:port`, e.g. a reverse proxy's); repeatable. Others than
        /// localhost and loopback addresses are refused (DNS rebinding).
        #[arg(long = "allowed-host", value_name = "HOST")]
        allowed_hosts: Vec<String>,
        /// Mark the login cookie `Secure`: the dashboard is reached over
        /// HTTPS (a proxy's `X-Forwarded-Proto: https` marks it too).
        #[arg(long)]
        secure_cookie: bool,
    },
    /// Delete history rows finished longer ago than a retention.
    Prune {
        /// Keep rows younger than this (e.g. `7d`, `12h`).
        #[arg(long, value_parser = humantime::parse_duration)]
        older_than: Duration,
        /// Only rows of this final status.
        #[arg(long, value_enum)]
        status: Option<Status>,
    },
}

/// Which live jobs a command selects; every flag given must hold.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct JobSelection {
    /// Only this queue.
    #[arg(long)]
    pub(crate) queue: Option<String>,
    /// Only jobs in this state.
    #[arg(long, value_enum)]
    pub(crate) state: Option<State>,
    /// Only the job with this unique key.
    #[arg(long)]
    pub(crate) unique_key: Option<String>,
    /// Every live job (for bulk commands, which need a filter or this).
    #[arg(long)]
    pub(crate) all: bool,
}

impl JobSelection {
    /// Whether any filter (or `--all`) was given.
    pub(crate) fn is_given(&self) -> bool {
        self.all || self.queue.is_some() || self.state.is_some() || self.unique_key.is_some()
    }
}

/// A live job's state, as the command line spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum State {
    /// Ready to run.
    Pending,
    /// Waiting for its time (delayed, or backing off).
    Scheduled,
    /// Leased.
    Running,
    /// Lease expired, awaiting reclaim.
    Stalled,
    /// Out of attempts, awaiting reclaim.
    Exhausted,
    /// Waiting for the jobs it depends on.
    Waiting,
}

impl From<State> for JobState {
    fn from(state: State) -> Self {
        match state {
            State::Pending => JobState::Pending,
            State::Scheduled => JobState::Scheduled,
            State::Running => JobState::Running,
            State::Stalled => JobState::Stalled,
            State::Exhausted => JobState::Exhausted,
            State::Waiting => JobState::Waiting,
        }
    }
}

/// A final status, as the command line spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Status {
    /// Acked.
    Completed,
    /// Out of attempts, or failed for good.
    DeadLetter,
    /// Removed by an operator.
    Discarded,
    /// Cancelled by id.
    Cancelled,
}

impl From<Status> for FinalStatus {
    fn from(status: Status) -> Self {
        match status {
            Status::Completed => FinalStatus::Completed,
            Status::DeadLetter => FinalStatus::DeadLetter,
            Status::Discarded => FinalStatus::Discarded,
            Status::Cancelled => FinalStatus::Cancelled,
        }
    }
}

/// A search of the payload beside a listing's filters.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Search {
    /// Only rows whose payload holds this value: `payload.customer_id = 42`
    /// (a path of keys and `[index]`es; the value is JSON, or a bare word
    /// as a string).
    #[arg(long = "where", value_name = "MATCH")]
    pub(crate) payload: Option<String>,
    /// Read at most this many rows (a search says where to go on with
    /// `--before` when it stops there).
    #[arg(long, value_name = "ROWS", default_value_t = queue::DEFAULT_SEARCH_SCAN, requires = "payload")]
    pub(crate) scan: u32,
}
