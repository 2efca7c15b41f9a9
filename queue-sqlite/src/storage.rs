//! The SQLite storage type: opening the database and its options.

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use queue_core::{QueueError, Result};
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::error::open_error;
use crate::{migrate, sql};

/// How long a connection waits for another writer's lock before SQLite
/// reports the database busy.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections per pool for a file: SQLite has one writer at a time, so
/// more connections only add readers.
const FILE_CONNECTIONS: u32 = 8;

/// A job queue stored in SQLite.
///
/// Clones share one connection pool.
#[derive(Debug, Clone)]
pub struct SqliteStorage {
    pool: SqlitePool,
    path: String,
}

impl SqliteStorage {
    /// Opens the database at `url` and applies the embedded migrations.
    ///
    /// `sqlite::memory:` opens a private in-memory database (shared by the
    /// pool's connections, gone when the storage is dropped);
    /// `sqlite://path?mode=rwc` opens or creates a file. Files use WAL
    /// journaling and a busy timeout, so several processes can share one.
    ///
    /// A path that is a directory, a file that is not a database, or one
    /// that cannot be read or written returns an error naming the path,
    /// and nothing is left half-migrated.
    pub async fn connect(url: &str) -> Result<Self> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|error| QueueError::invalid("url", error.to_string()))?;
        let path = options.get_filename().display().to_string();
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        let options = options
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(false)
            .synchronous(SqliteSynchronous::Normal);
        let options = if in_memory {
            options
        } else {
            options.journal_mode(SqliteJournalMode::Wal)
        };
        let pool = SqlitePoolOptions::new()
            .max_connections(if in_memory { 1 } else { FILE_CONNECTIONS })
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options)
            .await
            .map_err(|error| open_error(&path, error))?;
        sqlx::query(sql::OPEN_CHECK)
            .execute(&pool)
            .await
            .map_err(|error| open_error(&path, error))?;
        migrate(&pool, &path).await?;
        Ok(Self { pool, path })
    }

    /// The connection pool, for the caller's own queries and transactions.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// The database file this storage opened (a generated name in memory).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The database's clock: UTC, microsecond precision.
    pub async fn database_now(&self) -> Result<DateTime<Utc>> {
        let micros: i64 = sqlx::query_scalar(sql::NOW_MICROS)
            .fetch_one(&self.pool)
            .await
            .map_err(crate::interpret_error)?;
        DateTime::from_timestamp_micros(micros)
            .ok_or_else(|| QueueError::backend(format!("SQLite clock out of range: {micros}")))
    }
}
