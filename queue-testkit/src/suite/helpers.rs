//! The building blocks the cases share, public for an author's own cases:
//! names, fills, limits, claims, finished jobs, lookups, assertions.

use std::time::Duration;

use chrono::{DateTime, Utc};
use queue_core::{
    DequeueRequest, HistoryRecord, Job, JobId, Lease, NewJob, QueueConfig, QueueError, QueueLimits,
    QueueName, RateLimit, Result, Retry, Storage, WorkerId,
};
use serde_json::json;

use super::Ctx;

/// The lease every case claims with unless it says otherwise.
pub const LEASE: Duration = Duration::from_secs(30);

/// `n` seconds.
pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A queue name the cases know to be valid.
pub fn queue(name: &str) -> QueueName {
    QueueName::new(name).expect("case uses a valid queue name")
}

/// A worker id the cases know to be valid.
pub fn worker(name: &str) -> WorkerId {
    WorkerId::new(name).expect("case uses a valid worker id")
}

/// A request for `limit` jobs of `queues` by `worker_name`, leased for [`LEASE`].
pub fn request(queues: &[&str], limit: u32, worker_name: &str) -> DequeueRequest {
    DequeueRequest::new(
        queues.iter().map(|q| queue(q)).collect(),
        limit,
        LEASE,
        worker(worker_name),
    )
    .expect("case builds a valid request")
}

/// The lease of a claimed job.
pub fn lease_of(job: &Job) -> Lease {
    job.lease().expect("a claimed job carries a lease")
}

/// An ack without a result for each claimed job.
pub fn acks_of(jobs: &[Job]) -> Vec<queue_core::Ack> {
    jobs.iter()
        .map(|job| queue_core::Ack {
            lease: lease_of(job),
            result: None,
        })
        .collect()
}

/// Limits of at most `limit` leases at once, and nothing else.
pub fn concurrency_limit(limit: u32) -> QueueLimits {
    QueueLimits {
        concurrency: Some(limit),
        ..QueueLimits::default()
    }
}

/// Limits of `per_second` claims a second with bursts of `burst`, and
/// nothing else.
pub fn rate_limit(per_second: f64, burst: u32) -> QueueLimits {
    QueueLimits {
        rate: Some(RateLimit { per_second, burst }),
        ..QueueLimits::default()
    }
}

impl<S: Storage> Ctx<S> {
    /// `claims` claims of up to `limit` jobs of `queue_name` each, polled
    /// together on this task through both handles in turn (workers
    /// `w{round}-{n}`), as racing hosts; every job they took. Polled, not
    /// spawned: each racer runs up to its first await before the next
    /// starts (see `flow::concurrency_limit_holds_under_concurrent_claims`).
    pub async fn racing_claims(
        &self,
        queue_name: &str,
        claims: usize,
        limit: u32,
        round: usize,
    ) -> Vec<Job> {
        let racers = (0..claims).map(|n| {
            let worker = format!("w{round}-{n}");
            let storage = if n % 2 == 0 {
                &*self.storage
            } else {
                self.second()
            };
            async move {
                storage
                    .dequeue(&request(&[queue_name], limit, &worker))
                    .await
                    .expect("dequeue")
            }
        });
        futures_util::future::join_all(racers)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// Enqueues `n` jobs into `queue_name` (payload `{"i": i}`), 500 per
    /// batch.
    pub async fn fill(&self, queue_name: &str, n: usize) {
        for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
            let jobs = chunk
                .iter()
                .map(|i| NewJob::new(queue_name, json!({ "i": i })));
            self.storage
                .enqueue_batch(jobs.collect())
                .await
                .expect("enqueue_batch");
        }
    }

    /// Sets `queue_name`'s limits ([`queue_core::Capability::FlowLimits`]).
    pub async fn configure(&self, queue_name: &str, limits: QueueLimits) {
        self.storage
            .configure_queue(&queue(queue_name), &limits)
            .await
            .expect("configure_queue");
    }

    /// Every queue's configuration ([`queue_core::Capability::FlowLimits`]).
    pub async fn configs(&self) -> Vec<QueueConfig> {
        self.storage.queue_configs().await.expect("queue_configs")
    }

