//! The dispatch loop: claim as many jobs as there are free slots.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use queue_core::{DequeueRequest, MAX_DEQUEUE_LIMIT, QueueError, QueueName, Storage};
use tracing::{trace, warn};

use crate::execute;
use crate::shared::Shared;

/// The first wait when nothing was found; it doubles up to the poll interval.
const IDLE_START: Duration = Duration::from_millis(10);

/// Runs until `stop_fetching` fires.
///
/// Each round claims, in one dequeue, up to each queue's free slots (plus
/// its prefetch) from every queue that has room, with a per-queue cap
/// ([`DequeueRequest::with_queue_limits`]); queues with different lease
/// durations are claimed in one dequeue per duration. It then waits for
/// a wake-up (an in-process enqueue, a freed slot, a backend notification
/// subscribed to by the worker itself) or for its idle back-off, which doubles
/// from 10 ms up to the poll interval and resets whenever jobs are found,
/// but never longer than until the next scheduled job is due
/// ([`Storage::next_due`]), so delayed jobs start on time.
pub(crate) async fn run<S: Storage>(shared: Arc<Shared<S>>) {
    let poll = shared.options.poll_interval;
    let mut idle = IDLE_START;
    let mut failures: u32 = 0;
    let mut next_due_supported = true;
    // When the last `next_due` said the next scheduled job is due.
    let mut expected_due: Option<Instant> = None;
    // The first claim waits for the start-up reclaim round. Run after it
    // (late, on a loaded machine), that round could requeue a lease this
    // worker had just taken, as soon as it expired: a job stalled by a
    // clock's jump would then read pending, not stalled.
    tokio::select! {
        () = shared.reclaimed.cancelled() => {}
        () = shared.stop_fetching.cancelled() => return,
    }
    while !shared.stop_fetching.is_cancelled() {
        // Registered before the claim, so a wake-up arriving while it runs
        // is seen right after it: the round that follows skips `next_due`
        // and the wait. (Dropped unpolled after a notification, it passes
        // the notification on, so none is lost.)
        let woken = shared.wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let mut found = false;
        let mut failed = false;
        let mut asked = Vec::new();
        // Let runs that are finishing free their slots first, so one claim
        // takes several jobs rather than one per freed slot.
        tokio::task::yield_now().await;
        // Room per queue (free slots plus prefetch, less jobs already
        // held), grouped by lease duration: one claim per group.
        let mut groups: BTreeMap<Duration, Vec<(usize, u32)>> = BTreeMap::new();
        for (index, slot) in shared.queues.iter().enumerate() {
            let room = (slot.slots.available_permits() + slot.options.prefetch)
                .saturating_sub(slot.waiting.load(Ordering::SeqCst))
                .min(MAX_DEQUEUE_LIMIT as usize);
            if room > 0 {
                let room = u32::try_from(room).unwrap_or(MAX_DEQUEUE_LIMIT);
                groups
                    .entry(shared.effective(index).lease)
                    .or_default()
                    .push((index, room));
            }
        }
        for (lease, members) in groups {
            if shared.stop_fetching.is_cancelled() {
                break;
            }
            let limits = members
                .iter()
                .map(|(index, room)| (shared.queues[*index].name.clone(), *room))
                .collect();
            let request =
                match DequeueRequest::with_queue_limits(limits, lease, shared.worker_id.clone()) {
                    Ok(request) => request,
                    Err(error) => {
                        warn!(%error, "invalid dequeue request");
                        continue;
                    }
                };
            asked.extend(request.queues().iter().cloned());
            let started = Instant::now();
            let claimed = shared.storage.dequeue(&request).await;
            let took = started.elapsed();
            metrics::histogram!("queue_fetch_seconds").record(took.as_secs_f64());
            match claimed {
                Ok(jobs) => {
                    trace!(
                        limit = request.limit(),
                        claimed = jobs.len(),
                        micros = took.as_micros() as u64,
                        "claimed"
                    );
                    found |= !jobs.is_empty();
                    for job in jobs {
                        shared.sampler.claimed(&job);
                        let index = members
                            .iter()
                            .map(|(index, _)| *index)
                            .find(|index| shared.queues[*index].name == job.queue);
                        let Some(index) = index else {
                            warn!(job_id = %job.id, queue = %job.queue, "claimed a job of a queue not asked for; released");
                            if let Some(lease) = job.lease() {
                                let _ = shared.storage.release(&lease).await;
                            }
                            continue;
                        };
                        // Beyond the free slots (prefetch), the job's task
                        // waits for one.
                        let permit = Arc::clone(&shared.queues[index].slots)
                            .try_acquire_owned()
                            .ok();
                        execute::spawn(&shared, index, job, permit);
                    }
                }
                Err(error) => {
                    failed = true;
                    warn!(%error, queues = request.queues().len(), "dequeue failed; backing off");
                }
            }
        }
        let wait = if failed {
            failures += 1;
            (IDLE_START * 2u32.saturating_pow(failures.min(10)))
                .min(poll.max(Duration::from_secs(5)))
        } else if found {
            failures = 0;
            idle = IDLE_START;
            expected_due = None;
            continue;
        } else {
            failures = 0;
            if notified_already(woken.as_mut()).await {
                idle = IDLE_START;
                continue;
            }
            let wait = idle;
            idle = (idle * 2).min(poll);
            match next_due(&shared, &asked, &mut next_due_supported).await {
                Some(due) => {
                    expected_due = Some(Instant::now() + due);
                    wait.min(due)
                }
                // Nothing scheduled, or the job expected came due between
                // the empty claim and `next_due` (the claim ran a few ms
                // before its time, `next_due` after, and a due job is not
                // "scheduled"). Rather than back off for the whole idle
                // wait (a MariaDB test saw a job start 650 ms late), keep
                // to the expected time; once it has passed, claim once at
                // once and forget it.
                None => match expected_due {
                    Some(at) => {
                        let now = Instant::now();
                        if at > now {
                            wait.min(at - now)
                        } else {
                            expected_due = None;
                            Duration::ZERO
                        }
                    }
                    None => wait,
                },
            }
        };
        trace!(wait_micros = wait.as_micros() as u64, "waiting");
        tokio::select! {
            () = &mut woken => idle = IDLE_START,
            () = tokio::time::sleep(wait) => {}
            () = shared.stop_fetching.cancelled() => {}
        }
    }
}

/// Whether `woken` was notified already (without waiting for it).
async fn notified_already(woken: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>) -> bool {
    tokio::select! {
        biased;
        () = woken => true,
        () = std::future::ready(()) => false,
    }
}

/// How long until the earliest scheduled job of `queues` is due, plus a
/// millisecond so the claim finds it due; `None` when nothing is scheduled,
/// or the storage cannot tell (then it is not asked again).
async fn next_due<S: Storage>(
    shared: &Shared<S>,
    queues: &[QueueName],
    supported: &mut bool,
) -> Option<Duration> {
    if queues.is_empty() || !*supported {
        return None;
    }
    match shared.storage.next_due(queues).await {
        Ok(due) => due.map(|d| d + Duration::from_millis(1)),
        Err(QueueError::NotSupported { .. }) => {
            *supported = false;
            None
        }
        Err(error) => {
            warn!(%error, "next_due failed; polling");
            None
        }
    }
}
