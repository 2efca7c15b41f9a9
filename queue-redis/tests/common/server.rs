//! A private `redis-server` child process on a free loopback port, for
//! tests that need a server configured their own way or restarted.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `redis-server`, killed and its directory removed on drop.
pub(crate) struct Server {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    args: Vec<String>,
}

/// A port nobody listens on right now.
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free loopback port")
}

impl Server {
    /// Starts `redis-server` with `args` added to its defaults (no RDB
    /// snapshots, its own directory) and waits until it accepts connections.
    pub(crate) fn start(args: &[&str]) -> Self {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("queue-redis-test-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory for the server");
        let mut server = Self {
            child: None,
            port,
            dir,
            args: args.iter().map(|a| (*a).to_owned()).collect(),
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot run redis-server ({error}): install it (apt-get install redis-server)"
                )
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "redis-server on port {} did not start",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's port.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>`, with `userinfo@` when given.
    pub(crate) fn url(&self, userinfo: &str) -> String {
        format!("redis://{userinfo}127.0.0.1:{}", self.port)
    }

    /// Kills the server at once (SIGKILL: no shutdown save, like a crash).
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the killed server again on the same port and directory.
    pub(crate) fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
