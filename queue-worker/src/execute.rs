//! Running one claimed job: handler, timeout, panic, outcome.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use queue_core::{Job, Retry, Storage};
use serde_json::json;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, warn};

use crate::complete::lease_lost;
use crate::handler::{HandlerResult, JobContext};
use crate::shared::{Completion, InFlight, Shared};

/// Starts `job` (claimed for queue `queue`) on its own task; the permit
/// frees the slot when the run is over. Without a permit (a prefetched
/// job), the task first waits for a free slot; if the lease is given up
/// meanwhile (lost, or released at shutdown), it never runs.
pub(crate) fn spawn<S: Storage>(
    shared: &Arc<Shared<S>>,
    queue: usize,
    job: Job,
    permit: Option<OwnedSemaphorePermit>,
) {
    let Some(lease) = job.lease() else {
        warn!(job_id = %job.id, "claimed job without a lease; skipped");
        return;
    };
    let cancel = CancellationToken::new();
    let abandoned = Arc::new(AtomicBool::new(false));
    let abort = Arc::new(std::sync::Mutex::new(None));
    shared.in_flight().insert(
        job.id,
        InFlight {
            lease: lease.clone(),
            queue,
            cancel: cancel.clone(),
            abandoned: Arc::clone(&abandoned),
            abort: Arc::clone(&abort),
        },
    );
    let span = crate::trace::job_span(&job, lease.attempt);
    let available_at = job.available_at;
    let shared = Arc::clone(shared);
    let waiting = permit
        .is_none()
        .then(|| Arc::clone(&shared.queues[queue].waiting));
    if let Some(waiting) = &waiting {
        waiting.fetch_add(1, Ordering::SeqCst);
    }
    tokio::spawn(
        async move {
            let slot = &shared.queues[queue];
            let permit = match permit {
                Some(permit) => Some(permit),
                None => {
                    let acquired = tokio::select! {
                        permit = Arc::clone(&slot.slots).acquire_owned() => permit.ok(),
                        () = cancel.cancelled() => None,
                    };
                    if let Some(waiting) = &waiting {
                        waiting.fetch_sub(1, Ordering::SeqCst);
                    }
                    acquired
                }
            };
            let Some(permit) = permit.filter(|_| !abandoned.load(Ordering::SeqCst)) else {
                shared.in_flight().remove(&lease.job_id);
                lease_lost(&lease, "prefetch");
                shared.wake.notify_one();
                return;
            };
            metrics::counter!("queue_jobs_started_total", "queue" => slot.name.to_string()).increment(1);
            // Approximate: the worker's clock against the database's.
            let waited = (chrono::Utc::now() - available_at).to_std().unwrap_or_default();
            metrics::histogram!("queue_job_wait_seconds", "queue" => slot.name.to_string())
                .record(waited.as_secs_f64());
            let ctx = JobContext::new(job, lease.clone(), cancel.clone());
            let started = Instant::now();
            let result = run_handler(&shared, queue, ctx.clone(), &cancel, &abort).await;
            metrics::histogram!("queue_job_run_seconds", "queue" => slot.name.to_string())
                .record(started.elapsed().as_secs_f64());

            shared.in_flight().remove(&lease.job_id);
            if abandoned.load(Ordering::SeqCst) {
                lease_lost(&lease, "run");
            } else if !ctx.was_completed() {
                let completion = match result {
                    Ok(result) => Completion::Ack { lease, result },
                    Err(crate::JobError { snooze: Some(delay), .. }) => {
                        metrics::counter!("queue_jobs_snoozed_total", "queue" => slot.name.to_string())
                            .increment(1);
                        Completion::Snooze { lease, delay }
                    }
                    Err(error) => {
                        metrics::counter!("queue_jobs_failed_total", "queue" => slot.name.to_string())
                            .increment(1);
                        let retry = if error.retry {
                            let backoff = shared.effective(queue).backoff;
                            let delay = backoff.delay(ctx.attempt(), &mut rand::rng());
                            Retry::After(delay)
                        } else {
                            Retry::Never
                        };
                        Completion::Nack { lease, error: error.error, retry }
                    }
                };
                // The completer outlives every run; a send can only fail
                // once it stopped, and then the lease simply expires.
                let _ = shared.completions.send(completion);
            }
            drop(permit);
            shared.wake.notify_one();
        }
        .instrument(span),
    );
}

/// The handler's result, with panics and timeouts turned into failures.
async fn run_handler<S: Storage>(
    shared: &Shared<S>,
    queue: usize,
    ctx: JobContext,
    cancel: &CancellationToken,
    abort: &std::sync::Mutex<Option<tokio::task::AbortHandle>>,
) -> HandlerResult {
    let slot = &shared.queues[queue];
    let handler = Arc::clone(&slot.handler);
    let mut run = tokio::spawn(async move { handler.handle(ctx).await }.in_current_span());
    *abort
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(run.abort_handle());
    let joined = match slot.options.timeout {
        None => (&mut run).await,
        Some(timeout) => tokio::select! {
            joined = &mut run => joined,
            () = tokio::time::sleep(timeout) => {
                cancel.cancel();
                run.abort();
                return Err(crate::JobError {
                    error: json!({ "message": format!("timed out after {timeout:?}"), "timeout": true }),
                    retry: true,
                    snooze: None,
                });
            }
        },
    };
    match joined {
        Ok(result) => result,
        Err(error) if error.is_panic() => {
            let panic = error.into_panic();
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "the handler panicked".to_owned());
            Err(crate::JobError {
                error: json!({ "message": message, "panic": true }),
                retry: true,
                snooze: None,
            })
        }
        Err(_) => Err(crate::JobError::retry("the handler's task was cancelled")),
    }
}
