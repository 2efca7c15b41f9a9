//! `queue`: operate a job queue from the shell.
//!
//! ```sh
//! export QUEUE_DATABASE_URL=postgres://app@127.0.0.1/app
//! queue migrate
//! queue enqueue emails '{"to": "ada"}' --delay 5m
//! queue stats --watch
//! queue show 42 --json
//! queue history --status dead-letter
//! queue retry 42
//! queue dashboard --bind 127.0.0.1:8080
//! ```
//!
//! Exit codes: 0 done, 1 the operation failed, 2 a usage error (including
//! input the queue rejects). Every error is one line on standard error.

mod args;
mod bulk;
mod commands;
mod flow;
mod output;
mod serve;
mod workers;

use std::process::ExitCode;

use clap::Parser;
use queue::QueueError;

use crate::args::Args;

/// Why the command stopped, and its exit code.
#[derive(Debug)]
pub(crate) struct CliError {
    code: u8,
    message: String,
}

impl CliError {
    /// A usage error (exit code 2).
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self {
            code: 2,
            message: message.into(),
        }
    }

    /// A failed operation (exit code 1).
    pub(crate) fn failed(message: impl Into<String>) -> Self {
        Self {
            code: 1,
            message: message.into(),
        }
    }
}

impl From<QueueError> for CliError {
    fn from(error: QueueError) -> Self {
        // Input the queue rejected is the caller's to fix: a usage error.
        let code = if matches!(error, QueueError::InvalidInput { .. }) {
            2
        } else {
            1
        };
        Self {
            code,
            message: one_line(&error.to_string()),
        }
    }
}

/// Folds a message onto one line.
fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(error) if !error.use_stderr() => {
            // --help and --version: clap's own output, exit 0.
            let _ = error.print();
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            let rendered = error.render().to_string();
            let first = rendered.lines().next().unwrap_or_default();
            eprintln!("queue: {}", first.trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    match commands::run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("queue: {}", one_line(&error.message));
            ExitCode::from(error.code)
        }
    }
}
