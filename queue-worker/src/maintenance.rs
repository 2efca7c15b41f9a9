//! Reclaim of stalled leases and pruning of history, in every worker.
//! Both are bounded batches with `SKIP LOCKED` in the backends, so any
//! number of workers may run them at once.

use std::sync::Arc;

use queue_core::{FinalStatus, MAX_BATCH, PruneRequest, Storage};
use tracing::{info, warn};

use crate::shared::Shared;

/// Batches per round at most, so one round stays short.
const ROUNDS: usize = 10;

/// Runs until `stop_all` fires.
pub(crate) async fn run<S: Storage>(shared: Arc<Shared<S>>) {
    let mut reclaim = tokio::time::interval(shared.options.reclaim_interval);
    let mut prune = tokio::time::interval(shared.options.prune_interval);
    loop {
        tokio::select! {
            _ = reclaim.tick() => reclaim_round(&shared).await,
            _ = prune.tick() => prune_round(&shared).await,
            () = shared.stop_all.cancelled() => return,
        }
    }
}

async fn reclaim_round<S: Storage>(shared: &Shared<S>) {
    for _ in 0..ROUNDS {
        match shared.storage.reclaim_stalled(MAX_BATCH).await {
            Ok(outcome) => {
                if outcome.total() > 0 {
                    info!(
                        requeued = outcome.requeued,
                        dead_lettered = outcome.dead_lettered,
                        "reclaimed stalled jobs"
                    );
                    metrics::counter!("queue_jobs_dead_lettered_total")
                        .increment(outcome.dead_lettered);
                    shared.wake.notify_one();
                }
                if outcome.total() < u64::from(MAX_BATCH) {
                    return;
                }
            }
            Err(error) => {
                warn!(%error, "reclaim failed");
                return;
            }
        }
    }
}

async fn prune_round<S: Storage>(shared: &Shared<S>) {
    let plans = [
        (FinalStatus::Completed, shared.options.completed_retention),
        (
            FinalStatus::DeadLetter,
            shared.options.dead_letter_retention,
        ),
        (FinalStatus::Discarded, shared.options.dead_letter_retention),
    ];
    for (status, older_than) in plans {
        let request = PruneRequest {
            older_than,
            status: Some(status),
            limit: MAX_BATCH,
        };
        for _ in 0..ROUNDS {
            match shared.storage.prune_history(&request).await {
                Ok(deleted) if deleted < u64::from(MAX_BATCH) => break,
                Ok(_) => {}
                Err(error) => {
                    warn!(%error, "prune failed");
                    return;
                }
            }
        }
    }
}
