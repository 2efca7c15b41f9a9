//! The storage's wake-ups, forwarded to the dispatcher (and cancellations
//! to the runs they name): the worker subscribes by itself, so no
//! application code pumps them.

use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

use queue_core::{QueueName, Storage, Wakeup, Wakeups};
use tracing::{debug, info, warn};

use crate::shared::Shared;

/// The pause after a failed subscription or a failed read, doubled up to
/// [`MAX_PAUSE`] while failures repeat.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// Subscribes, forwards every wake-up that concerns one of the worker's
/// queues, and subscribes again when the stream ends; returns when the
/// storage has no wake-ups or the worker stops fetching.
pub(crate) async fn run<S: Storage>(shared: Arc<Shared<S>>) {
    let queues: Vec<QueueName> = shared.queues.iter().map(|q| q.name.clone()).collect();
    let mut pause = FIRST_PAUSE;
    loop {
        let subscribed = tokio::select! {
            () = shared.stop_fetching.cancelled() => return,
            subscribed = shared.storage.subscribe() => subscribed,
        };
        match subscribed {
            Ok(None) => {
                debug!("the storage has no wake-ups; the worker polls");
                return;
            }
            Ok(Some(wakeups)) => {
                // Jobs committed before the subscription sent no signal we saw.
                shared.wake.notify_one();
                if forward(&shared, wakeups, &queues, &mut pause).await {
                    return;
                }
            }
            Err(error) => {
                warn!(%error, "subscribing to wake-ups failed; the worker polls meanwhile")
            }
        }
        if pause_or_stop(&shared, &mut pause).await {
            return;
        }
    }
}

/// Forwards one subscription's wake-ups until it ends (false) or the
/// worker stops fetching (true).
async fn forward<S: Storage>(
    shared: &Shared<S>,
    mut wakeups: Wakeups,
    queues: &[QueueName],
    pause: &mut Duration,
) -> bool {
    loop {
        let next = tokio::select! {
            () = shared.stop_fetching.cancelled() => return true,
            next = poll_fn(|cx| wakeups.as_mut().poll_next(cx)) => next,
        };
        match next {
            None => return false,
            Some(Ok(Wakeup::Cancelled(id))) => {
                *pause = FIRST_PAUSE;
                if let Some(lease) = shared.abandon(id) {
                    info!(job_id = %id, attempt = lease.attempt, "job cancelled; its token fired");
                    metrics::counter!("queue_jobs_cancelled_total").increment(1);
                }
            }
            Some(Ok(wakeup)) => {
                *pause = FIRST_PAUSE;
                if wakeup.concerns(queues) {
                    shared.wake.notify_one();
                }
                if wakeup == Wakeup::All {
                    debug!("wake-ups may have been missed; looking at every queue");
                }
            }
            Some(Err(error)) => {
                warn!(%error, "reading wake-ups failed; the worker polls meanwhile");
                if pause_or_stop(shared, pause).await {
                    return true;
                }
            }
        }
    }
}

/// Sleeps the current pause (then doubles it); true when the worker
/// stopped fetching meanwhile.
async fn pause_or_stop<S: Storage>(shared: &Shared<S>, pause: &mut Duration) -> bool {
    let sleep = *pause;
    *pause = (*pause * 2).min(MAX_PAUSE);
    tokio::select! {
        () = shared.stop_fetching.cancelled() => true,
        () = tokio::time::sleep(sleep) => false,
    }
}
