//! A claim does not step over the jobs claimed while InnoDB's purge is
//! held back (migration 0006's ready ring). Its own binary: it reads a
//! server-wide counter, which another test of the same binary running
//! beside it would move.

mod common;

use common::{connect, request};

use diesel::QueryableByName;
use diesel::sql_types::Text;
use diesel_async::{AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};
use queue_core::{Ack, Job, NewJob, Storage};
use queue_mysql::MySqlStorage;
use serde_json::json;

#[derive(QueryableByName)]
struct Status {
    #[diesel(sql_type = Text, column_name = "Value")]
    value: String,
}

async fn ack_all(storage: &MySqlStorage, jobs: &[Job]) {
    let acks: Vec<Ack> = jobs
        .iter()
        .map(|job| Ack {
            lease: job.lease().expect("claimed"),
            result: None,
        })
        .collect();
    storage.ack_batch(&acks).await.expect("ack");
}

/// InnoDB's logical page reads, server-wide.
async fn page_reads(conn: &mut AsyncMysqlConnection) -> u64 {
    diesel::sql_query("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_read_requests'")
        .get_result::<Status>(conn)
        .await
        .expect("status")
        .value
        .parse()
        .expect("a number")
}

/// The page reads of a claim of 10 jobs (rolled back), the least of three.
async fn claim_reads(storage: &MySqlStorage, conn: &mut AsyncMysqlConnection) -> u64 {
    let mut least = u64::MAX;
    for _ in 0..3 {
        let before = page_reads(conn).await;
        storage
            .rows_locked_by_claim(&request("held", 10))
            .await
            .expect("claim");
        least = least.min(page_reads(conn).await - before);
    }
    least
}

/// `n` jobs enqueued, then claimed and acked 500 at a time, the ring
/// rotated after each claim if `rotate`.
async fn run_through(storage: &MySqlStorage, n: usize, rotate: bool) {
    storage
        .enqueue_batch((0..n).map(|i| NewJob::new("held", json!(i))).collect())
        .await
        .expect("enqueue");
    loop {
        let jobs = storage
            .dequeue(&request("held", 500))
            .await
            .expect("dequeue");
        if jobs.is_empty() {
            break;
        }
        ack_all(storage, &jobs).await;
        if rotate {
            storage.rotate_ready_ring_now().await.expect("rotate");
        }
    }
}

#[tokio::test]
async fn a_claim_does_not_step_over_jobs_claimed_while_purge_is_held() {
    let (db, storage) = common::storage_in_new_database_of(4).await;
    let mut conn = connect(&db).await;
    storage
        .enqueue_batch((0..10).map(|i| NewJob::new("held", json!(i))).collect())
        .await
        .expect("enqueue");
    let baseline = claim_reads(&storage, &mut conn).await;

    // A forgotten session: a read view and a transaction id, held open.
    let mut holder = connect(&db).await;
    holder
        .batch_execute(
            "CREATE TABLE holder (at DATETIME(6)) ENGINE = InnoDB; \
             SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ; START TRANSACTION; \
             INSERT INTO holder VALUES (UTC_TIMESTAMP(6)); SELECT COUNT(*) FROM job_queue",
        )
        .await
        .expect("hold purge back");

    // 20,000 jobs through the queue while purge stands still, the ring
    // rotating after every 500 as claims rotate it (about every 250 ms).
    for _ in 0..10 {
        run_through(&storage, 2_000, true).await;
    }
    // A slot that took 2,000 jobs since it was last truncated, every one
    // claimed and acked under the held purge: the claim steps over their
    // delete-marked entries in the slot's clustered index, in place.
    run_through(&storage, 2_000, false).await;
    storage
        .enqueue_batch((0..10).map(|i| NewJob::new("held", json!(i))).collect())
        .await
        .expect("enqueue");
    let in_slot = claim_reads(&storage, &mut conn).await;
    // Four rotations later every slot was truncated since: what a claim
    // steps over now is what the ring took since, whatever was claimed
    // before. (Before migration 0006 a claim here stepped over the
    // dequeue index's entries of all 22,000 jobs.)
    for _ in 0..4 {
        storage.rotate_ready_ring_now().await.expect("rotate");
    }
    let held = claim_reads(&storage, &mut conn).await;
    holder.batch_execute("ROLLBACK").await.expect("release");
    eprintln!(
        "page reads of a claim of 10: {baseline} alone; under a held purge, {in_slot} beside \
         2,000 claimed in its slot, {held} after 22,000 and four rotations"
    );
    assert!(
        in_slot <= baseline * 3 + 200,
        "a claim read {in_slot} pages beside 2,000 entries claimed in its slot, {baseline} before"
    );
    assert!(
        held <= baseline * 3 + 100,
        "a claim read {held} pages after 22,000 claims under a held purge, {baseline} before"
    );
    drop((conn, holder));
    db.drop_database().await;
}
