//! WAL checkpoints off the write path.
//!
//! By default SQLite checkpoints a WAL file inside the commit that takes it
//! past `wal_autocheckpoint` pages (1,000): that commit copies the WAL into
//! the database file and syncs the file, and the enqueue, claim or ack
//! behind it waits, tens of milliseconds on a disk. That was the p99 of the
//! add-to-start latency (12-14 ms from the enqueue call's start, against a
//! p50 of 0.6 ms). The storage's write connection therefore runs with
//! automatic checkpoints off, and a task of the storage checkpoints on a
//! pooled connection every [`CHECKPOINT_EVERY`], in `PASSIVE` mode (it never
//! waits for a reader or the writer), for as long as a clone of the storage
//! exists. Durability is unchanged: with `synchronous=NORMAL` the WAL is
//! synced at checkpoints, now this task's.

use std::sync::Arc;
use std::time::Duration;

use sqlx::SqlitePool;
use tokio::sync::oneshot;
use tokio::time::MissedTickBehavior;
use tracing::warn;

/// How often the WAL is checkpointed. A checkpoint with nothing to copy
/// returns at once; at the storage's write rates a quarter second of WAL is
/// a few thousand pages at most.
pub(crate) const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);

/// Stops the checkpoint task when the last clone of the storage holding it
/// is dropped.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    _stop: oneshot::Sender<()>,
}

/// Starts checkpointing the WAL of `pool`'s file (`path`, for messages).
pub(crate) fn spawn(pool: SqlitePool, path: String) -> Arc<Checkpointer> {
    let (stop, mut stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(CHECKPOINT_EVERY);
        every.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = every.tick() => {}
                _ = &mut stopped => return,
            }
            if let Err(error) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
                .execute(&pool)
                .await
            {
                warn!(%error, path, "WAL checkpoint failed; trying again");
            }
        }
    });
    Arc::new(Checkpointer { _stop: stop })
}
