//! The ready ring (migration 0010) against a real server: a claim's cost
//! does not grow with the jobs claimed while a transaction holds the xmin
//! horizon back, and a schema migrated before the ring keeps every live
//! job claimable.

mod common;

use std::time::Duration;

use queue_core::backend::PlanStep;
use queue_core::{DequeueRequest, ManualClock, NewJob, QueueName, Storage, WorkerId};
use queue_postgres::{MIGRATIONS, PgStorage};
use serde_json::json;
use sqlx::{AssertSqlSafe, Connection, PgConnection, PgPool};

const LEASE: Duration = Duration::from_secs(3600);

fn request(limit: u32) -> DequeueRequest {
    DequeueRequest::new(
        vec![QueueName::new("q").expect("valid")],
        limit,
        LEASE,
        WorkerId::new("w").expect("valid"),
    )
    .expect("valid request")
}

async fn run(pool: &PgPool, statement: &str) {
    sqlx::raw_sql(AssertSqlSafe(statement.to_owned()))
        .execute(pool)
        .await
        .unwrap_or_else(|e| panic!("{statement}: {e}"));
}

/// Buffers (shared hits and reads) of `query` executed once.
async fn buffers_of(pool: &PgPool, query: &str) -> f64 {
    let plan: serde_json::Value = sqlx::query_scalar(AssertSqlSafe(format!(
        "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {query}"
    )))
    .fetch_one(pool)
    .await
    .unwrap_or_else(|e| panic!("{query}: {e}"));
    let root = &plan[0]["Plan"];
    let count = |key: &str| root[key].as_f64().unwrap_or(0.0);
    count("Shared Hit Blocks") + count("Shared Read Blocks")
}

fn claim_buffers(steps: &[PlanStep]) -> f64 {
    steps.first().and_then(|s| s.buffers).unwrap_or(0.0)
}

/// The fewest buffers of three analyzed claims (each rolled back). A
/// rotation started in the background by an earlier claim TRUNCATEs a
/// slot, and the next claim plans again and reads the catalog: a cost of
/// that claim alone, not of the entries it steps over, which every
/// repeat reads again.
async fn least_claim_buffers(storage: &PgStorage) -> f64 {
    let mut least = f64::INFINITY;
    for _ in 0..3 {
        let plan = storage
            .explain_dequeue_analyzed(&request(16))
            .await
            .expect("explain");
        least = least.min(claim_buffers(&plan));
    }
    least
}

