//! Reclaim of stalled leases and pruning of history, in every worker.
//! Both are bounded batches with `SKIP LOCKED` in the backends, so any
//! number of workers may run them at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use queue_core::{Capability, FinalStatus, MAX_BATCH, PruneRequest, Storage};
use tracing::{debug, info, warn};

use crate::shared::Shared;

/// Batches per round at most, so one round stays short.
const ROUNDS: usize = 10;

/// The pause before the next prune round when a round ended with history
/// still to delete (its last batch was full). Without it a round every
/// `prune_interval` deletes at most `ROUNDS` x `MAX_BATCH` rows per status,
/// and above that rate (28 jobs/s with the default hour) history grows
/// without bound whatever the retention.
const PRUNE_CATCH_UP: Duration = Duration::from_secs(1);

/// Runs until `stop_all` fires.
pub(crate) async fn run<S: Storage>(shared: Arc<Shared<S>>) {
    let mut reclaim = tokio::time::interval(shared.options.reclaim_interval);
    let mut next_prune = tokio::time::Instant::now();
    loop {
        // Biased: at start both are due, and the reclaim goes first, right
        // as the worker starts, rather than after a prune round. (Chosen at
        // random, it sometimes ran after the worker's first claims and
        // requeued a lease that had expired meanwhile on a manual clock.)
        tokio::select! {
            biased;
            _ = reclaim.tick() => {
                reclaim_round(&shared).await;
                shared.reclaimed.cancel();
            }
            () = tokio::time::sleep_until(next_prune) => {
                let pause = if prune_round(&shared).await {
                    PRUNE_CATCH_UP
                } else {
                    shared.options.prune_interval
                };
                next_prune = tokio::time::Instant::now() + pause;
            }
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

/// One round: up to [`ROUNDS`] batches per status. Returns whether history
/// is left to delete (a status's last batch was full).
async fn prune_round<S: Storage>(shared: &Shared<S>) -> bool {
    if !shared
        .storage
        .capabilities()
        .supports(Capability::PruneHistory)
    {
        return false;
    }
    let plans = [
        (FinalStatus::Completed, shared.options.completed_retention),
        (
            FinalStatus::DeadLetter,
            shared.options.dead_letter_retention,
        ),
        (FinalStatus::Discarded, shared.options.dead_letter_retention),
    ];
    let started = Instant::now();
    let mut more = false;
    let mut pruned: u64 = 0;
    for (status, older_than) in plans {
        let request = PruneRequest {
            older_than,
            status: Some(status),
            limit: MAX_BATCH,
        };
        let mut full = false;
        for _ in 0..ROUNDS {
            match shared.storage.prune_history(&request).await {
                Ok(deleted) => {
                    pruned += deleted;
                    full = deleted >= u64::from(MAX_BATCH);
                    if !full {
                        break;
                    }
                }
                Err(error) => {
                    warn!(%error, "prune failed");
                    return false;
                }
            }
        }
        more |= full;
    }
    debug!(
        pruned,
        millis = started.elapsed().as_millis() as u64,
        more,
        "prune round"
    );
    more
}
