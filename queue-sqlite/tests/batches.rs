//! Batches larger than one multi-row statement (1,000 rows): every job of
//! every chunk gets its own outcome, on a file (the write connection) and
//! in memory (the pool's connection).

use std::time::Duration;

use queue_core::{
    Ack, DequeueRequest, FinalStatus, Job, MAX_DEQUEUE_LIMIT, NewJob, QueueName, Storage, WorkerId,
};
use queue_sqlite::SqliteStorage;
use queue_testkit::suite::acks_of;
use serde_json::json;

/// More than two statements' worth of rows.
const JOBS: usize = 2_500;

async fn file_storage() -> (tempfile::TempDir, SqliteStorage) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("q.db").display());
    let storage = SqliteStorage::connect(&url).await.expect("connect");
    (dir, storage)
}

/// Enqueues `JOBS` jobs whose payload is their index, every seventh under a
/// unique key when `keyed`, and checks each outcome names its own job.
async fn enqueue_checked(storage: &SqliteStorage, keyed: bool) {
    let jobs: Vec<NewJob> = (0..JOBS)
        .map(|i| {
            let job = NewJob::new("q", json!(i));
            if keyed && i % 7 == 0 {
                job.unique_key(format!("k{i}"))
            } else {
                job
            }
        })
        .collect();
    let outcomes = storage.enqueue_batch(jobs).await.expect("enqueue_batch");
    assert_eq!(outcomes.len(), JOBS);
    let mut ids: Vec<i64> = outcomes.iter().map(|o| o.id.get()).collect();
    for (i, outcome) in outcomes.iter().enumerate() {
        assert!(!outcome.existed, "job {i} reported existing");
        let job = storage
            .get_job(outcome.id)
            .await
            .expect("get_job")
            .unwrap_or_else(|| panic!("job {i} is not live"));
        assert_eq!(job.payload, json!(i), "outcome {i} names another job");
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), JOBS, "two outcomes share an id");
}

/// A claim of the largest size on queue `q`.
fn claim_everything() -> DequeueRequest {
    DequeueRequest::new(
        vec![QueueName::new("q").expect("valid")],
        MAX_DEQUEUE_LIMIT,
        Duration::from_secs(60),
        WorkerId::new("w").expect("valid"),
    )
    .expect("valid request")
}

/// Claims every job of queue `q` (in claims of the largest size).
async fn claim_all(storage: &SqliteStorage) -> Vec<Job> {
    let mut all = Vec::new();
    let request = claim_everything();
    loop {
        let jobs = storage.dequeue(&request).await.expect("dequeue");
        if jobs.is_empty() {
            return all;
        }
        all.extend(jobs);
    }
}

/// Heartbeats and acks every claimed job in one call each, with a stale
/// lease and a repeated ack mixed in.
async fn heartbeat_and_ack_checked(storage: &SqliteStorage) {
    let jobs = claim_all(storage).await;
    assert_eq!(jobs.len(), JOBS);
    let mut leases: Vec<_> = jobs.iter().map(|j| j.lease().expect("leased")).collect();
    let mut stale = leases[0].clone();
    stale.attempt += 1;
    leases.push(stale.clone());
    let alive = storage
        .heartbeat_batch(&leases, Duration::from_secs(120))
        .await
        .expect("heartbeat_batch");
    assert_eq!(alive.len(), JOBS + 1);
    assert!(
        alive[..JOBS].iter().all(|a| *a),
        "a live lease was not extended"
    );
    assert!(!alive[JOBS], "a stale lease was extended");

    let mut acks: Vec<Ack> = jobs
        .iter()
        .map(|job| Ack {
            lease: job.lease().expect("leased"),
            result: Some(json!({ "done": job.payload })),
        })
        .collect();
    acks.push(Ack {
        lease: stale,
        result: None,
    });
    acks.push(acks[1].clone());
    let acked = storage.ack_batch(&acks).await.expect("ack_batch");
    assert_eq!(acked.len(), JOBS + 2);
    assert!(
        acked[..JOBS].iter().all(|a| *a),
        "a current lease was not acked"
    );
    assert!(!acked[JOBS], "a stale lease was acked");
    assert!(!acked[JOBS + 1], "a repeated ack counted twice");
    for job in &jobs {
        let record = storage
            .get_history(job.id)
            .await
            .expect("get_history")
            .expect("archived");
        assert_eq!(record.status, FinalStatus::Completed);
        assert_eq!(record.result, Some(json!({ "done": job.payload })));
        assert!(storage.get_job(job.id).await.expect("get_job").is_none());
    }
}

#[tokio::test]
async fn unkeyed_batch_over_several_statements_on_a_file() {
    let (_dir, storage) = file_storage().await;
    enqueue_checked(&storage, false).await;
    heartbeat_and_ack_checked(&storage).await;
}

#[tokio::test]
async fn keyed_batch_over_several_statements_on_a_file() {
    let (_dir, storage) = file_storage().await;
    enqueue_checked(&storage, true).await;
    heartbeat_and_ack_checked(&storage).await;
}

#[tokio::test]
async fn batch_over_several_statements_in_memory() {
    let storage = SqliteStorage::connect("sqlite::memory:")
        .await
        .expect("connect");
    enqueue_checked(&storage, false).await;
    heartbeat_and_ack_checked(&storage).await;
}

/// The storage's writes do not checkpoint the WAL (their commits would
/// wait for the copy and the disk sync); its own task does, so the WAL is
/// reused from its start after each round of writes instead of growing
/// with every one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_is_checkpointed_off_the_write_path() {
    let (dir, storage) = file_storage().await;
    let wal = dir.path().join("q.db-wal");
    let request = claim_everything();
    let mut sizes = Vec::new();
    for round in 0..5 {
        let jobs = (0..JOBS)
            .map(|i| NewJob::new("q", json!({"round": round, "i": i, "pad": "x".repeat(500)})))
            .collect();
        storage.enqueue_batch(jobs).await.expect("enqueue_batch");
        loop {
            let claimed = storage.dequeue(&request).await.expect("dequeue");
            if claimed.is_empty() {
                break;
            }
            storage
                .ack_batch(&acks_of(&claimed))
                .await
                .expect("ack_batch");
        }
        // Two checkpoint periods: the round's frames are copied, and the
        // next round's first write starts the WAL over.
        tokio::time::sleep(Duration::from_millis(600)).await;
        sizes.push(std::fs::metadata(&wal).expect("the WAL file").len());
    }
    assert!(
        sizes[4] <= sizes[0] * 2,
        "the WAL grew round after round (bytes after each): {sizes:?}"
    );
}
