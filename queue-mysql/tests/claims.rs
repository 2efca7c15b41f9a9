//! A claim whose candidates another transaction holds: the claim scans
//! without locks, then locks its picks by id, skipping held rows; when it
//! got fewer than it picked, it scans again with locks and takes the best
//! rows nobody else holds, as many as it asked for.

mod common;

use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};
use queue_core::{DequeueRequest, JobId, NewJob, QueueName, Storage, WorkerId};
use queue_mysql::MySqlStorage;
use serde_json::json;

#[derive(QueryableByName)]
struct Id {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

fn request(limit: u32) -> DequeueRequest {
    DequeueRequest::new(
        vec![QueueName::new("q").expect("valid")],
        limit,
        Duration::from_secs(30),
        WorkerId::new("w1").expect("valid"),
    )
    .expect("valid request")
}

/// The ids of up to `limit` jobs claimed from queue `q`, in claim order.
async fn claim_ids(storage: &MySqlStorage, limit: u32) -> Vec<JobId> {
    storage
        .dequeue(&request(limit))
        .await
        .expect("dequeue")
        .into_iter()
        .map(|job| job.id)
        .collect()
}

#[tokio::test]
async fn a_claim_racing_a_lock_takes_the_best_rows_nobody_holds_as_many_as_asked() {
    let (db, storage) = common::storage_in_new_database().await;
    let jobs = (0..10).map(|i| NewJob::new("q", json!(i))).collect();
    let ids: Vec<JobId> = storage
        .enqueue_batch(jobs)
        .await
        .expect("enqueue")
        .into_iter()
        .map(|outcome| outcome.id)
        .collect();

    // Another transaction holds the three best jobs, as a racing claim
    // does between its scan and its UPDATE.
    let mut other = AsyncMysqlConnection::establish(&db.url())
        .await
        .expect("connect");
    other
        .batch_execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; BEGIN")
        .await
        .expect("begin");
    let held: Vec<i64> = diesel::sql_query(format!(
        // By the primary key: on a small table the server may otherwise
        // scan a whole index and lock every row.
        "SELECT id FROM job_queue FORCE INDEX (PRIMARY) WHERE id IN ({}, {}, {}) FOR UPDATE",
        ids[0].0, ids[1].0, ids[2].0
    ))
    .load::<Id>(&mut other)
    .await
    .expect("lock the best three")
    .into_iter()
    .map(|row| row.id)
    .collect();
    assert_eq!(held.len(), 3);

    let claimed = claim_ids(&storage, 4).await;
    assert_eq!(
        claimed,
        ids[3..7].to_vec(),
        "the four best jobs nobody holds"
    );

    other.batch_execute("ROLLBACK").await.expect("rollback");
    let rest = claim_ids(&storage, 10).await;
    let mut expected = ids[0..3].to_vec();
    expected.extend_from_slice(&ids[7..10]);
    assert_eq!(rest, expected, "the released three, then the rest");
    db.drop_database().await;
}