/// 20,000 jobs claimed while another session holds a REPEATABLE READ
/// transaction with an xid open: VACUUM can remove none of their index
/// entries (the scan in claim order over `job_queue_dequeue`, what claims
/// read before the ring, still steps over all of them), but four
/// rotations of the ring TRUNCATE its slots, and the next claim reads a
/// few pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_does_not_step_over_jobs_claimed_while_the_horizon_is_held() {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    let s = schema.name().to_owned();
    // What a claim of one job reads in a queue with no history: the
    // pick's fixed cost (configuration, limits, the indexes' upper pages).
    storage
        .enqueue(NewJob::new("q", json!({ "first": true })))
        .await
        .expect("enqueue");
    let baseline = least_claim_buffers(&storage).await;
    assert_eq!(
        storage.dequeue(&request(16)).await.expect("dequeue").len(),
        1
    );
    let mut holder = PgConnection::connect_with(&schema.connect_options())
        .await
        .expect("holder connects");
    for statement in [
        "BEGIN ISOLATION LEVEL REPEATABLE READ".to_owned(),
        "SELECT pg_current_xact_id()".to_owned(),
        format!("SELECT count(*) FROM \"{s}\".job_queue"),
    ] {
        sqlx::raw_sql(AssertSqlSafe(statement))
            .execute(&mut holder)
            .await
            .expect("holder");
    }

    for _ in 0..4 {
        let jobs = (0..5_000)
            .map(|i| NewJob::new("q", json!({ "i": i })))
            .collect();
        storage.enqueue_batch(jobs).await.expect("enqueue");
        while !storage
            .dequeue(&request(1_000))
            .await
            .expect("dequeue")
            .is_empty()
        {}
    }
    run(&pool, &format!("VACUUM \"{s}\".job_queue")).await;
    for part in 0..4 {
        run(&pool, &format!("VACUUM \"{s}\".job_ready_{part}")).await;
    }
    storage
        .enqueue(NewJob::new("q", json!({ "after": true })))
        .await
        .expect("enqueue");

    let old_scan = buffers_of(
        &pool,
        &format!(
            "SELECT id FROM \"{s}\".job_queue WHERE queue_name = 'q' AND lease_until IS NULL
             ORDER BY priority DESC, available_at, id LIMIT 1"
        ),
    )
    .await;
    assert!(
        old_scan >= 100.0,
        "the held horizon kept the dequeue index's dead entries: a scan in claim order read only {old_scan} buffers"
    );

    // Four rotations (a try may meet the one the last claim started in
    // the background, and return at once without rotating).
    let mut rotations = 0;
    for _ in 0..100 {
        let rotated: bool = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT \"{s}\".queue_ready_rotate(0, 0, 0, 5000, 10000)"
        )))
        .fetch_one(&pool)
        .await
        .expect("rotate");
        rotations += usize::from(rotated);
        if rotations == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(rotations, 4, "rotations with nothing in their way rotate");
    let claim = least_claim_buffers(&storage).await;
    eprintln!(
        "claim buffers: {baseline} with no history, {claim} after 20,000 claims under the holder (old scan {old_scan})"
    );
    assert!(
        claim > 0.0 && claim <= baseline + 20.0 && claim * 4.0 <= old_scan,
        "after four rotations the claim read {claim} buffers, with no history {baseline} (the old scan: {old_scan})"
    );
    let claimed = storage.dequeue(&request(16)).await.expect("dequeue");
    assert_eq!(
        claimed.len(),
        1,
        "the job enqueued last, moved by the rotations"
    );
    assert_eq!(claimed[0].payload, json!({ "after": true }));

    sqlx::raw_sql("ROLLBACK")
        .execute(&mut holder)
        .await
        .expect("holder ends");
    holder.close().await.expect("close");
    pool.close().await;
    schema.drop_schema().await;
}

/// A rotation never empties a slot that an uncommitted enqueue wrote to:
/// it waits for the slot's lock, gives up, and the job is claimable once
/// its transaction commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_leaves_the_entry_of_an_uncommitted_enqueue() {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    let s = schema.name().to_owned();
    let rotate = format!("SELECT \"{s}\".queue_ready_rotate(0, 0, 0, 50, 10000)");
    let mut tx = pool.begin().await.expect("begin");
    storage
        .enqueue_in(&mut tx, NewJob::new("q", json!({ "late": true })))
        .await
        .expect("enqueue_in");
    // The entry is in the current slot; three rotations reach every other
    // slot, the fourth would empty this one.
    for round in 0..4 {
        let rotated: bool = sqlx::query_scalar(AssertSqlSafe(rotate.clone()))
            .fetch_one(&pool)
            .await
            .expect("rotate");
        assert_eq!(rotated, round < 3, "rotation {round}");
    }
    tx.commit().await.expect("commit");
    let claimed = storage.dequeue(&request(16)).await.expect("dequeue");
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].payload, json!({ "late": true }));
    pool.close().await;
    schema.drop_schema().await;
}

