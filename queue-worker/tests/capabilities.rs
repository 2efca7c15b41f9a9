//! The worker on a storage that declares only the core: it runs jobs, turns
//! a snooze into a retry after the same delay, and refuses periodic
//! schedules at start with an error naming the capability.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use queue_core::{Capabilities, Capability, FinalStatus, NewJob, QueueError, Storage};
use queue_testkit::MemoryStorage;
use queue_testkit::restricted::Restricted;
use queue_worker::{JobContext, JobError, Periodic, QueueOptions, WorkerBuilder};
use serde_json::json;

fn core_only() -> Arc<Restricted<MemoryStorage>> {
    Arc::new(Restricted::new(MemoryStorage::new(), Capabilities::CORE))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snooze_on_a_storage_without_snooze_is_a_retry_after_the_delay() {
    let storage = core_only();
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&runs);
    let worker = WorkerBuilder::from_arc(Arc::clone(&storage))
        .queue(
            "q",
            QueueOptions::with_concurrency(1),
            move |ctx: JobContext| {
                let runs = Arc::clone(&counted);
                async move {
                    if runs.fetch_add(1, Ordering::SeqCst) == 0 {
                        return Err(JobError::snooze(Duration::from_millis(300)));
                    }
                    Ok(Some(json!({ "attempt": ctx.attempt() })))
                }
            },
        )
        .expect("queue")
        .start()
        .expect("a core-only storage runs jobs");
    let started = Instant::now();
    let id = worker
        .enqueue(NewJob::new("q", json!({})).max_attempts(3))
        .await
        .expect("enqueue")
        .id;
    let until = Instant::now() + Duration::from_secs(20);
    let record = loop {
        if let Some(record) = storage.get_history(id).await.expect("history") {
            break record;
        }
        assert!(Instant::now() < until, "the job did not finish");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "ran again before the delay the handler asked for"
    );
    assert_eq!(record.status, FinalStatus::Completed);
    // A retry, not a snooze: the second run is attempt 2, and nothing
    // counts as snoozed.
    assert_eq!((record.attempts, record.snoozes), (2, 0));
    assert_eq!(record.result, Some(json!({ "attempt": 2 })));
    assert_eq!(
        record.last_error.as_ref().and_then(|e| e.get("kind")),
        Some(&json!("snooze_not_supported"))
    );
    worker.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_schedules_on_a_storage_without_periodic_fail_at_start() {
    let periodic =
        Periodic::new("tick", "* * * * * *", |_| NewJob::new("q", json!({}))).expect("schedule");
    let error = WorkerBuilder::from_arc(core_only())
        .queue(
            "q",
            QueueOptions::with_concurrency(1),
            |_: JobContext| async { Ok(None) },
        )
        .expect("queue")
        .periodic(periodic)
        .expect("periodic")
        .start()
        .err()
        .expect("start must refuse");
    assert!(
        matches!(
            error,
            QueueError::NotSupported {
                capability: Some(Capability::Periodic),
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "this storage does not support periodic jobs (capability periodic, Storage::enqueue_periodic)"
    );
}
