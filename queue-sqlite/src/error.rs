//! Mapping sqlx's SQLite errors to [`QueueError`].

use std::fmt;

use queue_core::QueueError;
use queue_core::backend::RetryPolicy;

/// SQLite's primary result codes this backend tells apart.
const SQLITE_BUSY: &str = "5";
const SQLITE_LOCKED: &str = "6";

/// A database file that could not be opened or migrated: names the path.
#[derive(Debug)]
pub struct OpenError {
    path: String,
    source: sqlx::Error,
}

impl OpenError {
    pub(crate) fn new(path: impl Into<String>, source: sqlx::Error) -> Self {
        Self {
            path: path.into(),
            source,
        }
    }

    /// The database file (or `:memory:`) that failed.
    pub fn path(&self) -> &str {
        &self.path
    }
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SQLite database {}: {}", self.path, self.source)
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// True when SQLite reported the database busy or locked by another connection.
pub(crate) fn is_busy(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            let primary = code.parse::<i32>().map(|c| (c & 0xff).to_string());
            matches!(primary.as_deref(), Ok(SQLITE_BUSY | SQLITE_LOCKED))
        }),
        _ => false,
    }
}

/// Maps a sqlx error to the queue's error: busy and pool errors are
/// [`QueueError::Unavailable`] (worth retrying), the rest
/// [`QueueError::Backend`].
pub fn interpret_error(error: sqlx::Error) -> QueueError {
    if is_busy(&error) {
        return QueueError::unavailable(error);
    }
    match error {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
            QueueError::unavailable(error)
        }
        other => QueueError::backend(other),
    }
}

/// Maps an error met while opening or migrating `path`, naming the path.
pub(crate) fn open_error(path: &str, error: sqlx::Error) -> QueueError {
    let busy = is_busy(&error);
    let error = OpenError::new(path, error);
    if busy {
        QueueError::unavailable(error)
    } else {
        QueueError::backend(error)
    }
}

/// How a write transaction is tried again when SQLite says busy after its
/// own busy timeout (another process held the write lock through a
/// checkpoint, or a deferred reader could not upgrade): seven more tries,
/// after 5, 10, 20 … 320 ms.
pub(crate) const BUSY: RetryPolicy = RetryPolicy {
    retries: 7,
    first_pause: std::time::Duration::from_millis(5),
    growth: 2,
};

/// Runs `$body` (an async block using `$conn: &mut SqliteConnection` and
/// `$now: i64` microseconds) in a `BEGIN IMMEDIATE` transaction: a
/// [`write_statement!`] whose statements are that transaction's; evaluates
/// to `queue_core::Result` of the body's value.
macro_rules! write_tx {
    ($storage:expr, |$conn:ident, $now:ident| $body:expr) => {
        write_statement!($storage, |writer, at| async {
            let mut tx = ::sqlx::Connection::begin_with(&mut *writer, "BEGIN IMMEDIATE").await?;
            let value = {
                let $conn: &mut ::sqlx::SqliteConnection = &mut tx;
                let $now = at;
                $body.await?
            };
            tx.commit().await?;
            Ok::<_, ::sqlx::Error>(value)
        })
    };
}

/// Runs `$body` (an async block using `$conn: &mut SqliteConnection` and
/// `$now: i64` microseconds) on the storage's write connection (the
/// pool's in memory), one write of this storage (and its clones) at a time,
/// retried a bounded number of times on SQLITE_BUSY; evaluates to
/// `queue_core::Result` of the body's value. Writers of this process take
/// turns on the lock rather than in SQLite's busy handler, which sleeps
/// (1 ms, 2 ms, 5 ms …) between looks. A body of exactly one write
/// statement runs in SQLite's autocommit mode: it takes the write lock
/// before it reads and commits when it ends, as atomic as the same
/// statement in `BEGIN IMMEDIATE` … `COMMIT` without those round trips.
macro_rules! write_statement {
    ($storage:expr, |$conn:ident, $now:ident| $body:expr) => {{
        let storage = $storage;
        ::queue_core::backend::retrying(
            $crate::error::BUSY,
            $crate::error::is_busy,
            ::tokio::time::sleep,
            || async {
                let mut turn = storage.write_turn.lock().await;
                let mut pooled;
                let $conn: &mut ::sqlx::SqliteConnection = match turn.as_mut() {
                    Some(writer) => writer,
                    None => {
                        pooled = storage.pool.acquire().await?;
                        &mut pooled
                    }
                };
                let $now = storage.now_micros();
                $body.await
            },
        )
        .await
        .map_err($crate::interpret_error)
    }};
}
