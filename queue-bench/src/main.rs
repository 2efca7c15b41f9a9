//! `queue-bench`: throughput, latency and backlog figures of the job queue
//! on a real PostgreSQL or MySQL / MariaDB server.
//!
//! ```sh
//! cargo run --release -p queue-bench -- --backend postgres drain --concurrency 1,16,64
//! cargo run --release -p queue-bench -- --backend mysql --url mysql://root@127.0.0.1:3306/ enqueue
//! ```
//!
//! Every measurement starts from a freshly created schema (PostgreSQL) or
//! database (MySQL), named by `--schema`. Each result is printed as one
//! `result backend=... workload=... key=value ...` line as soon as it is
//! known, then all of them as a table. See `docs/benchmarks.md`.
//!
//! `queue-bench portable` (no other arguments; configured by its
//! environment) is the adapter of the public cross-system benchmark
//! hardbyte/postgresql-job-queue-benchmarking: see [`portable`].

mod args;
mod facade;
mod portable;
mod report;
mod stats;
mod target;
mod workloads;

use std::process::ExitCode;

use clap::Parser;
use queue_mysql::MySqlStorage;
use queue_postgres::PgStorage;
use queue_redis::RedisStorage;
use queue_sqlite::SqliteStorage;

use crate::args::{Args, Backend, Workload};
use crate::report::Report;
use crate::target::{Setup, Target};

/// Why a run stopped: a database error, or a run that did not verify.
#[derive(Debug)]
pub(crate) struct BenchError(String);

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for BenchError {
    fn from(message: String) -> Self {
        Self(message)
    }
}

impl From<&str> for BenchError {
    fn from(message: &str) -> Self {
        Self(message.to_owned())
    }
}

macro_rules! bench_error_from {
    ($($source:ty),*) => {$(
        impl From<$source> for BenchError {
            fn from(error: $source) -> Self {
                Self(error.to_string())
            }
        }
    )*};
}

bench_error_from!(
    queue_core::QueueError,
    sqlx::Error,
    mysql_async::Error,
    tokio::time::error::Elapsed
);

#[tokio::main]
async fn main() -> ExitCode {
    // The worker's and storages' warnings (a failed claim, a lost
    // connection) on standard error, apart from the results on standard
    // output; `RUST_LOG` chooses more (`RUST_LOG=queue_worker=debug`).
    // `portable`'s standard error is a harness's log file: no colours.
    let argv: Vec<String> = std::env::args().collect();
    let portable = argv.get(1).map(String::as_str) == Some("portable");
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(!portable)
        .init();
    if portable {
        return portable::main(&argv[2..]).await;
    }
    let args = Args::parse();
    let setup = Setup {
        url: args
            .url
            .clone()
            .unwrap_or_else(|| args.backend.default_url().to_owned()),
        schema: args.schema.clone(),
        pool: args.pool,
        notify: !args.no_notify,
        prefetch: args.prefetch,
        completion_batch: args.completion_batch,
        samples: !args.no_samples,
        backend: args.backend,
        keyless_indexed: !args.keyless_unindexed,
        async_claims: args.async_claims,
        transaction_pooling: args.transaction_pooling,
        listen_url: args.listen_url.clone(),
        wait_replicas: args.wait_replicas,
    };
    if args.wait_replicas.is_some() && (args.backend != Backend::Redis || args.facade) {
        eprintln!("queue-bench: --wait-replicas needs --backend redis without --facade");
        return ExitCode::FAILURE;
    }
    if args.async_claims && (args.backend != Backend::Postgres || args.facade) {
        eprintln!("queue-bench: --async-claims needs --backend postgres without --facade");
        return ExitCode::FAILURE;
    }
    if (args.transaction_pooling || args.listen_url.is_some())
        && (args.backend != Backend::Postgres || args.facade)
    {
        eprintln!(
            "queue-bench: --transaction-pooling and --listen-url need --backend postgres without --facade"
        );
        return ExitCode::FAILURE;
    }
    if args.keyless_unindexed && (args.backend != Backend::Postgres || args.facade) {
        eprintln!("queue-bench: --keyless-unindexed needs --backend postgres without --facade");
        return ExitCode::FAILURE;
    }
    if let Workload::Soak(soak) = &args.workload {
        let pressured = soak.idle_in_tx.is_some() || soak.readers > 0;
        if let Err(error) = soak.check() {
            eprintln!("queue-bench: {error}");
            return ExitCode::FAILURE;
        }
        if pressured && !matches!(args.backend, Backend::Postgres | Backend::Mysql) {
            eprintln!("queue-bench: --idle-in-tx and --readers need --backend postgres or mysql");
            return ExitCode::FAILURE;
        }
    }
    let outcome = match (args.backend, args.facade) {
        (_, true) => run::<queue::AnyStorage>(&args, &setup).await,
        (Backend::Postgres, false) => run::<PgStorage>(&args, &setup).await,
        (Backend::Mysql, false) => run::<MySqlStorage>(&args, &setup).await,
        (Backend::Sqlite, false) => run::<SqliteStorage>(&args, &setup).await,
        (Backend::Redis, false) => run::<RedisStorage>(&args, &setup).await,
    };
    match outcome {
        Ok(Some(report)) => {
            println!("{}", report.table());
            ExitCode::SUCCESS
        }
        Ok(None) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("queue-bench: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the workload and returns its report; in a worker process of
/// `hosts` (its environment says so), serves the parent instead and
/// returns none.
async fn run<T: Target>(args: &Args, setup: &Setup) -> Result<Option<Report>, BenchError> {
    if let Workload::Hosts(hosts) = &args.workload
        && std::env::var_os(workloads::hosts::HOST_VAR).is_some()
    {
        workloads::hosts::serve::<T>(hosts, setup).await?;
        return Ok(None);
    }
    let name = match (args.backend, args.facade) {
        (Backend::Postgres, true) => "postgres-facade",
        (Backend::Mysql, true) => "mysql-facade",
        _ => T::NAME,
    };
    let mut report = Report::new(name);
    report.settings(&workloads::settings::<T>(setup));
    workloads::run::<T>(&args.workload, setup, &mut report).await?;
    Ok(Some(report))
}
