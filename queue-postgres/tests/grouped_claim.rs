//! The grouped claim (`DEQUEUE_GROUPED_ONE_QUEUE`, for a queue whose only
//! limits are its groups') against configs written through another handle
//! on the same schema: each handle remembers for a second which queues are
//! groups only, and the statement must not trust that memory.

mod common;

use std::time::Duration;

use queue_core::{DequeueRequest, NewJob, QueueLimits, QueueName, Storage, WorkerId};
use queue_postgres::PgStorage;
use queue_testkit::harness::postgres::TestSchema;
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

fn groups_only() -> QueueLimits {
    QueueLimits {
        group_concurrency: Some(1),
        ..QueueLimits::default()
    }
}

/// Two handles `a` and `b` (caches of their own) on a new schema, whose
/// queue `q` has a group concurrency of 1 (set through `a`) and a job of
/// each group in `groups`, in order.
async fn two_handles(groups: &[&str]) -> (TestSchema, sqlx::PgPool, PgStorage, PgStorage) {
    let (schema, pool, a) = common::storage_in_new_schema().await;
    let b = PgStorage::from_pool(pool.clone())
        .with_schema(schema.name())
        .expect("test schema names are valid");
    a.configure_queue(&queue(), &groups_only())
        .await
        .expect("configure through a");
    let jobs = (groups.iter().enumerate())
        .map(|(i, group)| NewJob::new("q", json!({ "i": i })).group_key(*group))
        .collect();
    a.enqueue_batch(jobs).await.expect("enqueue");
    (schema, pool, a, b)
}

fn queue() -> QueueName {
    QueueName::new("q").expect("valid name")
}

/// Handle `a` learns that `q`'s only limit is its group concurrency;
/// handle `b` then adds a concurrency limit of 2. `a`'s next claim, within
/// the second it trusts what it learnt, still takes one job at most: the
/// statement reads the queue's config under its lock, says it is stale,
/// and the limited claim takes over.
#[tokio::test]
async fn a_concurrency_limit_set_through_another_handle_binds_the_next_grouped_claim() {
    let (schema, pool, a, b) = two_handles(&["g0", "g1", "g2", "g3", "g4", "g5"]).await;
    let first = a.dequeue(&request(1, "w1")).await.expect("first claim");
    assert_eq!(first.len(), 1, "one job: {first:?}");

    let with_concurrency = QueueLimits {
        concurrency: Some(2),
        ..groups_only()
    };
    b.configure_queue(&queue(), &with_concurrency)
        .await
        .expect("configure through b");
    let second = a.dequeue(&request(10, "w2")).await.expect("second claim");
    assert_eq!(
        second.len(),
        1,
        "the queue's concurrency of 2 leaves one slot, whatever a remembers: {second:?}"
    );
    // And a claims by the limited statement from then on.
    let third = a.dequeue(&request(10, "w3")).await.expect("third claim");
    assert!(third.is_empty(), "both slots held: {third:?}");
    pool.close().await;
    schema.drop_schema().await;
}

/// A queue paused through another handle: the grouped claim takes nothing
/// while it is paused (the pause is read under the config row's lock), and
/// takes its jobs once it is resumed, each group within its slot.
#[tokio::test]
async fn a_pause_through_another_handle_binds_the_next_grouped_claim() {
    let (schema, pool, a, b) = two_handles(&["g0", "g1", "g0", "g1"]).await;
    assert!(
        a.dequeue(&request(1, "w0"))
            .await
            .expect("claim before the pause")
            .len()
            == 1
    );
    b.pause_queue(&queue()).await.expect("pause through b");
    let paused = a.dequeue(&request(10, "w1")).await.expect("paused claim");
    assert!(paused.is_empty(), "a paused queue: {paused:?}");
    b.resume_queue(&queue()).await.expect("resume through b");
    let resumed = a.dequeue(&request(10, "w2")).await.expect("resumed claim");
    assert_eq!(
        resumed.len(),
        1,
        "g0 holds a lease, so only g1 has a slot: {resumed:?}"
    );
    pool.close().await;
    schema.drop_schema().await;
}
