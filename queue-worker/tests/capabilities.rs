//! The worker on a storage that declares only the core: it runs jobs, turns
//! a snooze into a retry after the same delay, and refuses periodic
//! schedules at start with an error naming the capability; on a storage
//! without the worker registry it never registers.

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

/// The memory storage's core and its registry, declaring the core only:
/// a worker that registered without asking would show in the registry.
struct Undeclared(MemoryStorage);

#[async_trait::async_trait]
impl Storage for Undeclared {
    async fn now(&self) -> queue_core::Result<chrono::DateTime<chrono::Utc>> {
        self.0.now().await
    }
    async fn enqueue_batch(
        &self,
        jobs: Vec<NewJob>,
    ) -> queue_core::Result<Vec<queue_core::EnqueueOutcome>> {
        self.0.enqueue_batch(jobs).await
    }
    async fn dequeue(
        &self,
        request: &queue_core::DequeueRequest,
    ) -> queue_core::Result<Vec<queue_core::Job>> {
        self.0.dequeue(request).await
    }
    async fn next_due(
        &self,
        queues: &[queue_core::QueueName],
    ) -> queue_core::Result<Option<Duration>> {
        self.0.next_due(queues).await
    }
    async fn ack_batch(&self, acks: &[queue_core::Ack]) -> queue_core::Result<Vec<bool>> {
        self.0.ack_batch(acks).await
    }
    async fn nack(
        &self,
        lease: &queue_core::Lease,
        error: serde_json::Value,
        retry: queue_core::Retry,
    ) -> queue_core::Result<queue_core::NackOutcome> {
        self.0.nack(lease, error, retry).await
    }
    async fn release(&self, lease: &queue_core::Lease) -> queue_core::Result<bool> {
        self.0.release(lease).await
    }
    async fn heartbeat_batch(
        &self,
        leases: &[queue_core::Lease],
        extend_by: Duration,
    ) -> queue_core::Result<Vec<bool>> {
        self.0.heartbeat_batch(leases, extend_by).await
    }
    async fn reclaim_stalled(&self, limit: u32) -> queue_core::Result<queue_core::ReclaimOutcome> {
        self.0.reclaim_stalled(limit).await
    }
    async fn stats_capped(&self, cap: u64) -> queue_core::Result<Vec<queue_core::QueueStats>> {
        self.0.stats_capped(cap).await
    }
    async fn get_job(&self, id: queue_core::JobId) -> queue_core::Result<Option<queue_core::Job>> {
        self.0.get_job(id).await
    }
    async fn get_history(
        &self,
        id: queue_core::JobId,
    ) -> queue_core::Result<Option<queue_core::HistoryRecord>> {
        self.0.get_history(id).await
    }
    async fn list_history(
        &self,
        filter: &queue_core::HistoryFilter,
    ) -> queue_core::Result<queue_core::HistoryPage> {
        self.0.list_history(filter).await
    }
    async fn register_worker(&self, worker: &queue_core::WorkerInfo) -> queue_core::Result<()> {
        self.0.register_worker(worker).await
    }
    async fn deregister_worker(&self, id: &queue_core::WorkerId) -> queue_core::Result<bool> {
        self.0.deregister_worker(id).await
    }
}

/// On a storage that does not declare the registry, the worker runs its
/// jobs and never registers itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_on_a_storage_without_the_registry_does_not_register() {
    let storage = Arc::new(Undeclared(MemoryStorage::new()));
    let worker = WorkerBuilder::from_arc(Arc::clone(&storage))
        .options(queue_worker::WorkerOptions {
            reclaim_interval: Duration::from_millis(10),
            ..queue_worker::WorkerOptions::default()
        })
        .queue(
            "q",
            QueueOptions::with_concurrency(1),
            |_: JobContext| async { Ok(None) },
        )
        .expect("queue")
        .start()
        .expect("a storage without the registry runs jobs");
    let id = worker
        .enqueue(NewJob::new("q", json!({})))
        .await
        .expect("enqueue")
        .id;
    let until = Instant::now() + Duration::from_secs(20);
    while storage.get_history(id).await.expect("history").is_none() {
        assert!(Instant::now() < until, "the job did not finish");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let listed = (storage.0)
        .list_workers(Duration::from_secs(60), Duration::from_secs(600))
        .await
        .expect("the memory storage lists");
    assert_eq!(listed, Vec::new(), "the worker registered anyway");
    worker.shutdown(Duration::from_secs(5)).await;
}
