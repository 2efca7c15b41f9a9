//! The worker processes and what is done to them: SIGKILL (and a new
//! worker in its place), SIGSTOP past the lease then SIGCONT.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::Failure;
use crate::args::{Mode, RunArgs};

/// The running worker processes.
pub(crate) struct Workers {
    children: Vec<Child>,
    /// The worker command before and after its URL.
    command: (Vec<String>, Vec<String>),
    /// The URLs workers take in turn, and how many were started.
    urls: Vec<String>,
    started: usize,
}

impl Workers {
    /// Starts `args.workers` worker processes on `urls`, taken in turn.
    pub(crate) fn start(args: &RunArgs, urls: Vec<String>) -> Result<Self, Failure> {
        let backend = format!("{:?}", args.backend).to_lowercase();
        let mode = match args.mode {
            Mode::Transactional => "transactional",
            Mode::Plain => "plain",
        };
        let before = vec![
            "worker".to_owned(),
            "--backend".to_owned(),
            backend,
            "--url".to_owned(),
        ];
        let after = vec![
            "--mode".to_owned(),
            mode.to_owned(),
            "--lease".to_owned(),
            format!("{}ms", args.lease.as_millis()),
        ];
        if urls.is_empty() {
            return Err(Failure("no URL for the workers".to_owned()));
        }
        let mut workers = Self {
            children: Vec::new(),
            command: (before, after),
            urls,
            started: 0,
        };
        for _ in 0..args.workers {
            let child = workers.spawn()?;
            workers.children.push(child);
        }
        Ok(workers)
    }

    fn spawn(&mut self) -> Result<Child, Failure> {
        let exe = std::env::current_exe().map_err(|e| Failure(format!("own binary: {e}")))?;
        let url = &self.urls[self.started % self.urls.len()];
        self.started += 1;
        Command::new(exe)
            .args(&self.command.0)
            .arg(url)
            .args(&self.command.1)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Failure(format!("cannot start a worker: {e}")))
    }

    /// SIGKILLs a random worker and starts another in its place.
    pub(crate) fn kill_one(&mut self) -> Result<(), Failure> {
        let index = rand::random::<u32>() as usize % self.children.len();
        let mut replacement = self.spawn()?;
        std::mem::swap(&mut self.children[index], &mut replacement);
        let _ = replacement.kill();
        let _ = replacement.wait();
        Ok(())
    }

    /// The pid of a random worker, to freeze.
    pub(crate) fn random_pid(&self) -> u32 {
        self.children[rand::random::<u32>() as usize % self.children.len()].id()
    }

    /// Stops every worker.
    pub(crate) fn stop_all(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.children.clear();
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// Freezes the process `pid` for `pause`, then thaws it.
pub(crate) async fn freeze(pid: u32, pause: Duration) {
    let Ok(raw) = i32::try_from(pid) else { return };
    let pid = Pid::from_raw(raw);
    if kill(pid, Signal::SIGSTOP).is_ok() {
        tokio::time::sleep(pause).await;
        let _ = kill(pid, Signal::SIGCONT);
    }
}

/// Runs a shell command (the server's stop or start).
pub(crate) async fn shell(command: &str) -> Result<(), Failure> {
    let status = tokio::process::Command::new("sh")
        .args(["-c", command])
        .status()
        .await
        .map_err(|e| Failure(format!("`{command}`: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(Failure(format!("`{command}` failed: {status}")))
    }
}
