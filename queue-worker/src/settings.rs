//! The lease and backoff each queue runs with: its `queue_config` row's
//! (set through [`queue_core::Storage::configure_queue`], the CLI or the
//! dashboard) where set, else the worker's [`crate::QueueOptions`]. Read
//! again every [`crate::WorkerOptions::config_interval`].

use std::sync::{Arc, PoisonError};

use queue_core::{QueueConfig, Storage};
use tracing::{debug, warn};

use crate::shared::{Effective, QueueSlot, Shared};

/// What each queue runs with before any config is read: its options.
pub(crate) fn defaults(queues: &[QueueSlot]) -> Vec<Effective> {
    queues
        .iter()
        .map(|slot| Effective {
            lease: slot.options.lease,
            backoff: slot.options.backoff,
            concurrency_limited: false,
        })
        .collect()
}

/// Runs until `stop_all` fires.
pub(crate) async fn run<S: Storage>(shared: Arc<Shared<S>>) {
    let mut every = tokio::time::interval(shared.options.config_interval);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            () = shared.stop_all.cancelled() => return,
        }
        match shared.storage.queue_configs().await {
            Ok(configs) => apply(&shared, &configs),
            Err(error) => warn!(%error, "reading queue settings failed; keeping the last ones"),
        }
    }
}

fn apply<S>(shared: &Shared<S>, configs: &[QueueConfig]) {
    let mut fresh = defaults(&shared.queues);
    for (slot, effective) in shared.queues.iter().zip(fresh.iter_mut()) {
        if let Some(config) = configs.iter().find(|c| c.queue == slot.name) {
            effective.lease = config.limits.lease.unwrap_or(effective.lease);
            effective.backoff = config.limits.backoff.unwrap_or(effective.backoff);
            effective.concurrency_limited = config.limits.concurrency.is_some();
        }
    }
    let mut current = shared
        .effective
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if current
        .iter()
        .zip(&fresh)
        .any(|(a, b)| a.lease != b.lease || a.backoff != b.backoff)
    {
        debug!("queue settings changed");
    }
    *current = fresh;
}
