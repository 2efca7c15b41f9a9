//! Heartbeats: every in-flight lease of a queue extended in one call.

use std::sync::Arc;

use queue_core::{Lease, Storage};
use tracing::warn;

use crate::complete::lease_lost;
use crate::shared::Shared;

/// Runs until `stop_all` fires, every shortest lease in force / divisor.
pub(crate) async fn run<S: Storage>(shared: Arc<Shared<S>>) {
    loop {
        let Some(shortest) = (0..shared.queues.len())
            .map(|index| shared.effective(index).lease)
            .min()
        else {
            return;
        };
        let every = shortest / shared.options.heartbeat_divisor;
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = shared.stop_all.cancelled() => return,
        }
        beat(&shared).await;
    }
}

/// One round: one batched heartbeat per queue with runs in flight.
async fn beat<S: Storage>(shared: &Shared<S>) {
    for (index, slot) in shared.queues.iter().enumerate() {
        let leases: Vec<Lease> = shared
            .in_flight()
            .values()
            .filter(|run| run.queue == index)
            .map(|run| run.lease.clone())
            .collect();
        if leases.is_empty() {
            continue;
        }
        match shared
            .storage
            .heartbeat_batch(&leases, shared.effective(index).lease)
            .await
        {
            Ok(alive) => {
                for (lease, alive) in leases.iter().zip(alive) {
                    if !alive && shared.abandon(lease.job_id).is_some() {
                        lease_lost(lease, "heartbeat");
                    }
                }
            }
            // The next round tries again; a lease that expires meanwhile is
            // reported lost then.
            Err(error) => warn!(%error, queue = %slot.name, "heartbeat failed"),
        }
    }
}
