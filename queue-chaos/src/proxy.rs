//! A TCP proxy on loopback between the workers and the database that can
//! drop every open connection at once, or stall them all for a while.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The proxy: where it listens, and its two faults.
pub(crate) struct Proxy {
    port: u16,
    cuts: watch::Sender<u64>,
    stalled: watch::Sender<bool>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub(crate) async fn start(upstream: String) -> io::Result<Arc<Self>> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let (cuts, _) = watch::channel(0);
        let (stalled, _) = watch::channel(false);
        let proxy = Arc::new(Self {
            port,
            cuts,
            stalled,
        });
        let accepting = Arc::clone(&proxy);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let proxy = Arc::clone(&accepting);
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(&upstream).await {
                        proxy.join(client, server).await;
                    }
                });
            }
        });
        Ok(proxy)
    }

    /// The port the workers connect to.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Drops every connection open now.
    pub(crate) fn cut(&self) {
        self.cuts.send_modify(|n| *n += 1);
    }

    /// Stops forwarding for `pause`, on every connection, then resumes.
    pub(crate) async fn stall(&self, pause: Duration) {
        self.stalled.send_replace(true);
        tokio::time::sleep(pause).await;
        self.stalled.send_replace(false);
    }

    async fn join(&self, client: TcpStream, server: TcpStream) {
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let (client_read, client_write) = client.into_split();
        let (server_read, server_write) = server.into_split();
        let up = self.pump(client_read, server_write);
        let down = self.pump(server_read, client_write);
        // Either direction ending (or a cut) ends both: the halves drop.
        tokio::select! {
            () = up => {}
            () = down => {}
        }
    }

    async fn pump(&self, mut from: OwnedReadHalf, mut to: OwnedWriteHalf) {
        let mut cut = self.cuts.subscribe();
        let mut stalled = self.stalled.subscribe();
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            let read = tokio::select! {
                _ = cut.changed() => return,
                read = from.read(&mut buffer) => read,
            };
            let n = match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            while *stalled.borrow_and_update() {
                tokio::select! {
                    _ = cut.changed() => return,
                    changed = stalled.changed() => if changed.is_err() { return },
                }
            }
            if to.write_all(&buffer[..n]).await.is_err() {
                return;
            }
        }
    }
}
