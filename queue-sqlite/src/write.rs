//! Every write of the storage: one at a time per storage (and its
//! clones) on its write connection, retried on SQLITE_BUSY, as one
//! autocommit statement ([`write_statement!`]) or one `BEGIN IMMEDIATE`
//! transaction ([`write_tx!`]).

use queue_core::backend::RetryPolicy;

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
            $crate::write::BUSY,
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
