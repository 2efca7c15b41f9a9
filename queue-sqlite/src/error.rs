//! Mapping sqlx's SQLite errors to [`QueueError`].

use std::fmt;

use queue_core::QueueError;

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
