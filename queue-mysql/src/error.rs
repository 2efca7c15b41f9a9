//! `interpret_error`: the one place diesel errors become `QueueError`s, and
//! the bounded retry of failures that are safe to repeat.

use std::future::Future;

use diesel::result::{ConnectionError, DatabaseErrorKind, Error};
use queue_core::backend::{self, RetryPolicy};
use queue_core::{QueueError, Result};

/// What went wrong, as far as retrying is concerned.
#[derive(Debug)]
pub(crate) enum Failure {
    /// A diesel query error.
    Query(Error),
    /// No connection could be had from the pool.
    Pool(String),
    /// The database answered something the queue never writes.
    Invariant(&'static str),
    /// An error decided after the transaction read the database (a
    /// dependency unknown or failed, a corrupt value): it rolls back.
    Refused(QueueError),
    /// A job the batch depends on finished between the enqueue's lookup of
    /// its key and its lock: the enqueue's transaction runs again.
    Raced,
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Self::Query(error)
    }
}

/// diesel-async keeps the server's message but not its error code; these
/// messages are the same on MySQL 8 and MariaDB.
fn message(error: &Error) -> Option<&str> {
    match error {
        Error::DatabaseError(_, info) => Some(info.message()),
        _ => None,
    }
}

/// 1213 and 1205: InnoDB rolled the statement (or transaction) back. And
/// 1305 for a savepoint: a deadlock, or a Galera certification conflict,
/// met inside a nested transaction (a savepoint) rolls the whole
/// transaction back, so diesel's `ROLLBACK TO SAVEPOINT` then finds no
/// savepoint and reports that instead of the conflict.
fn is_lock_conflict(error: &Error) -> bool {
    message(error).is_some_and(|m| {
        m.starts_with("Deadlock found")
            || m.starts_with("Lock wait timeout exceeded")
            || m.starts_with("SAVEPOINT") && m.ends_with("does not exist")
    })
}

/// The driver lost or could not use its connection.
fn is_connection_loss(error: &Error) -> bool {
    matches!(error, Error::BrokenTransactionManager)
        || matches!(
            error,
            Error::DatabaseError(DatabaseErrorKind::ClosedConnection, _)
        )
        || message(error).is_some_and(|m| {
            m.starts_with("Input/output error") || m.contains("Connection") && m.contains("closed")
        })
}

/// Maps a diesel query error to the queue's error type: a lost connection
/// is [`QueueError::Unavailable`], a duplicate key [`QueueError::Conflict`],
/// everything else [`QueueError::Backend`] with the diesel error as source.
pub fn interpret_error(error: Error) -> QueueError {
    if is_connection_loss(&error) {
        return QueueError::unavailable(error);
    }
    match error {
        Error::DatabaseError(DatabaseErrorKind::UniqueViolation, ref info) => {
            QueueError::Conflict {
                reason: info.message().to_owned(),
            }
        }
        other => QueueError::backend(other),
    }
}

/// Maps a failure to connect: always [`QueueError::Unavailable`].
pub fn interpret_connection_error(error: ConnectionError) -> QueueError {
    QueueError::unavailable(error)
}

pub(crate) fn interpret_failure(failure: Failure) -> QueueError {
    match failure {
        Failure::Query(error) => interpret_error(error),
        Failure::Pool(message) => QueueError::unavailable(message),
        Failure::Invariant(what) => QueueError::backend(what),
        Failure::Refused(error) => error,
        Failure::Raced => QueueError::backend("a dependency kept finishing during the enqueue"),
    }
}

impl crate::MySqlStorage {
    /// Runs `operation` under [`RetryPolicy::STATEMENT`]: lock conflicts
    /// (any operation: InnoDB rolled it back) and, for `idempotent` ones,
    /// lost connections are tried again; then maps the error.
    ///
    /// A lost connection also drops every idle connection of the pool:
    /// it hands out a connection without a round trip to check it when it
    /// was used within [`crate::PING_IDLE_AFTER`], and diesel-async does
    /// not mark a connection whose server went away as broken, so the one
    /// that failed (back in the pool by now) and its like would otherwise
    /// fail again. Idle connections of a server that restarted are all
    /// dead; a connection lost alone costs the others a reconnect.
    pub(crate) async fn retrying<T, F, Fut>(&self, idempotent: bool, operation: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        backend::retrying(
            RetryPolicy::STATEMENT,
            |failure| {
                if matches!(failure, Failure::Query(error) if is_connection_loss(error)) {
                    drop(self.pool.retain(|_, _| false));
                }
                is_retryable(failure, idempotent)
            },
            tokio::time::sleep,
            operation,
        )
        .await
        .map_err(interpret_failure)
    }
}

fn is_retryable(failure: &Failure, idempotent: bool) -> bool {
    match failure {
        Failure::Query(error) => is_lock_conflict(error) || idempotent && is_connection_loss(error),
        Failure::Pool(_) | Failure::Invariant(_) | Failure::Refused(_) | Failure::Raced => false,
    }
}
