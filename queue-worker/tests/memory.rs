//! The worker's behaviour on the in-memory storage.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;
use queue_core::{Backoff, FinalStatus, HistoryFilter, ManualClock, NewJob, Storage};
use queue_testkit::MemoryStorage;
use queue_testkit::suite::acks_of;
use queue_worker::{
    JobContext, JobError, QueueOptions, TypedJob, WorkerBuilder, WorkerOptions, typed,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Waits up to 20 s for `done`, polling every 10 ms.
async fn wait_until<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let until = Instant::now() + Duration::from_secs(20);
    while !done().await {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_jobs_start_on_time_without_polling() {
    common::delayed_jobs_start_on_time_without_polling(Arc::new(MemoryStorage::new())).await;
}

async fn live(storage: &MemoryStorage) -> u64 {
    storage
        .stats()
        .await
        .expect("stats")
        .iter()
        .map(|s| s.live())
        .sum()
}

async fn history(storage: &MemoryStorage) -> Vec<queue_core::HistoryRecord> {
    let filter = HistoryFilter {
        limit: queue_core::MAX_PAGE_SIZE,
        ..HistoryFilter::default()
    };
    storage
        .list_history(&filter)
        .await
        .expect("history")
        .records
}

fn fast_backoff() -> Backoff {
    Backoff::new(
        Duration::from_millis(1),
        Duration::ZERO,
        Duration::from_millis(5),
        0.2,
    )
    .expect("valid")
}

fn options(concurrency: usize) -> QueueOptions {
    QueueOptions {
        concurrency,
        backoff: fast_backoff(),
        ..QueueOptions::default()
    }
}

fn quick() -> WorkerOptions {
    WorkerOptions {
        poll_interval: Duration::from_millis(20),
        ..WorkerOptions::default()
    }
}

async fn ok(ctx: JobContext) -> queue_worker::HandlerResult {
    Ok(Some(json!({ "done": ctx.payload().clone() })))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_job_of_every_queue_completes_exactly_once() {
    let storage = Arc::new(MemoryStorage::new());
    let mut builder = WorkerBuilder::from_arc(Arc::clone(&storage)).options(quick());
    for queue in ["a", "b", "c"] {
        builder = builder.queue(queue, options(8), ok).expect("queue");
    }
    let worker = builder.start().expect("start");
    for i in 0..300 {
        let queue = ["a", "b", "c"][i % 3];
        worker
            .enqueue(NewJob::new(queue, json!(i)).priority((i % 5) as i32))
            .await
            .expect("enqueue");
    }
    wait_until("all jobs archived", || async {
        history(&storage).await.len() == 300
    })
    .await;
    worker.shutdown(Duration::from_secs(5)).await;
    let records = history(&storage).await;
    assert!(
        records
            .iter()
            .all(|r| r.status == FinalStatus::Completed && r.attempts == 1)
    );
    assert!(
        records
            .iter()
            .all(|r| r.result == Some(json!({ "done": r.payload.clone() })))
    );
    assert_eq!(live(&storage).await, 0);
}

#[tokio::test]
async fn a_failing_job_retries_with_backoff_then_becomes_a_dead_letter() {
    let storage = Arc::new(MemoryStorage::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&runs);
    let worker = WorkerBuilder::from_arc(Arc::clone(&storage))
        .options(quick())
        .queue("q", options(2), move |ctx: JobContext| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move {
                Err::<Option<serde_json::Value>, _>(JobError::retry(format!(
                    "boom {}",
                    ctx.attempt()
                )))
            }
        })
        .expect("queue")
        .start()
        .expect("start");
    let id = worker
        .enqueue(NewJob::new("q", json!(1)).max_attempts(3))
        .await
        .expect("enqueue")
        .id;
    wait_until("dead letter", || async {
        storage.get_history(id).await.expect("history").is_some()
    })
    .await;
    worker.shutdown(Duration::from_secs(5)).await;
    let record = storage
        .get_history(id)
        .await
        .expect("history")
        .expect("record");
    assert_eq!(
        (record.status, record.attempts),
        (FinalStatus::DeadLetter, 3)
    );
    assert_eq!(record.last_error, Some(json!({ "message": "boom 3" })));
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_job_that_fails_twice_then_succeeds_is_completed_on_its_third_attempt() {
    let storage = Arc::new(MemoryStorage::new());
    let worker = WorkerBuilder::from_arc(Arc::clone(&storage))
        .options(quick())
        .queue("q", options(2), |ctx: JobContext| async move {
            if ctx.attempt() < 3 {
                Err(JobError::retry("not yet"))
            } else {
                Ok(Some(json!(ctx.attempt())))
            }
        })
        .expect("queue")
        .start()
        .expect("start");
    let id = worker
        .enqueue(NewJob::new("q", json!(1)).max_attempts(5))
        .await
        .expect("enqueue")
        .id;
    wait_until("completion", || async {
        storage.get_history(id).await.expect("history").is_some()
    })
    .await;
    worker.shutdown(Duration::from_secs(5)).await;
    let record = storage
        .get_history(id)
        .await
        .expect("history")
        .expect("record");
    assert_eq!(
        (record.status, record.attempts, record.result),
        (FinalStatus::Completed, 3, Some(json!(3)))
    );
    assert_eq!(
        record.last_error,
        Some(json!({ "message": "not yet" })),
        "the last failure stays visible"
    );
}

#[tokio::test]
async fn a_discarded_error_dead_letters_at_once_and_a_panic_is_a_failed_attempt() {
    let storage = Arc::new(MemoryStorage::new());
    let worker = WorkerBuilder::from_arc(Arc::clone(&storage))
        .options(quick())
        .queue("discard", options(1), |_ctx: JobContext| async move {
            Err::<Option<serde_json::Value>, _>(JobError::discard("bad input"))
        })
        .expect("queue")
        .queue("panic", options(1), |ctx: JobContext| async move {
            if ctx.attempt() == 1 {
                panic!("handler blew up on attempt {}", ctx.attempt());
            }
            Ok(Some(json!("recovered")))
        })
        .expect("queue")
        .start()
        .expect("start");
    let discarded = worker
        .enqueue(NewJob::new("discard", json!(1)).max_attempts(10))
        .await
        .expect("enqueue")
        .id;
    let panicked = worker
        .enqueue(NewJob::new("panic", json!(1)).max_attempts(10))
        .await
        .expect("enqueue")
        .id;
    wait_until("both finished", || async {
        storage.get_history(discarded).await.expect("h").is_some()
            && storage.get_history(panicked).await.expect("h").is_some()
    })
    .await;
    worker.shutdown(Duration::from_secs(5)).await;
    let record = storage.get_history(discarded).await.expect("h").expect("r");
    assert_eq!(
        (record.status, record.attempts),
        (FinalStatus::DeadLetter, 1)
    );
    let record = storage.get_history(panicked).await.expect("h").expect("r");
    assert_eq!(
        (record.status, record.attempts),
        (FinalStatus::Completed, 2)
    );
    assert_eq!(
        record.last_error,
        Some(json!({ "message": "handler blew up on attempt 1", "panic": true }))
    );
}

#[tokio::test]
async fn a_run_past_its_timeout_fails_and_has_its_token_fired() {
    let storage = Arc::new(MemoryStorage::new());
    let fired = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&fired);
    let worker = WorkerBuilder::from_arc(Arc::clone(&storage))
        .options(quick())
        .queue(
            "slow",
            QueueOptions {
                timeout: Some(Duration::from_millis(50)),
                ..options(1)
            },
            move |ctx: JobContext| {
                let seen = Arc::clone(&seen);
                async move {
                    let token = ctx.cancellation().clone();
                    tokio::spawn(async move {
                        token.cancelled().await;
                        seen.fetch_add(1, Ordering::SeqCst);
                    });
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    Ok(None)
                }
            },
        )
        .expect("queue")
        .start()
        .expect("start");
    let id = worker
        .enqueue(NewJob::new("slow", json!(1)).max_attempts(1))
        .await
        .expect("enqueue")
        .id;
    wait_until("timeout", || async {
        storage.get_history(id).await.expect("h").is_some()
    })
    .await;
    worker.shutdown(Duration::from_secs(5)).await;
    let record = storage.get_history(id).await.expect("h").expect("r");
    assert_eq!(record.status, FinalStatus::DeadLetter);
    assert_eq!(
        record.last_error.as_ref().and_then(|e| e.get("timeout")),
        Some(&json!(true))
    );
    wait_until("token fired", || async {
        fired.load(Ordering::SeqCst) == 1
    })
    .await;
}

#[tokio::test]
async fn a_lost_lease_fires_the_token_and_the_late_result_is_dropped() {
    let clock = ManualClock::new(Utc::now());
    let storage = Arc::new(MemoryStorage::with_clock(clock.clone()));
    common::lost_lease_fires_the_token_and_drops_the_result(storage, clock).await;
}

#[tokio::test]
async fn shutdown_waits_for_running_jobs_then_releases_the_rest() {
    common::shutdown_acks_the_finished_and_releases_the_stuck(Arc::new(MemoryStorage::new())).await;
}

#[derive(Debug, Serialize, Deserialize)]
struct SendEmail {
    to: String,
}

impl TypedJob for SendEmail {
    const QUEUE: &'static str = "emails";
}

#[tokio::test]
async fn typed_jobs_are_decoded_and_a_bad_payload_is_reported() {
    let storage = Arc::new(MemoryStorage::new());
    let worker = WorkerBuilder::from_arc(Arc::clone(&storage))
        .options(quick())
        .queue(
            SendEmail::QUEUE,
            options(2),
            typed(|email: SendEmail, _ctx: JobContext| async move {
                Ok(Some(json!({ "sent": email.to })))
            }),
        )
        .expect("queue")
        .start()
        .expect("start");
    let good = worker
        .enqueue(SendEmail { to: "ada".into() }.to_job())
        .await
        .expect("enqueue")
        .id;
    let bad = worker
        .enqueue(NewJob::new("emails", json!({"wrong": 1})))
        .await
        .expect("enqueue")
        .id;
    wait_until("both finished", || async {
        storage.get_history(good).await.expect("h").is_some()
            && storage.get_history(bad).await.expect("h").is_some()
    })
    .await;
    worker.shutdown(Duration::from_secs(5)).await;
    let record = storage.get_history(good).await.expect("h").expect("r");
    assert_eq!(record.result, Some(json!({ "sent": "ada" })));
    let record = storage.get_history(bad).await.expect("h").expect("r");
    assert_eq!(
        (record.status, record.attempts),
        (FinalStatus::DeadLetter, 1)
    );
    let message = record
        .last_error
        .as_ref()
        .and_then(|e| e["message"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains("SendEmail") && message.contains("to"),
        "{message}"
    );
}

#[tokio::test]
async fn an_in_process_enqueue_wakes_an_idle_worker_at_once() {
    let storage = Arc::new(MemoryStorage::new());
    let worker = WorkerBuilder::from_arc(Arc::clone(&storage))
        .options(WorkerOptions {
            poll_interval: Duration::from_secs(3600),
            ..WorkerOptions::default()
        })
        .queue("q", options(1), ok)
        .expect("queue")
        .start()
        .expect("start");
    // Let the dispatcher find nothing for 3 s: its idle back-off has grown
    // past 2 s by then, so only the wake-up can start the job within 1 s.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let enqueued = Instant::now();
    let id = worker
        .enqueue(NewJob::new("q", json!(1)))
        .await
        .expect("enqueue")
        .id;
    while storage.get_history(id).await.expect("h").is_none() {
        assert!(
            enqueued.elapsed() < Duration::from_secs(1),
            "the enqueue did not wake the worker"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    worker.shutdown(Duration::from_secs(5)).await;
}

/// With prefetch, claims run ahead of free slots, yet no more handlers run
/// at once than the concurrency, every job completes once, and jobs still
/// held at shutdown are given back without counting an attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefetched_jobs_wait_for_a_slot_and_are_released_at_shutdown() {
    let storage = Arc::new(MemoryStorage::new());
    for i in 0..200 {
        storage
            .enqueue(NewJob::new("p", json!(i)))
            .await
            .expect("enqueue");
    }
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (now, peak) = (Arc::clone(&running), Arc::clone(&most));
    let worker = WorkerBuilder::from_arc(Arc::clone(&storage))
        .options(quick())
        .queue(
            "p",
            QueueOptions {
                prefetch: 6,
                ..options(2)
            },
            move |ctx: JobContext| {
                let (now, peak) = (Arc::clone(&now), Arc::clone(&peak));
                async move {
                    let at_once = now.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(at_once, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                    let stop = ctx.payload().as_i64() == Some(-1);
                    if stop {
                        std::future::pending::<()>().await;
                    }
                    Ok(None)
                }
            },
        )
        .expect("queue")
        .start()
        .expect("start");
    wait_until("all jobs archived", || async {
        history(&storage).await.len() == 200
    })
    .await;
    assert!(most.load(Ordering::SeqCst) <= 2, "more runs than slots");
    assert_eq!(live(&storage).await, 0);

    // Two stuck jobs fill both slots; six more are prefetched and wait.
    for _ in 0..2 {
        storage
            .enqueue(NewJob::new("p", json!(-1)).priority(1))
            .await
            .expect("enqueue");
    }
    for i in 0..10 {
        storage
            .enqueue(NewJob::new("p", json!(i)))
            .await
            .expect("enqueue");
    }
    worker.waker().wake();
    wait_until("eight jobs held", || async {
        let stats = storage.stats().await.expect("stats");
        stats.iter().map(|s| s.running).sum::<u64>() == 8
    })
    .await;
    let report = worker.shutdown(Duration::from_millis(50)).await;
    assert_eq!((report.cancelled, report.released), (8, 8));
    let stats = storage.stats().await.expect("stats");
    assert_eq!(stats.iter().map(|s| s.pending).sum::<u64>(), 12);
    let after = storage
        .dequeue(
            &queue_core::DequeueRequest::new(
                vec![queue_core::QueueName::new("p").expect("name")],
                100,
                Duration::from_secs(30),
                queue_core::WorkerId::new("check").expect("id"),
            )
            .expect("request"),
        )
        .await
        .expect("dequeue");
    assert!(
        after.iter().all(|job| job.attempts == 1),
        "released without counting"
    );
}

/// More old history than one prune round deletes (10 batches of 10,000
/// per status): the worker prunes again a second later rather than an
/// interval (here an hour) later, so history cannot outgrow the prune.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_catches_up_when_a_round_leaves_history_behind() {
    const JOBS: usize = 105_000;
    let clock = ManualClock::new(Utc::now());
    let storage = Arc::new(MemoryStorage::with_clock(clock.clone()));
    let request = queue_core::DequeueRequest::new(
        vec![queue_core::QueueName::new("old").expect("valid")],
        1_000,
        Duration::from_secs(60),
        queue_core::WorkerId::new("filler").expect("valid"),
    )
    .expect("valid request");
    for _ in 0..JOBS / 1_000 {
        let jobs = (0..1_000).map(|_| NewJob::new("old", json!({}))).collect();
        storage.enqueue_batch(jobs).await.expect("enqueue");
        let acks = acks_of(&storage.dequeue(&request).await.expect("dequeue"));
        assert_eq!(acks.len(), 1_000);
        storage.ack_batch(&acks).await.expect("ack");
    }
    // Past the default retention of completed jobs (7 days).
    clock.advance(Duration::from_secs(8 * 24 * 3600));
    let worker = WorkerBuilder::from_arc(Arc::clone(&storage))
        .options(WorkerOptions {
            prune_interval: Duration::from_secs(3600),
            ..quick()
        })
        .queue("other", options(1), ok)
        .expect("queue")
        .start()
        .expect("start");
    // Polled gently: each look sorts the whole history under the
    // storage's lock, which the prune needs too.
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let filter = HistoryFilter {
            limit: 1,
            ..HistoryFilter::default()
        };
        let left = storage.list_history(&filter).await.expect("history");
        if left.records.is_empty() {
            break;
        }
        assert!(
            Instant::now() < until,
            "old history was still there 20 s after the worker started"
        );
    }
    worker.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_worker_is_listed_and_gone_after_shutdown() {
    common::a_running_worker_is_listed_and_gone_after_shutdown(Arc::new(MemoryStorage::new()))
        .await;
}

/// The worker registers again every `reclaim_interval`: after the storage's
/// clock jumps past `silent_after`, its entry turns live again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_worker_refreshes_its_registration() {
    let clock = ManualClock::new(Utc::now());
    let storage = Arc::new(MemoryStorage::with_clock(clock.clone()));
    let worker = WorkerBuilder::from_arc(Arc::clone(&storage))
        .options(WorkerOptions {
            reclaim_interval: Duration::from_millis(20),
            ..WorkerOptions::default()
        })
        .queue(
            "q",
            QueueOptions::with_concurrency(1),
            |_ctx: JobContext| async { Ok(None) },
        )
        .expect("queue")
        .start()
        .expect("start");
    let (silent, forget) = (Duration::from_secs(60), Duration::from_secs(3600));
    let status = || async {
        let listed = storage.list_workers(silent, forget).await.expect("list");
        listed.first().map(|r| r.status)
    };
    wait_until("the worker registered", || async {
        status().await == Some(queue_core::WorkerStatus::Live)
    })
    .await;
    clock.advance(Duration::from_secs(120));
    wait_until("the worker refreshed its registration", || async {
        status().await == Some(queue_core::WorkerStatus::Live)
    })
    .await;
    worker.shutdown(Duration::from_secs(5)).await;
}

/// Every claimed job's start lag is recorded (the first round one
/// interval after the start, the last at shutdown), with the queue's depth;
/// a worker whose `sample_interval` is `None` records nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_records_each_claims_start_lag_and_its_queues_depth() {
    for interval in [Some(Duration::from_millis(50)), None] {
        let storage = Arc::new(MemoryStorage::new());
        for i in 0..40 {
            storage
                .enqueue(NewJob::new("sampled", json!(i)))
                .await
                .expect("enqueue");
        }
        let worker = WorkerBuilder::from_arc(Arc::clone(&storage))
            .options(WorkerOptions {
                sample_interval: interval,
                ..quick()
            })
            .queue("sampled", options(4), ok)
            .expect("queue")
            .start()
            .expect("start");
        wait_until("all jobs archived", || async {
            history(&storage).await.len() == 40
        })
        .await;
        if interval.is_some() {
            wait_until("a round of samples", || async {
                let samples = storage.samples(Duration::from_secs(3600)).await;
                samples.expect("samples").iter().any(|s| s.depth.is_some())
            })
            .await;
        }
        worker.shutdown(Duration::from_secs(5)).await;
        let samples = storage
            .samples(Duration::from_secs(3600))
            .await
            .expect("samples");
        let started: u64 = samples.iter().map(|s| s.lag.total()).sum();
        if interval.is_some() {
            assert_eq!(started, 40, "one start lag per claimed job: {samples:?}");
            assert!(samples.iter().all(|s| s.queue.as_str() == "sampled"));
        } else {
            assert_eq!(samples, Vec::new(), "sampling off records nothing");
        }
    }
}
