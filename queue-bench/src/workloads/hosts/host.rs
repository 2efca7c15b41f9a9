//! One worker process of `hosts`: the parent's handle on it, and what the
//! process itself does ([`serve`]).
//!
//! One line at a time each way: the process says `ready` once its storage
//! is open, the parent answers `go`, later `stop`; the process answers
//! `done runs=R cancelled=C` after its worker's shutdown, and exits. A
//! process whose standard input closes (its parent gone) stops as on
//! `stop`; the parent kills a process it drops still running, so that
//! none outlives a failed or timed-out run.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use queue_worker::{JobContext, WorkerBuilder};
use tokio::sync::mpsc;

use crate::BenchError;
use crate::args::HostsArgs;
use crate::stats::process_ticks;
use crate::target::{Setup, Target};
use crate::workloads::{QUEUE, queue_options, worker_options};

/// Set (to the process's number) in the environment of the worker
/// processes a `hosts` run starts: they run [`serve`] instead of the
/// workload.
pub(crate) const HOST_VAR: &str = "QUEUE_BENCH_HOST";

/// How long a process may take to answer `stop` (its worker's shutdown
/// waits up to 30 s for running jobs) and to exit.
const STOP_LIMIT: Duration = Duration::from_secs(45);

/// A worker process started by the parent.
#[derive(Debug)]
pub(crate) struct Host {
    number: u32,
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::UnboundedReceiver<String>,
}

impl Host {
    /// Starts this binary again with the same command line and
    /// [`HOST_VAR`] set to `number`.
    pub(crate) fn spawn(number: u32) -> Result<Self, BenchError> {
        let exe =
            std::env::current_exe().map_err(|e| format!("the benchmark binary's path: {e}"))?;
        let mut child = Command::new(exe)
            .args(std::env::args_os().skip(1))
            .env(HOST_VAR, number.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting worker process {number}: {e}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("worker process {number} has no pipes").into());
        };
        let (send, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Self {
            number,
            child,
            stdin,
            lines,
        })
    }

    /// The rest of the process's next line that starts with `word`,
    /// waiting at most `limit`.
    pub(crate) async fn expect(
        &mut self,
        word: &str,
        limit: Duration,
    ) -> Result<String, BenchError> {
        let number = self.number;
        let lines = &mut self.lines;
        let next = async {
            while let Some(line) = lines.recv().await {
                if let Some(rest) = line.strip_prefix(word) {
                    return Ok(rest.trim().to_owned());
                }
            }
            Err(format!(
                "worker process {number} ended without saying {word:?}"
            ))
        };
        tokio::time::timeout(limit, next)
            .await
            .map_err(|_| format!("worker process {number} did not say {word:?} within {limit:?}"))?
            .map_err(BenchError::from)
    }

    /// Sends `word` as a line.
    pub(crate) fn tell(&mut self, word: &str) -> Result<(), BenchError> {
        writeln!(self.stdin, "{word}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("telling worker process {} {word:?}: {e}", self.number).into())
    }

    /// An error if the process has exited.
    pub(crate) fn check_running(&mut self) -> Result<(), BenchError> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => {
                Err(format!("worker process {} exited early: {status}", self.number).into())
            }
            Err(e) => Err(format!("worker process {}: {e}", self.number).into()),
        }
    }

    /// The CPU time the process has used, in clock ticks (Linux).
    pub(crate) fn cpu_ticks(&self) -> Option<u64> {
        process_ticks(self.child.id())
    }

    /// After [`Host::tell`] `stop`: waits for the process's report and its
    /// exit; the jobs its handler ran.
    pub(crate) async fn finish(mut self) -> Result<usize, BenchError> {
        let number = self.number;
        let done = self.expect("done", STOP_LIMIT).await?;
        let field = |key: &str| -> Result<usize, BenchError> {
            done.split_whitespace()
                .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))
                .and_then(|value| value.parse().ok())
                .ok_or_else(|| format!("worker process {number} said done {done:?}").into())
        };
        let (runs, cancelled) = (field("runs")?, field("cancelled")?);
        let until = Instant::now() + STOP_LIMIT;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < until => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Ok(None) => {
                    return Err(format!("worker process {number} did not exit").into());
                }
                Err(e) => return Err(format!("worker process {number}: {e}").into()),
            }
        };
        if !status.success() {
            return Err(format!("worker process {number} exited with {status}").into());
        }
        if cancelled > 0 {
            return Err(format!(
                "worker process {number}: {cancelled} runs were still going at shutdown"
            )
            .into());
        }
        Ok(runs)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// What a worker process does: opens its own storage, says `ready`, runs
/// a worker with a no-op handler on the queue from `go` to `stop` (or its
/// parent's end), then reports the jobs it ran.
pub(crate) async fn serve<T: Target>(args: &HostsArgs, setup: &Setup) -> Result<(), BenchError> {
    let mut commands = commands();
    let storage = T::open(setup).await?;
    // A connection made before the start, so the drain does not time it.
    storage.now().await?;
    println!("ready");
    match commands.recv().await.as_deref() {
        Some("go") => {}
        None => return Ok(()),
        Some(other) => return Err(format!("expected go, read {other:?}").into()),
    }
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&runs);
    let worker = WorkerBuilder::new(storage)
        .options(worker_options(setup))
        .queue(
            QUEUE,
            queue_options(setup, args.concurrency),
            move |_ctx: JobContext| {
                counted.fetch_add(1, Ordering::Relaxed);
                async { Ok(None) }
            },
        )?
        .start()?;
    // `stop`, or standard input closed: either way the run is over.
    let _ = commands.recv().await;
    let report = worker.shutdown(Duration::from_secs(30)).await;
    println!(
        "done runs={} cancelled={}",
        runs.load(Ordering::Relaxed),
        report.cancelled
    );
    Ok(())
}

/// The lines of standard input, read on a thread of their own; the
/// channel closes at its end.
fn commands() -> mpsc::UnboundedReceiver<String> {
    let (send, commands) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if send.send(line.trim().to_owned()).is_err() {
                break;
            }
        }
    });
    commands
}
