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
//! Nothing is lost that a worker needs: a signal sent after the commit
//! finds the job visible, and a signal lost (the process stopped between
//! commit and signal, or the statement failed) delays the job only until
//! the workers' next poll. Enqueues in the caller's transaction
//! (`enqueue_in`) still notify inside it, the only way to signal exactly on
//! its commit and never on its rollback.

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

use sqlx::{PgPool, SqlStr};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// The sending side, shared by a storage's clones; the task starts on first
/// use, on the caller's runtime, and again if that runtime went away.
#[derive(Debug, Default)]
pub(crate) struct Signals {
    sender: Mutex<Option<UnboundedSender<String>>>,
}

impl Signals {
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
