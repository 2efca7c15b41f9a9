//! Wake-up signals of pooled enqueues, sent after their commit.
//!
//! A NOTIFY inside a transaction makes its commit take a cluster-wide lock
//! that is held through the commit's WAL flush, so notifying transactions
//! commit one at a time: single-job enqueues from 16 clients fell from
//! 7,500 to 900 per second here with one `pg_notify` each (pgbench, the
//! same INSERT with and without it). Enqueues through the pool therefore
//! commit without one, and this task sends the signals afterwards from one
//! connection: each round sends every queue named since the last round in
//! one statement, so concurrent enqueues share it.
//!
//! A one-job enqueue that is the only one of its storage in flight notifies
//! in its own statement instead ([`Signals::begin`]): with nobody to serialize
//! against, the cluster-wide lock costs nothing, and the workers hear of
//! the job at its commit rather than one more round trip later (the
//! after-commit signal is a statement, and a commit, of its own). Enqueues
//! that overlap others of the storage, and batches (whose commits another
//! process's producers may be serialized against, and whose start latency
//! matters less), keep to the after-commit signal.
//!
//! Nothing is lost that a worker needs: a signal sent after the commit
//! finds the job visible, and a signal lost (the process stopped between
//! commit and signal, or the statement failed) delays the job only until
//! the workers' next poll. Enqueues in the caller's transaction
//! (`enqueue_in`) still notify inside it, the only way to signal exactly on
//! its commit and never on its rollback.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use sqlx::{PgPool, SqlStr};
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
    pub(crate) fn send(&self, pool: &PgPool, statement: &SqlStr, queues: BTreeSet<String>) {
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
            tokio::spawn(run(pool.clone(), statement.clone(), rx));
            let _ = tx.send(queue);
            *sender = Some(tx);
        }
    }
}

/// Sends rounds of signals until every storage clone is dropped.
async fn run(pool: PgPool, statement: SqlStr, mut queue_names: UnboundedReceiver<String>) {
    while let Some(first) = queue_names.recv().await {
        let mut round = BTreeSet::from([first]);
        while let Ok(more) = queue_names.try_recv() {
            round.insert(more);
        }
        let names: Vec<String> = round.into_iter().collect();
        // A failed round only delays those queues' jobs to the next poll.
        let _ = sqlx::query(statement.clone())
            .bind(&names)
            .execute(&pool)
            .await;
    }
}
