//! The command line.

use std::time::Duration;

use clap::{Args as ClapArgs, Parser, Subcommand, ValueEnum};

/// Runs worker processes through faults and checks the recorded history.
#[derive(Debug, Parser)]
#[command(name = "queue-chaos", version)]
pub(crate) struct Args {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// A whole run: workers, producer, faults, then the check.
    Run(RunArgs),
    /// One worker process (what `run` spawns; not for direct use).
    #[command(hide = true)]
    Worker(WorkerArgs),
}

/// A backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Backend {
    /// PostgreSQL: the run works in schema `queue_chaos`.
    Postgres,
    /// MySQL / MariaDB: the run works in the URL's database.
    Mysql,
    /// SQLite: the run works in the URL's file, recreated (no network, so
    /// no connection cuts and no server restart).
    Sqlite,
}

/// How a handler completes its job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Mode {
    /// The effect and the ack commit in one transaction: exactly one effect.
    Transactional,
    /// The effect commits, then the worker acks: a repeat only after a lost attempt.
    Plain,
}

/// What a run does.
#[derive(Debug, Clone, ClapArgs)]
pub(crate) struct RunArgs {
    /// The backend.
    #[arg(long, value_enum)]
    pub(crate) backend: Backend,
    /// The database (PostgreSQL: the database, created if missing; MySQL:
    /// the server and the run's database, recreated).
    #[arg(long)]
    pub(crate) url: Option<String>,
    /// The workers' databases, taken in turn by each worker started (the
    /// nodes of a multi-writer cluster, such as Galera's, each with the
    /// run's database); without them every worker uses `--url` (through
    /// the proxy that cuts). Needs `--cuts 0`.
    #[arg(long, value_delimiter = ',')]
    pub(crate) worker_urls: Vec<String>,
    /// Completion mode.
    #[arg(long, value_enum, default_value = "transactional")]
    pub(crate) mode: Mode,
    /// Worker processes.
    #[arg(long, default_value_t = 4)]
    pub(crate) workers: usize,
    /// How long faults and the producer run.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "60s")]
    pub(crate) duration: Duration,
    /// Jobs enqueued per second.
    #[arg(long, default_value_t = 200)]
    pub(crate) rate: u32,
    /// A random worker is SIGKILLed (and replaced) this often.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    pub(crate) kill_every: Duration,
    /// Workers frozen (SIGSTOP) past their lease, then thawed (SIGCONT).
    #[arg(long, default_value_t = 5)]
    pub(crate) freezes: u32,
    /// Times the proxy between workers and database drops or stalls every connection.
    #[arg(long, default_value_t = 20)]
    pub(crate) cuts: u32,
    /// Restart the database server once, mid-run, with these shell commands
    /// (`QUEUE_CHAOS_STOP` / `QUEUE_CHAOS_START`); without them no restart.
    #[arg(long, env = "QUEUE_CHAOS_STOP")]
    pub(crate) stop: Option<String>,
    /// See `--stop`.
    #[arg(long, env = "QUEUE_CHAOS_START")]
    pub(crate) start: Option<String>,
    /// Lease of every claim.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "2s")]
    pub(crate) lease: Duration,
    /// How long the queue may take to drain after the faults stop.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "180s")]
    pub(crate) drain_limit: Duration,
}

/// One worker process.
#[derive(Debug, Clone, ClapArgs)]
pub(crate) struct WorkerArgs {
    /// The backend.
    #[arg(long, value_enum)]
    pub(crate) backend: Backend,
    /// The database, through the proxy.
    #[arg(long)]
    pub(crate) url: String,
    /// Completion mode.
    #[arg(long, value_enum)]
    pub(crate) mode: Mode,
    /// Lease of every claim.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) lease: Duration,
}
