//! Wake-ups: a storage's signal that jobs may be waiting, so that an idle
//! worker looks now instead of at its next poll.

use std::pin::Pin;

use futures_core::Stream;

use crate::{QueueName, Result};

/// Why a worker should look for jobs now.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Wakeup {
    /// Jobs became claimable in this queue: committed to it, retried from
    /// its dead letters, or the queue was resumed.
    Queue(QueueName),
    /// Signals may have been missed (the subscription reconnected): look at
    /// every queue.
    All,
    /// Job `0` was cancelled or discarded: a worker running it fires its
    /// cancellation token now instead of at its next heartbeat.
    Cancelled(crate::JobId),
}

impl Wakeup {
    /// True when a worker serving `queues` should look now.
    pub fn concerns(&self, queues: &[QueueName]) -> bool {
        match self {
            Self::Queue(queue) => queues.contains(queue),
            Self::All => true,
            Self::Cancelled(_) => false,
        }
    }
}

/// A storage's stream of [`Wakeup`]s, from [`crate::Storage::subscribe`].
///
/// An `Err` item is a passing failure (for example while the stream
/// reconnects): keep polling after a pause. When the stream ends, the
/// subscription is gone; subscribe again to get a new one.
pub type Wakeups = Pin<Box<dyn Stream<Item = Result<Wakeup>> + Send>>;
