//! The worker's entry in the storage's worker registry
//! ([`queue_core::Capability::Workers`]): registered as the worker starts,
//! registered again every `reclaim_interval` as its heartbeat, and removed
//! when it shuts down cleanly. A worker that is killed stops refreshing
//! its entry, which listings then show silent and later forget.

use std::sync::Arc;

use queue_core::{QueueName, Storage, WorkerInfo, WorkerQueue};
use tracing::{debug, warn};

use crate::shared::Shared;

/// What this worker registers: its id, host, process id, this crate's
/// version and each queue with its concurrency.
pub(crate) fn info<S>(shared: &Shared<S>, started_at: chrono::DateTime<chrono::Utc>) -> WorkerInfo {
    WorkerInfo {
        id: shared.worker_id.clone(),
        host: host_name(),
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        queues: (shared.queues.iter())
            .map(|slot| entry(&slot.name, slot.options.concurrency))
            .collect(),
        started_at,
    }
}

fn entry(queue: &QueueName, concurrency: usize) -> WorkerQueue {
    WorkerQueue {
        queue: queue.clone(),
        concurrency: u32::try_from(concurrency)
            .unwrap_or(u32::MAX)
            .min(queue_core::MAX_WORKER_CONCURRENCY),
    }
}

/// The host's name as the registry accepts it: control characters and
/// surrounding white space dropped, cut to the longest name allowed;
/// `unknown` when nothing is left.
fn host_name() -> String {
    let raw = gethostname::gethostname();
    let cleaned: String = raw
        .to_string_lossy()
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    let mut host = cleaned.trim().to_owned();
    while host.len() > queue_core::MAX_NAME_BYTES {
        host.pop();
    }
    let host = host.trim_end().to_owned();
    if host.is_empty() {
        "unknown".to_owned()
    } else {
        host
    }
}

/// Registers `info` now and again every `reclaim_interval` until
/// `stop_all` fires. A registration in progress is never dropped half
/// way, so once this task has ended the shutdown's deregistration is the
/// last word.
pub(crate) async fn run<S: Storage>(shared: Arc<Shared<S>>, info: WorkerInfo) {
    let mut every = tokio::time::interval(shared.options.reclaim_interval);
    loop {
        tokio::select! {
            biased;
            () = shared.stop_all.cancelled() => return,
            _ = every.tick() => {}
        }
        match shared.storage.register_worker(&info).await {
            Ok(()) => debug!(worker_id = %info.id, "worker registered"),
            Err(error) => warn!(%error, "worker registration failed"),
        }
    }
}

/// Removes this worker's entry: the last step of a clean shutdown.
pub(crate) async fn deregister<S: Storage>(shared: &Shared<S>) {
    if let Err(error) = shared.storage.deregister_worker(&shared.worker_id).await {
        warn!(%error, "worker deregistration failed");
    }
}
