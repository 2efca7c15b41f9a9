//! Several hosts in one URL, as libpq reads them
//! (`postgres://u@a:5432,b:5432/db?target_session_attrs=read-write`): the
//! storage connects to the first host that accepts writes and follows a
//! failover by itself. sqlx 0.9 reads one host per URL, so the hosts are
//! split here, each becomes its own connect options, and a watcher keeps
//! the pool's options on the host that accepts writes
//! (`Pool::set_connect_options`): new connections go there, and a
//! connection to the old primary fails its next statement and is dropped.
//!
//! The invariant: the pool only ever holds connections that were writable
//! when made (`after_connect` checks each one), so a claim never runs on a
//! standby; a standby promoted while a claim is in flight cannot give that
//! claim's job to a second lease, because the claim either committed on
//! the old primary (and, with a synchronous standby, on the new one too)
//! or did not happen.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use queue_core::{QueueError, Result};
use sqlx::postgres::{PgConnectOptions, PgPool};
use sqlx::{ConnectOptions, Connection, PgConnection, Row};

/// How often the watcher checks that the host it connects to still
/// accepts writes (one query on a connection of its own).
pub(crate) const WATCH_EVERY: Duration = Duration::from_millis(500);

/// How long a host may take to answer before it counts as unreachable.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The hosts of a URL, in its order, each with its own connect options.
#[derive(Debug, Clone)]
pub(crate) struct Hosts {
    /// `host:port` as written, and its options.
    candidates: Vec<(String, PgConnectOptions)>,
}

/// Splits `url` into its hosts when it names more than one; `None` for a
/// URL of one host (sqlx reads it as it is).
///
/// # Errors
/// [`QueueError::InvalidInput`] for a `target_session_attrs` other than
/// `read-write` or `primary` (the queue writes: a read-only session cannot
/// serve it), or a host that sqlx cannot read.
pub(crate) fn parse(url: &str) -> Result<Option<Hosts>> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Ok(None);
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((user, hosts)) => (format!("{user}@"), hosts),
        None => (String::new(), authority),
    };
    if !hosts.contains(',') {
        return Ok(None);
    }
    let tail = without_session_attrs(tail)?;
    let mut candidates = Vec::new();
    for host in hosts.split(',') {
        if host.is_empty() {
            return Err(QueueError::invalid("url", "a host of the list is empty"));
        }
        let single = format!("{scheme}://{userinfo}{host}{tail}");
        let options: PgConnectOptions = single
            .parse()
            .map_err(|e| QueueError::invalid("url", format!("host {host}: {e}")))?;
        candidates.push((host.to_owned(), options));
    }
    Ok(Some(Hosts { candidates }))
}

/// `tail` (path and query) without its `target_session_attrs`, which must
/// ask for a writable session if present.
fn without_session_attrs(tail: &str) -> Result<String> {
    let Some((path, query)) = tail.split_once('?') else {
        return Ok(tail.to_owned());
    };
    let mut kept = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("target_session_attrs", value)) => {
                if !matches!(value, "read-write" | "primary") {
                    return Err(QueueError::invalid(
                        "url",
                        format!(
                            "target_session_attrs={value}: the queue writes, so only read-write \
                             or primary can serve it"
                        ),
                    ));
                }
            }
            _ => kept.push(pair),
        }
    }
    Ok(if kept.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{}", kept.join("&"))
    })
}

impl Hosts {
    /// The first host, in the URL's order, that accepts writes now: its
    /// index and a connection to it.
    ///
    /// # Errors
    /// [`QueueError::Unavailable`] naming every host and why it was passed
    /// over (unreachable, a standby, read-only).
    pub(crate) async fn find_writable(&self) -> Result<(usize, PgConnection)> {
        let mut passed = Vec::new();
        for (index, (host, options)) in self.candidates.iter().enumerate() {
            match probe(options).await {
                Ok(conn) => return Ok((index, conn)),
                Err(why) => passed.push(format!("{host} ({why})")),
            }
        }
        Err(QueueError::unavailable(format!(
            "no host of the URL accepts writes: {}",
            passed.join(", ")
        )))
    }

    /// The same hosts, each connecting to database `name` (the server's
    /// `postgres` to create the one the URL names).
    pub(crate) fn with_database(&self, name: &str) -> Self {
        Self {
            candidates: (self.candidates.iter())
                .map(|(host, options)| (host.clone(), options.clone().database(name)))
                .collect(),
        }
    }

    /// The connect options of host `index`.
    pub(crate) fn options(&self, index: usize) -> &PgConnectOptions {
        &self.candidates[index].1
    }

    /// `host:port` of host `index`, as the URL writes it.
    pub(crate) fn name(&self, index: usize) -> &str {
        &self.candidates[index].0
    }
}

/// A connection to the host of `options` when it accepts writes, else why not.
async fn probe(options: &PgConnectOptions) -> std::result::Result<PgConnection, String> {
    let connect = options
        .clone()
        .log_statements(tracing::log::LevelFilter::Off);
    let mut conn = tokio::time::timeout(PROBE_TIMEOUT, connect.connect())
        .await
        .map_err(|_| format!("no answer within {PROBE_TIMEOUT:?}"))?
        .map_err(|e| format!("unreachable: {e}"))?;
    match writable(&mut conn).await {
        Ok(()) => Ok(conn),
        Err(why) => {
            let _ = conn.close().await;
            Err(why)
        }
    }
}