/// A schema at migration 0009 holding a pending, a scheduled and a leased
/// (expired) job, written by plain SQL: after migrating to the ring (and
/// every migration since) each is claimed when it should be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_keeps_pending_scheduled_and_leased_jobs_claimable() {
    let (schema, pool) = common::schema_at(
        9,
        "INSERT INTO job_queue (queue_name, payload) VALUES ('q', '\"pending\"');
         INSERT INTO job_queue (queue_name, payload, available_at)
             VALUES ('q', '\"scheduled\"', now() + interval '1 hour');
         INSERT INTO job_queue (queue_name, payload, attempts, lease_until, locked_by)
             VALUES ('q', '\"leased\"', 1, now() - interval '1 second', 'gone')",
    )
    .await;
    let s = schema.name().to_owned();

    let now: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT now()")
        .fetch_one(&pool)
        .await
        .expect("now");
    let clock = ManualClock::new(now);
    let storage = PgStorage::from_pool(pool.clone())
        .with_schema(&s)
        .expect("valid")
        .with_clock(clock.clone());
    let after_0009: Vec<u32> = MIGRATIONS
        .iter()
        .map(|m| m.version)
        .filter(|v| *v > 9)
        .collect();
    assert_eq!(storage.migrate().await.expect("migrate"), after_0009);

    let payloads = |jobs: Vec<queue_core::Job>| -> Vec<serde_json::Value> {
        jobs.into_iter().map(|j| j.payload).collect()
    };
    let first = storage.dequeue(&request(16)).await.expect("dequeue");
    assert_eq!(payloads(first), vec![json!("pending")]);
    let reclaimed = storage.reclaim_stalled(16).await.expect("reclaim");
    assert_eq!(reclaimed.requeued, 1);
    let second = storage.dequeue(&request(16)).await.expect("dequeue");
    assert_eq!(payloads(second), vec![json!("leased")]);
    clock.advance(Duration::from_secs(7200));
    let third = storage.dequeue(&request(16)).await.expect("dequeue");
    assert_eq!(payloads(third), vec![json!("scheduled")]);
    pool.close().await;
    schema.drop_schema().await;
}

/// The ring entries of the jobs `claim` leases (of queues `a` and `b`,
/// 40 each), counted after the claim: a lease must delete them (migration
/// 0011: from the slots its pick read them in), whichever statement
/// claims.
async fn entries_left_after(limited: bool, claim: DequeueRequest) -> (usize, i64) {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    let s = schema.name().to_owned();
    if limited {
        for queue in ["a", "b"] {
            let limits = queue_core::QueueLimits {
                concurrency: Some(1_000),
                ..Default::default()
            };
            storage
                .configure_queue(&QueueName::new(queue).expect("valid"), &limits)
                .await
                .expect("configure");
        }
    }
    let jobs = (0..40)
        .flat_map(|i| [NewJob::new("a", json!(i)), NewJob::new("b", json!(i))])
        .collect();
    storage.enqueue_batch(jobs).await.expect("enqueue");
    let claimed = storage.dequeue(&claim).await.expect("dequeue");
    let ids: Vec<i64> = claimed.iter().map(|j| j.id.get()).collect();
    let left: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT count(*) FROM \"{s}\".job_ready WHERE id = ANY($1)"
    )))
    .bind(&ids)
    .fetch_one(&pool)
    .await
    .expect("count");
    pool.close().await;
    schema.drop_schema().await;
    (claimed.len(), left)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_claim_deletes_the_entries_of_the_jobs_it_leases() {
    let worker = || WorkerId::new("w").expect("valid");
    let queue = |name: &str| QueueName::new(name).expect("valid");
    let one = || DequeueRequest::new(vec![queue("a")], 30, LEASE, worker()).expect("valid");
    // Caps that add up to the limit: each queue's pick locks what it takes.
    let both = || {
        DequeueRequest::with_queue_limits(vec![(queue("a"), 15), (queue("b"), 15)], LEASE, worker())
            .expect("valid")
    };
    // Caps over the limit: the picks only read, the winners are locked by id.
    let over =
        || DequeueRequest::new(vec![queue("a"), queue("b")], 30, LEASE, worker()).expect("valid");
    for (path, limited, claim) in [
        ("one queue", false, one()),
        ("several queues", false, both()),
        ("several queues over their limit", false, over()),
        ("one limited queue", true, one()),
        ("several limited queues", true, both()),
        ("several limited queues over their limit", true, over()),
    ] {
        assert!(claim.over_subscribed() == path.contains("over"), "{path}");
        let (claimed, left) = entries_left_after(limited, claim).await;
        assert_eq!(claimed, 30, "{path}");
        assert_eq!(
            left, 0,
            "{path}: the entries of {claimed} leased jobs were kept"
        );
    }
}

