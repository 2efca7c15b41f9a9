//! The ready ring (migration 0006): an upgrade keeps every job where it
//! belongs, and the rotation empties slots without losing an entry or
//! waiting for an open transaction. (What a held purge does to a claim:
//! `purge_held.rs`.)

mod common;

use common::{connect, request};

use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};
use queue_core::{NewJob, Storage};
use queue_mysql::{MIGRATIONS, MySqlStorage};
use serde_json::json;

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

async fn count(conn: &mut AsyncMysqlConnection, sql: &str) -> i64 {
    diesel::sql_query(sql)
        .get_result::<Count>(conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .n
}

/// Entries per ring table: the four slots, then the inbox.
async fn entries(conn: &mut AsyncMysqlConnection) -> [i64; 5] {
    let mut out = [0; 5];
    for (i, table) in [
        "job_ready_0",
        "job_ready_1",
        "job_ready_2",
        "job_ready_3",
        "job_ready_inbox",
    ]
    .iter()
    .enumerate()
    {
        out[i] = count(conn, &format!("SELECT COUNT(*) AS n FROM {table}")).await;
    }
    out
}

async fn current_slot(conn: &mut AsyncMysqlConnection) -> i64 {
    count(
        conn,
        "SELECT CAST(slot AS SIGNED) AS n FROM queue_ready_ring",
    )
    .await
}

#[tokio::test]
async fn an_upgrade_keeps_pending_leased_and_scheduled_jobs_where_they_belong() {
    // The schema as migration 0005 left it, holding a pending job of each
    // of two priorities, a leased one and one due in an hour.
    let (db, mut conn) = common::schema_before(6).await;
    conn.batch_execute(
        "INSERT INTO job_queue (queue_name, priority, payload, max_attempts, available_at, \
                                lease_until, locked_by, attempts, created_at, updated_at) VALUES \
         ('up', 0, '\"low\"', 5, UTC_TIMESTAMP(6) - INTERVAL 2 SECOND, NULL, NULL, 0, \
          UTC_TIMESTAMP(6) - INTERVAL 2 SECOND, UTC_TIMESTAMP(6) - INTERVAL 2 SECOND), \
         ('up', 5, '\"high\"', 5, UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, NULL, NULL, 0, \
          UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, UTC_TIMESTAMP(6) - INTERVAL 1 SECOND), \
         ('up', 9, '\"leased\"', 5, UTC_TIMESTAMP(6) - INTERVAL 3 SECOND, \
          UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, 'old-worker', 1, \
          UTC_TIMESTAMP(6) - INTERVAL 3 SECOND, UTC_TIMESTAMP(6)), \
         ('up', 9, '\"later\"', 5, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, NULL, NULL, 0, \
          UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
    )
    .await
    .expect("jobs of the old schema");
    drop(conn);

    let storage = MySqlStorage::connect(&db.url()).expect("pool");
    let later: Vec<_> = MIGRATIONS[5..].iter().map(|m| m.version).collect();
    assert_eq!(storage.migrate().await.expect("upgrade"), later);
    let mut conn = connect(&db).await;
    assert_eq!(
        entries(&mut conn).await,
        [0, 0, 0, 0, 2],
        "the two pending jobs"
    );
    assert_eq!(
        count(
            &mut conn,
            "SELECT CAST(COUNT(*) AS SIGNED) AS n FROM job_queue WHERE is_scheduled"
        )
        .await,
        1,
        "the job due in an hour"
    );

    let claimed = storage.dequeue(&request("up", 10)).await.expect("dequeue");
    let payloads: Vec<_> = claimed.iter().map(|j| j.payload.clone()).collect();
    assert_eq!(payloads, [json!("high"), json!("low")], "claim order kept");
    assert_eq!(
        entries(&mut conn).await,
        [0; 5],
        "the claim took their entries"
    );

    // The scheduled job, made due, and the old lease, given back, come
    // through the triggers.
    let later = storage
        .run_now(&queue_core::JobFilter::default())
        .await
        .expect("run now");
    assert_eq!(later, 1);
    conn.batch_execute(
        "UPDATE job_queue SET lease_until = NULL, locked_by = NULL WHERE locked_by = 'old-worker'",
    )
    .await
    .expect("release by hand");
    let claimed = storage.dequeue(&request("up", 10)).await.expect("dequeue");
    let mut payloads: Vec<_> = claimed.iter().map(|j| j.payload.clone()).collect();
    payloads.sort_by_key(|p| p.to_string());
    assert_eq!(payloads, [json!("later"), json!("leased")]);
    drop(conn);
    db.drop_database().await;
}

#[tokio::test]
async fn a_rotation_moves_what_is_left_and_claims_still_find_it() {
    let (db, storage) = common::storage_in_new_database().await;
    let mut conn = connect(&db).await;
    let jobs: Vec<NewJob> = (0..3).map(|i| NewJob::new("rot", json!(i))).collect();
    storage.enqueue_batch(jobs).await.expect("enqueue");
    assert_eq!(entries(&mut conn).await, [3, 0, 0, 0, 0]);

    // Slots 1, 2 and 3 are empty and become current in turn; slot 0 is
    // then the oldest, and its entries move to slot 2 (made current before
    // the current one) before it is truncated.
    for expected in [1, 2, 3, 0] {
        let rotated = storage.rotate_ready_ring_now().await.expect("rotate");
        assert_eq!(rotated, Some(expected));
        assert_eq!(current_slot(&mut conn).await, i64::from(expected));
    }
    assert_eq!(entries(&mut conn).await, [0, 0, 3, 0, 0]);

    // New entries go to the current slot, and a claim finds all.
    storage
        .enqueue(NewJob::new("rot", json!(3)))
        .await
        .expect("enqueue");
    assert_eq!(entries(&mut conn).await, [1, 0, 3, 0, 0]);
    let claimed = storage.dequeue(&request("rot", 10)).await.expect("dequeue");
    let payloads: Vec<_> = claimed.iter().map(|j| j.payload.clone()).collect();
    assert_eq!(payloads, [json!(0), json!(1), json!(2), json!(3)]);
    assert_eq!(entries(&mut conn).await, [0; 5]);
    drop(conn);
    db.drop_database().await;
}

#[tokio::test]
async fn a_rotation_passes_over_a_slot_an_open_enqueue_wrote_to() {
    let (db, storage) = common::storage_in_new_database().await;
    let mut writer = connect(&db).await;
    let (written_tx, written) = tokio::sync::oneshot::channel::<()>();
    let (commit_tx, commit) = tokio::sync::oneshot::channel::<()>();
    let enqueuer = storage.clone();
    // An enqueue in the caller's transaction, left open: its entry in
    // slot 0 is invisible, and the slot held by it.
    let open = tokio::spawn(async move {
        writer
            .transaction::<_, diesel::result::Error, _>(async |conn| {
                enqueuer
                    .enqueue_in(conn, NewJob::new("open", json!("late")))
                    .await
                    .expect("enqueue in the open transaction");
                written_tx.send(()).expect("signal");
                commit.await.expect("told to commit");
                Ok(())
            })
            .await
            .expect("commit");
    });
    written.await.expect("enqueued");
    let mut conn = connect(&db).await;
    for expected in [1, 2, 3] {
        let rotated = storage.rotate_ready_ring_now().await.expect("rotate");
        assert_eq!(rotated, Some(expected));
    }
    // Slot 0 is the oldest now, but held: the rotation, which does not
    // wait, empties slot 1 instead.
    let started = std::time::Instant::now();
    let rotated = storage.rotate_ready_ring_now().await.expect("rotate");
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "the rotation waited"
    );
    assert_eq!(rotated, Some(1));
    commit_tx.send(()).expect("commit");
    open.await.expect("the open transaction");
    assert_eq!(entries(&mut conn).await, [1, 0, 0, 0, 0], "the entry kept");
    let claimed = storage
        .dequeue(&request("open", 10))
        .await
        .expect("dequeue");
    assert_eq!(claimed.len(), 1);
    drop(conn);
    db.drop_database().await;
}

