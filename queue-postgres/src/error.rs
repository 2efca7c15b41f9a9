//! `interpret_error`: the one place sqlx errors become `QueueError`s, and
//! the bounded retry of failures that are safe to repeat.

use std::future::Future;
use std::time::Duration;

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

/// Whether a statement may run again after failing with `error`.
///
/// Serialization failures and deadlocks rolled the statement back, so any
/// statement may repeat. A lost connection leaves unknown whether the
/// statement committed, so only `idempotent` ones repeat after it.
fn is_retryable(error: &sqlx::Error, idempotent: bool) -> bool {
    match error {
        sqlx::Error::Database(db) => db
            .code()
            .is_some_and(|code| ROLLED_BACK.contains(&code.as_ref())),
        sqlx::Error::Io(_) => idempotent,
        _ => false,
    }
}

/// How often a retryable failure is retried.
const RETRIES: u32 = 3;

/// Runs `statement`, retrying a retryable failure up to three times with a
/// short growing pause (10, 40, 160 ms), then maps the error.
pub(crate) async fn retrying<T, F, Fut>(idempotent: bool, mut statement: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, sqlx::Error>>,
{
    let mut retries = 0;
    loop {
        match statement().await {
            Ok(value) => return Ok(value),
            Err(error) if retries < RETRIES && is_retryable(&error, idempotent) => {
                retries += 1;
                tokio::time::sleep(Duration::from_millis(10 * 4u64.pow(retries - 1))).await;
            }
            Err(error) => return Err(interpret_error(error)),
        }
    }
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
            async move { Err(error()) }
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
