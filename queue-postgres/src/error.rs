//! `interpret_error`: the one place sqlx errors become `QueueError`s, and
//! the bounded retry of failures that are safe to repeat.

use std::future::Future;

use queue_core::backend::{self, RetryPolicy};
use queue_core::{QueueError, Result};

/// SQLSTATE of a unique violation.
const UNIQUE_VIOLATION: &str = "23505";
/// SQLSTATEs of a transaction the server rolled back to resolve a conflict.
const ROLLED_BACK: [&str; 2] = ["40001", "40P01"];

/// Maps a sqlx error to the queue's error type: connectivity problems are
/// [`QueueError::Unavailable`] (worth retrying later), unique violations
/// [`QueueError::Conflict`], everything else [`QueueError::Backend`] with
/// the sqlx error as its source.
pub fn interpret_error(error: sqlx::Error) -> QueueError {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => QueueError::unavailable(error),
        sqlx::Error::Database(ref db) if db.code().as_deref() == Some(UNIQUE_VIOLATION) => {
            QueueError::Conflict {
                reason: db.message().to_owned(),
            }
        }
        other => QueueError::backend(other),
    }
}

/// Why a statement of this crate failed: the driver's error, or a value
/// the queue refuses (a corrupt column, an invariant a statement broke).
/// Functions that run on a caller's connection return it, so that both
/// kinds travel to [`interpret_failure`] without passing as strings
/// through `sqlx::Error`.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The driver or the server failed.
    Query(sqlx::Error),
    /// The queue refused what the database returned.
    Queue(QueueError),
}

impl From<sqlx::Error> for Failure {
    fn from(error: sqlx::Error) -> Self {
        Self::Query(error)
    }
}

impl From<QueueError> for Failure {
    fn from(error: QueueError) -> Self {
        Self::Queue(error)
    }
}

/// Maps a [`Failure`] to the queue's error.
pub(crate) fn interpret_failure(failure: Failure) -> QueueError {
    match failure {
        Failure::Query(error) => interpret_error(error),
        Failure::Queue(error) => error,
    }
}

/// Whether a statement may run again after failing with `failure`.
///
/// Serialization failures and deadlocks rolled the statement back, so any
/// statement may repeat. A lost connection leaves unknown whether the
/// statement committed, so only `idempotent` ones repeat after it.
fn is_retryable(failure: &Failure, idempotent: bool) -> bool {
    match failure {
        Failure::Query(sqlx::Error::Database(db)) => db
            .code()
            .is_some_and(|code| ROLLED_BACK.contains(&code.as_ref())),
        Failure::Query(sqlx::Error::Io(_)) => idempotent,
        Failure::Query(_) | Failure::Queue(_) => false,
    }
}

/// Runs `statement` under [`RetryPolicy::STATEMENT`], retrying what
/// [`is_retryable`] allows, then maps the error.
pub(crate) async fn retrying<T, E, F, Fut>(idempotent: bool, statement: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Into<Failure>,
{
    let mut statement = statement;
    backend::retrying(
        RetryPolicy::STATEMENT,
        |failure| is_retryable(failure, idempotent),
        tokio::time::sleep,
        || {
            let run = statement();
            async move { run.await.map_err(Into::into) }
        },
    )
    .await
    .map_err(interpret_failure)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use queue_core::QueueError;

    use super::retrying;

    fn io_error() -> sqlx::Error {
        sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "reset",
        ))
    }

    async fn calls_until_error(idempotent: bool, error: fn() -> sqlx::Error) -> (u32, QueueError) {
        let calls = AtomicU32::new(0);
        let result: Result<(), _> = retrying(idempotent, || {
            calls.fetch_add(1, Ordering::SeqCst);
            async move { Err::<(), _>(error()) }
        })
        .await;
        (
            calls.load(Ordering::SeqCst),
            result.expect_err("always fails"),
        )
    }

    #[tokio::test]
    async fn a_lost_connection_is_retried_three_times_only_when_idempotent() {
        let (calls, error) = calls_until_error(true, io_error).await;
        assert_eq!(calls, 4);
        assert!(matches!(error, QueueError::Unavailable(_)), "{error:?}");
        let (calls, error) = calls_until_error(false, io_error).await;
        assert_eq!(calls, 1);
        assert!(error.is_transient());
    }

    #[tokio::test]
    async fn other_failures_are_not_retried() {
        let (calls, error) = calls_until_error(true, || sqlx::Error::RowNotFound).await;
        assert_eq!(calls, 1);
        assert!(matches!(error, QueueError::Backend(_)), "{error:?}");
    }

    #[tokio::test]
    async fn a_failure_that_clears_is_not_reported() {
        let calls = AtomicU32::new(0);
        let value = retrying(true, || {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            async move { if n < 2 { Err(io_error()) } else { Ok(n) } }
        })
        .await
        .expect("third call succeeds");
        assert_eq!(value, 2);
    }
}
