//! LISTEN/NOTIFY wake-ups: enqueues announce their queue once per statement,
//! cancels and discards of leased jobs their id on a second channel;
//! `Storage::subscribe` hands the listener to the worker.

use queue_core::{Capability, JobId, QueueError, QueueName, Result, Wakeup, Wakeups};
use sqlx::postgres::{PgListener, PgPoolOptions};

use crate::{PgStorage, interpret_error};

/// A stream of [`Wakeup`]s on its own connection, reconnecting by itself.
#[derive(Debug)]
pub struct PgWakeups {
    listener: PgListener,
    cancel_channel: String,
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
                None => return Ok(Wakeup::All),
                Some(notification) => {
                    // Payloads come only from our own statements; anything
                    // else on the channels is ignored.
                    if notification.channel() == self.cancel_channel {
                        if let Ok(id) = notification.payload().parse::<i64>() {
                            return Ok(Wakeup::Cancelled(JobId(id)));
                        }
                    } else if let Ok(queue) = QueueName::new(notification.payload()) {
                        return Ok(Wakeup::Queue(queue));
                    }
                }
            }
        }
    }
}

impl PgStorage {
    /// Listens on this storage's channels with a connection of its own: the
    /// wake-up channel ([`PgStorage::channel`], [`Wakeup::Queue`]) and the
    /// cancellation channel ([`PgStorage::cancel_channel`],
    /// [`Wakeup::Cancelled`], sent on the commit of a cancel or discard of
    /// a leased job).
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
    /// With [`PgStorage::with_listen_options`] it holds a connection of its
    /// own, made with those options, instead.
    ///
    /// # Errors
    /// - [`queue_core::QueueError::Unavailable`] when the server cannot be reached.
    /// - [`queue_core::QueueError::NotSupported`] in transaction pooling
    ///   ([`PgStorage::with_transaction_pooling`]) without listen options:
    ///   LISTEN through such a PgBouncer would receive nothing and hand
    ///   its notifications to other clients.
    pub async fn listen(&self) -> Result<PgWakeups> {
        let pool = match &self.listen {
            Some(options) => PgPoolOptions::new()
                .max_connections(1)
                .max_lifetime(None)
                .idle_timeout(None)
                .connect_with(options.0.clone())
                .await
                .map_err(interpret_error)?,
            None if self.has_wakeups() => self.pool.clone(),
            None => return Err(QueueError::not_supported(Capability::Wakeups, "listen")),
        };
        let mut listener = PgListener::connect_with(&pool)
            .await
            .map_err(interpret_error)?;
        listener
            .listen_all([self.channel(), self.cancel_channel()])
            .await
            .map_err(interpret_error)?;
        Ok(PgWakeups {
            listener,
            cancel_channel: self.cancel_channel().to_owned(),
        })
    }

    /// [`PgStorage::listen`] as the stream that `Storage::subscribe` returns.
    pub(crate) async fn wakeups(&self) -> Result<Wakeups> {
        let wakeups = self.listen().await?;
        Ok(Box::pin(futures_util::stream::unfold(
            wakeups,
            |mut wakeups| async move {
                let next = wakeups.next().await;
                Some((next, wakeups))
            },
        )))
    }
}