/// Whether the server of `conn` takes writes by default: not in recovery
/// (a standby), and `default_transaction_read_only` off.
pub(crate) async fn writable(conn: &mut PgConnection) -> std::result::Result<(), String> {
    // The simple query protocol: one message, no prepared statement, so
    // it is safe on any connection, PgBouncer's transaction pooling too.
    let row = tokio::time::timeout(
        PROBE_TIMEOUT,
        sqlx::raw_sql("SELECT pg_is_in_recovery(), current_setting('transaction_read_only')")
            .fetch_one(&mut *conn),
    )
    .await
    .map_err(|_| format!("no answer within {PROBE_TIMEOUT:?}"))?
    .map_err(|e| format!("failed: {e}"))?;
    let (recovery, read_only): (bool, String) = (
        row.try_get(0).map_err(|e| format!("failed: {e}"))?,
        row.try_get(1).map_err(|e| format!("failed: {e}"))?,
    );
    if recovery {
        Err("a standby".to_owned())
    } else if read_only == "on" {
        Err("read-only".to_owned())
    } else {
        Ok(())
    }
}

/// The watcher of a storage on several hosts: which host the pool
/// connects to, and the task that moves it. Dropped with the last clone of
/// the storage, which stops the task.
#[derive(Debug)]
pub(crate) struct Failover {
    hosts: Hosts,
    current: AtomicUsize,
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Failover {
    /// Watches `pool`, connected to host `current` through `probe`, and
    /// moves it to the host that accepts writes whenever that one stops.
    pub(crate) fn watch(
        hosts: Hosts,
        current: usize,
        probe: PgConnection,
        pool: PgPool,
    ) -> Arc<Self> {
        let failover = Arc::new(Self {
            hosts,
            current: AtomicUsize::new(current),
            task: std::sync::Mutex::new(None),
        });
        let weak = Arc::downgrade(&failover);
        let task = tokio::spawn(async move {
            let mut probe = Some(probe);
            loop {
                tokio::time::sleep(WATCH_EVERY).await;
                let Some(failover) = weak.upgrade() else {
                    return;
                };
                if pool.is_closed() {
                    return;
                }
                if let Some(conn) = probe.as_mut()
                    && writable(conn).await.is_ok()
                {
                    continue;
                }
                probe = failover.move_pool(&pool).await;
            }
        });
        *failover.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
        failover
    }

    /// Points `pool` at the first host that accepts writes now; returns a
    /// connection to it for the next checks, or `None` when no host does
    /// (the next turn looks again).
    async fn move_pool(&self, pool: &PgPool) -> Option<PgConnection> {
        match self.hosts.find_writable().await {
            Ok((index, conn)) => {
                let before = self.current.swap(index, Ordering::SeqCst);
                if before != index {
                    pool.set_connect_options(self.hosts.options(index).clone());
                    tracing::warn!(
                        from = self.hosts.name(before),
                        to = self.hosts.name(index),
                        "the host that accepts writes changed: new connections go to it"
                    );
                }
                Some(conn)
            }
            Err(error) => {
                tracing::warn!(%error, "looking for the host that accepts writes");
                None
            }
        }
    }

    /// `host:port` of the host the pool connects to now.
    pub(crate) fn current(&self) -> &str {
        self.hosts.name(self.current.load(Ordering::SeqCst))
    }
}

impl Drop for Failover {
    fn drop(&mut self) {
        if let Some(task) = self.task.lock().unwrap_or_else(|e| e.into_inner()).take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn one_host_is_left_to_sqlx() {
        assert!(parse("postgres://u@a:5432/db").expect("valid").is_none());
        assert!(parse("postgres://a/db?x=1").expect("valid").is_none());
    }

    #[test]
    fn each_host_gets_the_rest_of_the_url() {
        let hosts = parse(
            "postgres://u:p@a:5441,b:5442/db?target_session_attrs=read-write&application_name=q",
        )
        .expect("valid")
        .expect("two hosts");
        assert_eq!((hosts.name(0), hosts.name(1)), ("a:5441", "b:5442"));
        for (index, (host, port)) in [("a", 5441), ("b", 5442)].into_iter().enumerate() {
            let options = hosts.options(index);
            assert_eq!(options.get_host(), host);
            assert_eq!(options.get_port(), port);
            assert_eq!(options.get_database(), Some("db"));
            assert_eq!(options.get_username(), "u");
            assert_eq!(options.get_application_name(), Some("q"));
        }
    }

    #[test]
    fn a_read_only_session_cannot_serve_the_queue() {
        for attrs in ["read-only", "standby", "prefer-standby", "any"] {
            let error = parse(&format!("postgres://a,b/db?target_session_attrs={attrs}"))
                .expect_err("refused");
            assert!(error.to_string().contains(attrs), "{error}");
        }
        assert!(parse("postgres://a,,b/db").is_err(), "an empty host");
    }
}
