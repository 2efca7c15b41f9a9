//! `Storage` for `PgStorage`: each method is one statement (see `sql.rs`).

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use queue_core::{
    Ack, DequeueRequest, EnqueueOutcome, HistoryFilter, HistoryPage, HistoryRecord, Job, JobId,
    Lease, NackOutcome, NewJob, PruneRequest, QueueName, QueueStats, ReclaimOutcome, Result, Retry,
    Storage, Wakeups,
};
use serde_json::Value;

use crate::PgStorage;
use crate::error::retrying;

#[async_trait]
impl Storage for PgStorage {
    async fn now(&self) -> Result<DateTime<Utc>> {
        self.now_pooled().await
    }

    async fn enqueue_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<EnqueueOutcome>> {
        self.enqueue_batch_pooled(jobs).await
    }

    async fn dequeue(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        self.dequeue_pooled(request).await
    }

    async fn next_due(&self, queues: &[QueueName]) -> Result<Option<Duration>> {
        self.next_due_pooled(queues).await
    }

    async fn ack_batch(&self, acks: &[Ack]) -> Result<Vec<bool>> {
        self.ack_pooled(acks).await
    }

    async fn nack(&self, lease: &Lease, error: Value, retry: Retry) -> Result<NackOutcome> {
        self.nack_pooled(lease, &error, retry).await
    }

    async fn release(&self, lease: &Lease) -> Result<bool> {
        retrying(false, || async {
            let mut conn = self.connection().await?;
            self.release_on(&mut conn, lease).await
        })
        .await
    }

    async fn heartbeat_batch(&self, leases: &[Lease], extend_by: Duration) -> Result<Vec<bool>> {
        self.heartbeat_pooled(leases, extend_by).await
    }

    async fn reclaim_stalled(&self, limit: u32) -> Result<ReclaimOutcome> {
        self.reclaim_pooled(limit).await
    }

    async fn discard(&self, id: JobId) -> Result<()> {
        self.discard_pooled(id).await
    }

    async fn retry_dead_letter(&self, id: JobId) -> Result<()> {
        self.retry_dead_letter_pooled(id).await
    }

    async fn prune_history(&self, request: &PruneRequest) -> Result<u64> {
        self.prune_pooled(request).await
    }

    async fn stats(&self) -> Result<Vec<QueueStats>> {
        self.stats_pooled().await
    }

    async fn get_job(&self, id: JobId) -> Result<Option<Job>> {
        self.get_job_pooled(id).await
    }

    async fn get_history(&self, id: JobId) -> Result<Option<HistoryRecord>> {
        self.get_history_pooled(id).await
    }

    async fn list_history(&self, filter: &HistoryFilter) -> Result<HistoryPage> {
        self.list_history_pooled(filter).await
    }

    async fn subscribe(&self) -> Result<Option<Wakeups>> {
        self.wakeups().await.map(Some)
    }

    async fn pause_queue(&self, queue: &QueueName) -> Result<()> {
        self.set_paused(queue, true).await
    }

    async fn resume_queue(&self, queue: &QueueName) -> Result<()> {
        self.set_paused(queue, false).await
    }
}
