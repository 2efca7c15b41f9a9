//! LISTEN/NOTIFY wake-ups: enqueues announce their queue once per statement.

use queue_core::{QueueName, Result};
use sqlx::postgres::PgListener;

use crate::{PgStorage, interpret_error};

/// Why a worker should look for jobs now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wakeup {
    /// Jobs were committed to this queue (or it was resumed, or a dead
    /// letter of it was retried).
    Queue(QueueName),
    /// The listening connection was lost and re-established: signals may
    /// have been missed in between, so look at every queue.
    Reconnected,
}

/// A stream of [`Wakeup`]s on its own connection, reconnecting by itself.
#[derive(Debug)]
pub struct PgWakeups {
    listener: PgListener,
}

impl PgWakeups {
    /// Waits for the next wake-up.
    ///
    /// # Errors
    /// [`queue_core::QueueError::Unavailable`] when reconnecting failed; call
    /// again later to retry.
    pub async fn next(&mut self) -> Result<Wakeup> {
        loop {
            match self.listener.try_recv().await.map_err(interpret_error)? {
                None => return Ok(Wakeup::Reconnected),
                Some(notification) => {
                    // Payloads come only from our own statements; anything
                    // else on the channel is ignored.
                    if let Ok(queue) = QueueName::new(notification.payload()) {
                        return Ok(Wakeup::Queue(queue));
                    }
                }
            }
        }
    }
}

impl PgStorage {
    /// Listens on this storage's channel with a connection of its own.
    ///
    /// Signals are sent when the enqueueing transaction commits, never on
    /// rollback, at most once per statement for each queue it added jobs
    /// to: by the statement itself for [`PgStorage::enqueue_in`]; right
    /// after the commit, from a task of the storage that sends the queues
    /// of concurrent enqueues together, for enqueues through the pool (a
    /// NOTIFY inside a transaction serializes the commits of all notifying
    /// transactions; see the crate's README section on wake-ups).
    ///
    /// The listener holds one connection of the pool for as long as it
    /// lives (and takes another after a reconnect); drop it before awaiting
    /// `PgPool::close`, which waits for every connection to come back.
    ///
    /// # Errors
    /// [`queue_core::QueueError::Unavailable`] when the server cannot be reached.
    pub async fn listen(&self) -> Result<PgWakeups> {
        let mut listener = PgListener::connect_with(&self.pool)
            .await
            .map_err(interpret_error)?;
        listener
            .listen(self.channel())
            .await
            .map_err(interpret_error)?;
        Ok(PgWakeups { listener })
    }
}