    /// Enqueues a job with one attempt into `queue_name`, claims it, and
    /// finishes it: dead-lettered when `dead`, else completed. Its id.
    pub async fn finish(&self, queue_name: &str, dead: bool) -> JobId {
        let job = self.enqueue_and_claim(queue_name, 1).await;
        if dead {
            self.storage
                .nack(&lease_of(&job), json!("x"), Retry::Never)
                .await
                .expect("nack");
        } else {
            self.storage.ack(&lease_of(&job), None).await.expect("ack");
        }
        job.id
    }

    /// The storage's now (the manual clock).
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Enqueues a job that must be new, and returns its id.
    pub async fn enqueue(&self, job: NewJob) -> JobId {
        let outcome = self.storage.enqueue(job).await.expect("enqueue");
        assert!(!outcome.existed, "expected a new job, got {outcome:?}");
        outcome.id
    }

    /// Claims up to `limit` jobs of `queue_name` as worker `w1`.
    pub async fn claim(&self, queue_name: &str, limit: u32) -> Vec<Job> {
        self.claim_as(queue_name, limit, "w1").await
    }

    /// Claims up to `limit` jobs of `queue_name` as `worker_name`.
    pub async fn claim_as(&self, queue_name: &str, limit: u32, worker_name: &str) -> Vec<Job> {
        self.storage
            .dequeue(&request(&[queue_name], limit, worker_name))
            .await
            .expect("dequeue")
    }

    /// Claims exactly one job of `queue_name` as `w1`.
    pub async fn claim_one(&self, queue_name: &str) -> Job {
        let mut jobs = self.claim(queue_name, 1).await;
        assert_eq!(jobs.len(), 1, "expected one job in {queue_name}: {jobs:?}");
        jobs.remove(0)
    }

    /// Enqueues a plain job into `queue_name` and claims it as `w1`.
    pub async fn enqueue_and_claim(&self, queue_name: &str, max_attempts: u32) -> Job {
        let id = self
            .enqueue(NewJob::new(queue_name, serde_json::json!({})).max_attempts(max_attempts))
            .await;
        let job = self.claim_one(queue_name).await;
        assert_eq!(job.id, id);
        job
    }

    /// The live job `id`, which must exist.
    pub async fn live(&self, id: JobId) -> Job {
        self.storage
            .get_job(id)
            .await
            .expect("get_job")
            .unwrap_or_else(|| panic!("job {id} should be live"))
    }

    /// The history row of `id`, which must exist.
    pub async fn archived(&self, id: JobId) -> HistoryRecord {
        self.storage
            .get_history(id)
            .await
            .expect("get_history")
            .unwrap_or_else(|| panic!("job {id} should be in history"))
    }

    /// Every live job, over all queues, counted through stats.
    pub async fn live_count(&self) -> u64 {
        let stats = self.storage.stats().await.expect("stats");
        stats.iter().map(|s| s.live()).sum()
    }

    /// One page of history for `filter`.
    pub async fn history_page(
        &self,
        filter: &queue_core::HistoryFilter,
    ) -> queue_core::HistoryPage {
        self.storage
            .list_history(filter)
            .await
            .expect("list_history")
    }

    /// Every history row, newest first (up to 1,000).
    pub async fn all_history(&self) -> Vec<HistoryRecord> {
        let filter = queue_core::HistoryFilter {
            limit: queue_core::MAX_PAGE_SIZE,
            ..Default::default()
        };
        self.storage
            .list_history(&filter)
            .await
            .expect("list_history")
            .records
    }
}

/// Asserts `result` is `LeaseLost`.
pub fn assert_lease_lost<T: std::fmt::Debug>(result: Result<T>) {
    match result {
        Err(QueueError::LeaseLost { .. }) => {}
        other => panic!("expected LeaseLost, got {other:?}"),
    }
}

/// Asserts `result` is `InvalidInput` naming `field`.
pub fn assert_invalid<T: std::fmt::Debug>(result: Result<T>, field: &str) {
    match result {
        Err(QueueError::InvalidInput { field: got, .. }) if got == field => {}
        other => panic!("expected InvalidInput for {field}, got {other:?}"),
    }
}
