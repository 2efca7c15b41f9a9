//! WAL checkpoints off the write path.
//!
//! The write connection runs with automatic checkpoints off, and a task of
//! the storage checkpoints in `PASSIVE` mode every [`CHECKPOINT_EVERY`]
//! while a clone of the storage exists. Durability is unchanged. Why, with
//! the figures: docs/design-notes.md, "queue-sqlite: checkpoints".

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