/// Since migration 0012 stats counts ring entries without reading their
/// jobs, so plain-SQL updates that move a pending job out of the ring or
/// to another key must take its entry along: rescheduled by hand it is
/// counted scheduled only, a priority changed by hand leaves one entry,
/// and an exhausted job has none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_by_hand_keep_one_entry_per_job_in_the_ring() {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    let s = schema.name().to_owned();
    let ids: Vec<i64> = storage
        .enqueue_batch((0..3).map(|i| NewJob::new("q", json!(i))).collect())
        .await
        .expect("enqueue")
        .iter()
        .map(|o| o.id.get())
        .collect();
    let counts = || async {
        let stats = storage.stats().await.expect("stats");
        let q = stats.iter().find(|s| s.queue.as_str() == "q").expect("q");
        (q.pending, q.scheduled, q.exhausted)
    };
    assert_eq!(counts().await, (3, 0, 0));
    run(
        &pool,
        &format!(
            "UPDATE \"{s}\".job_queue SET available_at = now() + interval '1 hour', updated_at = now()
             WHERE id = {}",
            ids[0]
        ),
    )
    .await;
    assert_eq!(counts().await, (2, 1, 0), "rescheduled by hand");
    run(
        &pool,
        &format!(
            "UPDATE \"{s}\".job_queue SET priority = 5 WHERE id = {}",
            ids[1]
        ),
    )
    .await;
    assert_eq!(counts().await, (2, 1, 0), "a priority changed by hand");
    run(
        &pool,
        &format!(
            "UPDATE \"{s}\".job_queue SET attempts = max_attempts WHERE id = {}",
            ids[2]
        ),
    )
    .await;
    assert_eq!(counts().await, (1, 1, 1), "exhausted by hand");
    let entries: Vec<i64> = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT id FROM \"{s}\".job_ready ORDER BY id"
    )))
    .fetch_all(&pool)
    .await
    .expect("entries");
    assert_eq!(
        entries,
        vec![ids[1]],
        "one entry, for the one job in the ring"
    );
    pool.close().await;
    schema.drop_schema().await;
}

/// Migration 0013: a current slot rotates once it holds the size given
/// (or is the idle period old), not on the clock alone, since every
/// TRUNCATE makes each session plan its claims again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_rotates_once_it_has_taken_entries_enough() {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    let s = schema.name().to_owned();
    let rotate = |idle_ms: i64| {
        let pool = pool.clone();
        let statement =
            format!("SELECT \"{s}\".queue_ready_rotate(0, {idle_ms}, 32768, 5000, 10000)");
        async move {
            sqlx::query_scalar::<_, bool>(AssertSqlSafe(statement))
                .fetch_one(&pool)
                .await
                .expect("rotate")
        }
    };
    assert!(rotate(0).await, "a new ring's first rotation");
    storage
        .enqueue(NewJob::new("q", json!("one")))
        .await
        .expect("enqueue");
    assert!(
        !rotate(3_600_000).await,
        "one entry: the slot stays current"
    );
    storage
        .enqueue_batch((0..1_000).map(|i| NewJob::new("q", json!(i))).collect())
        .await
        .expect("enqueue");
    assert!(rotate(3_600_000).await, "a thousand entries: it rotates");
    assert!(
        rotate(0).await,
        "past the idle period an empty slot rotates too"
    );
    let claimed = storage.dequeue(&request(1_000)).await.expect("dequeue");
    assert_eq!(claimed.len(), 1_000, "the rotations kept every entry");
    pool.close().await;
    schema.drop_schema().await;
}
