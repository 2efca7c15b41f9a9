//! Wake-up signals of pooled enqueues, sent after their commit.
//!
//! Nothing a worker needs is lost: a signal sent after the commit finds
//! the job visible, and a lost one delays the job only until the workers'
//! next poll. Why the signals wait for the commit, and when one does not:
//! docs/design-notes.md, "queue-postgres: signals after the commit".

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use sqlx::{PgPool, SqlStr};

use crate::exec::{Pooling, pooled};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// The sending side, shared by a storage's clones; the task starts on first
/// use, on the caller's runtime, and again if that runtime went away.
#[derive(Debug, Default)]
pub(crate) struct Signals {
    sender: Mutex<Option<UnboundedSender<String>>>,
    /// Pooled enqueues of the storage (and its clones) in flight.
    in_flight: AtomicUsize,
}

/// A pooled enqueue in flight; counted until dropped.
#[derive(Debug)]
pub(crate) struct InFlight<'s> {
    signals: &'s Signals,
    /// No other pooled enqueue of the storage was in flight when this one
    /// began: it notifies in its own statement.
    pub(crate) alone: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.signals.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Signals {
    /// Counts a pooled enqueue in flight until the guard drops.
    pub(crate) fn begin(&self) -> InFlight<'_> {
        let before = self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight {
            signals: self,
            alone: before == 0,
        }
    }

    /// Queues `queues` for the next round of signals.
    pub(crate) fn send(
        &self,
        pool: &PgPool,
        pooling: Pooling,
        statement: &SqlStr,
        queues: BTreeSet<String>,
    ) {
        if queues.is_empty() {
            return;
        }
        let mut sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        for queue in queues {
            let queue = match sender.as_ref() {
                Some(running) => match running.send(queue) {
                    Ok(()) => continue,
                    Err(failed) => failed.0,
                },
                None => queue,
            };
            // No task yet, or its runtime is gone: start one here.
            let (tx, rx) = unbounded_channel();
            tokio::spawn(run(pool.clone(), pooling, statement.clone(), rx));
            let _ = tx.send(queue);
            *sender = Some(tx);
        }
    }
}

/// Sends rounds of signals until every storage clone is dropped.
async fn run(
    pool: PgPool,
    pooling: Pooling,
    statement: SqlStr,
    mut queue_names: UnboundedReceiver<String>,
) {
    while let Some(first) = queue_names.recv().await {
        let mut round = BTreeSet::from([first]);
        while let Ok(more) = queue_names.try_recv() {
            round.insert(more);
        }
        let names: Vec<String> = round.into_iter().collect();
        // A failed round only delays those queues' jobs to the next poll.
        let _ = pooled(&pool, pooling)
            .execute(sqlx::query(statement.clone()).bind(&names))
            .await;
    }
}
