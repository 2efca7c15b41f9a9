//! The one-statement grouped claim (`sql::GROUP_CLAIM_QUEUE`) against
//! limits written through another handle on the same file: each handle
//! remembers for a second which queues' only limits are their groups', and
//! the statement must not trust that memory.

use std::time::Duration;

use queue_core::{DequeueRequest, NewJob, QueueLimits, QueueName, Storage, WorkerId};
use queue_sqlite::SqliteStorage;
use serde_json::json;

fn request(limit: u32, worker: &str) -> DequeueRequest {
    DequeueRequest::new(
        vec![QueueName::new("q").expect("valid name")],
        limit,
        Duration::from_secs(60),
        WorkerId::new(worker).expect("valid worker id"),
    )
    .expect("valid request")
}

/// Handle `a` learns that `q`'s only limit is its group concurrency; handle
/// `b` then adds a concurrency limit of 2. `a`'s next claim, within the
/// second it trusts what it learnt, still takes one job at most: the
/// statement reads the queue's config itself.
#[tokio::test]
async fn a_concurrency_limit_set_through_another_handle_binds_the_next_grouped_claim() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("queue.db").display()
    );
    let a = SqliteStorage::connect(&url).await.expect("handle a");
    let b = SqliteStorage::connect(&url).await.expect("handle b");
    let queue = QueueName::new("q").expect("valid name");
    let groups_only = QueueLimits {
        group_concurrency: Some(1),
        ..QueueLimits::default()
    };
    a.configure_queue(&queue, &groups_only)
        .await
        .expect("configure through a");
    let jobs = (0..6)
        .map(|i| NewJob::new("q", json!({ "i": i })).group_key(format!("g{i}")))
        .collect();
    a.enqueue_batch(jobs).await.expect("enqueue");
    let first = a.dequeue(&request(1, "w1")).await.expect("first claim");
    assert_eq!(first.len(), 1, "one job: {first:?}");

    let with_concurrency = QueueLimits {
        concurrency: Some(2),
        ..groups_only
    };
    b.configure_queue(&queue, &with_concurrency)
        .await
        .expect("configure through b");
    let second = a.dequeue(&request(10, "w2")).await.expect("second claim");
    assert_eq!(
        second.len(),
        1,
        "the queue's concurrency of 2 leaves one slot, whatever a remembers: {second:?}"
    );
}
