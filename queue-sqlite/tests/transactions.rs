//! Enqueue and completion inside the caller's own SQLite transaction, and
//! wake-ups inside one process.

use std::time::Duration;

use futures_util::StreamExt;
use queue_core::{
    DequeueRequest, FinalStatus, Job, NackOutcome, NewJob, QueueError, QueueName, Retry, Storage,
    Wakeup, WorkerId,
};
use queue_sqlite::SqliteStorage;
use serde_json::json;

const LEASE: Duration = Duration::from_secs(30);

/// A storage on a file (a pool of several connections) plus a business table.
async fn setup() -> (tempfile::TempDir, SqliteStorage) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("q.db").display());
    let storage = SqliteStorage::connect(&url).await.expect("connect");
    sqlx::query("CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT NOT NULL)")
        .execute(storage.pool())
        .await
        .expect("business table");
    (dir, storage)
}

async fn order_count(storage: &SqliteStorage) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM orders")
        .fetch_one(storage.pool())
        .await
        .expect("count orders")
}

async fn claim(storage: &SqliteStorage) -> Job {
    let request = DequeueRequest::new(
        vec![QueueName::new("orders").expect("valid")],
        1,
        LEASE,
        WorkerId::new("w1").expect("valid"),
    )
    .expect("valid request");
    let mut jobs = storage.dequeue(&request).await.expect("dequeue");
    assert_eq!(jobs.len(), 1);
    jobs.remove(0)
}

#[tokio::test]
async fn enqueue_in_commits_and_rolls_back_with_the_business_row() {
    let (_dir, storage) = setup().await;
    let mut tx = storage
        .pool()
        .begin_with("BEGIN IMMEDIATE")
        .await
        .expect("begin");
    sqlx::query("INSERT INTO orders VALUES (1, 'placed')")
        .execute(&mut *tx)
        .await
        .expect("order");
    let kept = storage
        .enqueue_in(&mut tx, NewJob::new("orders", json!({"order": 1})))
        .await
        .expect("enqueue_in");
    tx.commit().await.expect("commit");

    let mut tx = storage
        .pool()
        .begin_with("BEGIN IMMEDIATE")
        .await
        .expect("begin");
    sqlx::query("INSERT INTO orders VALUES (2, 'placed')")
        .execute(&mut *tx)
        .await
        .expect("order");
    let dropped = storage
        .enqueue_in(&mut tx, NewJob::new("orders", json!({"order": 2})))
        .await
        .expect("enqueue_in");
    tx.rollback().await.expect("rollback");

    assert_eq!(order_count(&storage).await, 1);
    assert!(storage.get_job(kept.id).await.expect("get").is_some());
    assert!(storage.get_job(dropped.id).await.expect("get").is_none());
}

#[tokio::test]
async fn ack_in_finishes_the_job_only_when_the_caller_commits() {
    let (_dir, storage) = setup().await;
    storage
        .enqueue(NewJob::new("orders", json!({"order": 1})))
        .await
        .expect("enqueue");
    let job = claim(&storage).await;
    let lease = job.lease().expect("claimed job has a lease");

    let mut tx = storage
        .pool()
        .begin_with("BEGIN IMMEDIATE")
        .await
        .expect("begin");
    storage
        .ack_in(&mut tx, &lease, Some(json!("shipped")))
        .await
        .expect("ack_in");
    tx.rollback().await.expect("rollback");
    assert!(storage.get_job(job.id).await.expect("get").is_some());

    let mut tx = storage
        .pool()
        .begin_with("BEGIN IMMEDIATE")
        .await
        .expect("begin");
    sqlx::query("INSERT INTO orders VALUES (1, 'shipped')")
        .execute(&mut *tx)
        .await
        .expect("order");
    storage
        .ack_in(&mut tx, &lease, Some(json!("shipped")))
        .await
        .expect("ack_in");
    tx.commit().await.expect("commit");
    let record = storage
        .get_history(job.id)
        .await
        .expect("history")
        .expect("archived");
    assert_eq!(record.status, FinalStatus::Completed);
    assert_eq!(record.result, Some(json!("shipped")));
    assert_eq!(order_count(&storage).await, 1);

    let mut tx = storage
        .pool()
        .begin_with("BEGIN IMMEDIATE")
        .await
        .expect("begin");
    let again = storage.ack_in(&mut tx, &lease, None).await;
    assert!(
        matches!(again, Err(QueueError::LeaseLost { .. })),
        "{again:?}"
    );
}

#[tokio::test]
async fn nack_in_retries_inside_the_caller_transaction() {
    let (_dir, storage) = setup().await;
    storage
        .enqueue(NewJob::new("orders", json!({"order": 1})))
        .await
        .expect("enqueue");
    let job = claim(&storage).await;
    let lease = job.lease().expect("lease");
    let mut tx = storage
        .pool()
        .begin_with("BEGIN IMMEDIATE")
        .await
        .expect("begin");
    let outcome = storage
        .nack_in(
            &mut tx,
            &lease,
            json!({"why": "later"}),
            Retry::After(Duration::from_secs(60)),
        )
        .await
        .expect("nack_in");
    tx.commit().await.expect("commit");
    assert!(
        matches!(outcome, NackOutcome::Retrying { .. }),
        "{outcome:?}"
    );
    let live = storage
        .get_job(job.id)
        .await
        .expect("get")
        .expect("still live");
    assert_eq!(live.lease_until, None);
    assert_eq!(live.last_error, Some(json!({"why": "later"})));
}

#[tokio::test]
async fn subscribers_are_woken_by_commits_of_this_process() {
    let (_dir, storage) = setup().await;
    let mut wakeups = storage
        .subscribe()
        .await
        .expect("subscribe")
        .expect("a stream");
    // A clone shares the subscribers.
    let other = storage.clone();
    other
        .enqueue(NewJob::new("orders", json!({"order": 1})))
        .await
        .expect("enqueue");
    let wakeup = tokio::time::timeout(Duration::from_secs(5), wakeups.next())
        .await
        .expect("woken within 5 s")
        .expect("stream open")
        .expect("no error");
    assert_eq!(
        wakeup,
        Wakeup::Queue(QueueName::new("orders").expect("valid"))
    );
}