#[tokio::test]
async fn a_claim_reads_past_the_entries_of_discarded_jobs() {
    let (db, storage) = common::storage_in_new_database().await;
    let outcomes = storage
        .enqueue_batch((0..40).map(|i| NewJob::new("gone", json!(i))).collect())
        .await
        .expect("enqueue");
    // The 35 oldest go: their entries, at the head of the slot, stay
    // behind until something deletes them.
    for outcome in &outcomes[..35] {
        storage.discard(outcome.id).await.expect("discard");
    }
    let claimed = storage.dequeue(&request("gone", 5)).await.expect("dequeue");
    let payloads: Vec<_> = claimed.iter().map(|j| j.payload.clone()).collect();
    assert_eq!(payloads, (35..40).map(|i| json!(i)).collect::<Vec<_>>());
    let mut conn = connect(&db).await;
    assert_eq!(
        entries(&mut conn).await,
        [0; 5],
        "the stale entries went too"
    );
    drop(conn);
    db.drop_database().await;
}

/// A claim over two queues whose first queue's window is filled by a stale
/// entry (a discarded job's) reads that queue deeper before it picks: it
/// takes queue `a`'s job behind the entry, not queue `b`'s later one (the
/// model test found the claim taking `b`'s, seed 3134582484).
#[tokio::test]
async fn a_claim_over_several_queues_reads_past_one_queues_stale_entries() {
    let (db, storage) = common::storage_in_new_database().await;
    let mut ids = Vec::new();
    for queue in ["a", "a", "b"] {
        ids.push(
            storage
                .enqueue(NewJob::new(queue, json!({})))
                .await
                .expect("enqueue")
                .id,
        );
    }
    storage.discard(ids[0]).await.expect("discard");
    let both = queue_core::DequeueRequest::new(
        vec![
            queue_core::QueueName::new("a").unwrap(),
            queue_core::QueueName::new("b").unwrap(),
        ],
        1,
        Duration::from_secs(30),
        queue_core::WorkerId::new("w").unwrap(),
    )
    .expect("request");
    let claimed = storage.dequeue(&both).await.expect("dequeue");
    let claimed: Vec<_> = claimed.iter().map(|job| job.id).collect();
    assert_eq!(claimed, [ids[1]], "the best job left is a's second");
    db.drop_database().await;
}
