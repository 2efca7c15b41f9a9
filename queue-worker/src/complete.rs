//! The completer: applies acks (batched) and nacks, retrying through
//! outages so that no finished run is forgotten.

use std::sync::Arc;
use std::time::Duration;

use queue_core::{Ack, Capability, Lease, QueueError, Retry, Storage};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::shared::{Completion, Shared};

/// Failed calls tolerated once the worker is stopping, before giving up
/// (the lease then expires and the job is reclaimed and run again).
const GIVE_UP_WHEN_STOPPING: u32 = 10;

/// Pause after a failed completion call, doubling up to a second.
fn pause(failures: u32) -> Duration {
    Duration::from_millis(10u64 << failures.min(7)).min(Duration::from_secs(1))
}

/// Runs until `stop_all` fires and the channel holds nothing more.
pub(crate) async fn run<S: Storage>(
    shared: Arc<Shared<S>>,
    mut inbox: mpsc::UnboundedReceiver<Completion>,
) {
    let batch_size = shared.options.completion_batch;
    loop {
        let first = tokio::select! {
            biased;
            item = inbox.recv() => item,
            () = shared.stop_all.cancelled() => inbox.try_recv().ok(),
        };
        let Some(first) = first else { return };
        let mut batch = vec![first];
        // A finished job's lease counts against its queue's concurrency
        // limit until its ack commits: with a limited queue, no waiting
        // for more (the batch takes what has already arrived).
        let delay = if shared.any_concurrency_limited() {
            Duration::ZERO
        } else {
            shared.options.completion_delay
        };
        let deadline = tokio::time::sleep(delay);
        tokio::pin!(deadline);
        while batch.len() < batch_size {
            tokio::select! {
                biased;
                item = inbox.recv() => match item {
                    Some(item) => batch.push(item),
                    None => break,
                },
                () = &mut deadline => break,
            }
        }
        apply(&shared, batch).await;
    }
}

/// Applies the batch's acks in one call and its nacks and snoozes (one call
/// each, the storage has no batch form) concurrently with it and with each other, so
/// a burst of failures costs about one round trip, not one per job.
async fn apply<S: Storage>(shared: &Arc<Shared<S>>, batch: Vec<Completion>) {
    let mut acks = Vec::new();
    let mut nacks = tokio::task::JoinSet::new();
    for item in batch {
        match item {
            Completion::Ack { lease, result } => acks.push(Ack { lease, result }),
            Completion::Nack {
                lease,
                error,
                retry,
            } => {
                let shared = Arc::clone(shared);
                nacks.spawn(async move { nack(&shared, &lease, error, retry).await });
            }
            Completion::Snooze { lease, delay } => {
                let shared = Arc::clone(shared);
                if shared.storage.capabilities().supports(Capability::Snooze) {
                    nacks.spawn(async move { snooze(&shared, &lease, delay).await });
                } else {
                    // No snooze here: the job is put off as a failed attempt
                    // would be, by the delay asked for, spending an attempt.
                    warn!(
                        job_id = %lease.job_id,
                        "the handler snoozed a job, but this storage does not support \
                         snoozing jobs: it is retried after the delay as a failed attempt"
                    );
                    let error = json!({
                        "kind": "snooze_not_supported",
                        "delay_ms": u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    });
                    let retry = Retry::After(delay);
                    nacks.spawn(async move { nack(&shared, &lease, error, retry).await });
                }
            }
        }
    }
    ack_all(shared, acks).await;
    while nacks.join_next().await.is_some() {}
    // Leases just ended: a claim the concurrency limit narrowed (or
    // emptied) may take more now, rather than at the end of its idle wait.
    if shared.any_concurrency_limited() {
        shared.wake.notify_one();
    }
}

async fn ack_all<S: Storage>(shared: &Shared<S>, acks: Vec<Ack>) {
    if acks.is_empty() {
        return;
    }
    let mut failures = 0;
    loop {
        match shared.storage.ack_batch(&acks).await {
            Ok(acked) => {
                for (ack, ok) in acks.iter().zip(acked) {
                    if ok {
                        metrics::counter!("queue_jobs_completed_total").increment(1);
                    } else {
                        lease_lost(&ack.lease, "ack");
                    }
                }
                return;
            }
            Err(error) => {
                failures += 1;
                if shared.stop_all.is_cancelled() && failures >= GIVE_UP_WHEN_STOPPING {
                    warn!(%error, jobs = acks.len(), "ack failed while stopping; the leases will expire");
                    return;
                }
                warn!(%error, jobs = acks.len(), "ack failed; retrying");
                tokio::time::sleep(pause(failures)).await;
            }
        }
    }
}

async fn nack<S: Storage>(shared: &Shared<S>, lease: &Lease, error: Value, retry: Retry) {
    let mut failures = 0;
    loop {
        match shared.storage.nack(lease, error.clone(), retry).await {
            Ok(queue_core::NackOutcome::DeadLettered) => {
                metrics::counter!("queue_jobs_dead_lettered_total").increment(1);
                return;
            }
            Ok(queue_core::NackOutcome::Retrying { at }) => {
                debug!(job_id = %lease.job_id, %at, "retry scheduled");
                return;
            }
            Err(QueueError::LeaseLost { .. }) => {
                lease_lost(lease, "nack");
                return;
            }
            Err(error) => {
                failures += 1;
                if shared.stop_all.is_cancelled() && failures >= GIVE_UP_WHEN_STOPPING {
                    warn!(%error, job_id = %lease.job_id, "nack failed while stopping; the lease will expire");
                    return;
                }
                warn!(%error, job_id = %lease.job_id, "nack failed; retrying");
                tokio::time::sleep(pause(failures)).await;
            }
        }
    }
}

async fn snooze<S: Storage>(shared: &Shared<S>, lease: &Lease, delay: Duration) {
    let mut failures = 0;
    loop {
        match shared.storage.snooze(lease, delay).await {
            Ok(at) => {
                debug!(job_id = %lease.job_id, %at, "snoozed");
                return;
            }
            Err(QueueError::LeaseLost { .. }) => {
                lease_lost(lease, "snooze");
                return;
            }
            Err(error @ QueueError::InvalidInput { .. }) => {
                warn!(%error, job_id = %lease.job_id, "snooze refused; the lease will expire");
                return;
            }
            Err(error) => {
                failures += 1;
                if shared.stop_all.is_cancelled() && failures >= GIVE_UP_WHEN_STOPPING {
                    warn!(%error, job_id = %lease.job_id, "snooze failed while stopping; the lease will expire");
                    return;
                }
                warn!(%error, job_id = %lease.job_id, "snooze failed; retrying");
                tokio::time::sleep(pause(failures)).await;
            }
        }
    }
}

pub(crate) fn lease_lost(lease: &Lease, during: &'static str) {
    metrics::counter!("queue_lease_lost_total").increment(1);
    warn!(job_id = %lease.job_id, attempt = lease.attempt, during, "lease lost; result dropped");
}
