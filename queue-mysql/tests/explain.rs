//! The claim reads short ranges of the ready ring's slots and its jobs by
//! primary key on a large backlog, and locks only about the rows it claims.

mod common;

use std::time::Duration;

use queue_core::{DequeueRequest, NewJob, QueueName, Storage, WorkerId};
use queue_testkit::placement;
use serde_json::json;

const BACKLOG: usize = 100_000;

fn request(queue: &str, limit: u32) -> DequeueRequest {
    DequeueRequest::new(
        vec![QueueName::new(queue).expect("valid")],
        limit,
        Duration::from_secs(30),
        WorkerId::new("explain").expect("valid"),
    )
    .expect("valid request")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_read_the_ready_ring_and_lock_few_rows_on_a_100k_backlog() {
    let (db, storage) = common::storage_in_new_database().await;
    for chunk in (0..BACKLOG).collect::<Vec<_>>().chunks(5_000) {
        let batch = chunk
            .iter()
            .map(|i| {
                let job = NewJob::new(
                    ["emails", "reports", "sync", "misc"][i % 4],
                    json!({"i": i}),
                )
                .priority((i % 7) as i32 - 3);
                if i % 10 == 0 {
                    job.delay(Duration::from_secs(3600))
                } else {
                    job
                }
            })
            .collect();
        storage.enqueue_batch(batch).await.expect("enqueue_batch");
    }
    let running = storage
        .dequeue(&request("emails", 200))
        .await
        .expect("dequeue");
    assert_eq!(running.len(), 200);

    let plan = storage
        .explain_dequeue(&request("emails", 10))
        .await
        .expect("explain");
    let slots: Vec<_> = plan
        .iter()
        .filter(|step| {
            step.table
                .as_deref()
                .is_some_and(|t| t.starts_with("job_ready_"))
        })
        .collect();
    assert_eq!(slots.len(), 5, "four slots and the inbox: {plan:?}");
    for slot in slots {
        assert_eq!(slot.index.as_deref(), Some("PRIMARY"), "{plan:?}");
        assert!(
            matches!(slot.operation.as_str(), "range" | "ref"),
            "a full or index scan: {plan:?}"
        );
        assert!(
            !slot
                .detail
                .as_deref()
                .unwrap_or_default()
                .contains("filesort"),
            "the claim order needs a sort: {plan:?}"
        );
    }
    let jobs = plan
        .iter()
        .find(|step| step.table.as_deref() == Some("j"))
        .unwrap_or_else(|| panic!("no step reads job_queue: {plan:?}"));
    assert_eq!(jobs.index.as_deref(), Some("PRIMARY"), "{plan:?}");
    assert_eq!(jobs.operation, "eq_ref", "{plan:?}");

    // With the wrong index InnoDB locked every row it scanned (190k for
    // LIMIT 10 in a measurement); with this one a claim locks about what it takes.
    let locked = storage
        .rows_locked_by_claim(&request("emails", 10))
        .await
        .expect("locks");
    assert!(locked <= 50, "a claim of 10 locked {locked} rows");

    // next_due probes the index per distinct priority (7 here) instead of
    // reading the 2.5k scheduled or 22.5k pending rows of the queue.
    let emails = QueueName::new("emails").expect("valid");
    let due = storage
        .next_due(std::slice::from_ref(&emails))
        .await
        .expect("next_due");
    assert!(
        due.is_some_and(|d| d > Duration::from_secs(3500)),
        "the delayed jobs are due in an hour: {due:?}"
    );
    let read = storage.rows_read_by_next_due(&emails).await.expect("reads");
    assert!(read <= 200, "next_due read {read} rows");
    db.drop_database().await;
}

/// An idle claim (nothing due) reads a few index entries per priority
/// level, not the jobs waiting for a later time; a claim with a few due
/// jobs reads those and stops at the first one not yet due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_do_not_read_jobs_that_are_not_due_yet() {
    let (db, storage) = common::storage_in_new_database().await;
    for chunk in (0..BACKLOG).collect::<Vec<_>>().chunks(5_000) {
        let batch = chunk
            .iter()
            .map(|i| {
                NewJob::new("delayed", json!({"i": i}))
                    .priority((i % 3) as i32)
                    .delay(Duration::from_secs(3600))
            })
            .collect();
        storage.enqueue_batch(batch).await.expect("enqueue_batch");
    }
    let idle = storage
        .rows_read_by_claim(&request("delayed", 16))
        .await
        .expect("reads");
    // At least the level probes: the counters do count this claim.
    eprintln!("an idle claim read {idle} rows");
    assert!((3..=100).contains(&idle), "an idle claim read {idle} rows");

    let due: Vec<_> = (0..3)
        .map(|i| NewJob::new("delayed", json!({"due": i})).priority(1))
        .collect();
    storage.enqueue_batch(due).await.expect("enqueue_batch");
    let busy = storage
        .rows_read_by_claim(&request("delayed", 16))
        .await
        .expect("reads");
    eprintln!("a claim of 3 due jobs read {busy} rows");
    assert!(
        (6..=120).contains(&busy),
        "a claim of 3 due jobs read {busy} rows"
    );
    let claimed = storage
        .dequeue(&request("delayed", 16))
        .await
        .expect("dequeue");
    assert_eq!(claimed.len(), 3, "the measuring claims took nothing");
    db.drop_database().await;
}

/// An aging queue's claim reads each priority level's first entries (a
/// probe and a short range per level and source), not the backlog: with
/// seven levels of 12,000 due jobs each it reads a few hundred rows, and
/// takes the top level's jobs while none has aged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aging_claim_reads_each_level_s_first_jobs_not_the_backlog() {
    let (db, storage) = common::storage_in_new_database().await;
    let queue = QueueName::new("aging").expect("valid");
    let limits = queue_core::QueueLimits {
        priority_aging: Some(Duration::from_secs(3600)),
        ..queue_core::QueueLimits::default()
    };
    storage
        .configure_queue(&queue, &limits)
        .await
        .expect("configure");
    let levels: i32 = 7;
    for chunk in (0..12_000 * levels).collect::<Vec<_>>().chunks(5_000) {
        let batch = chunk
            .iter()
            .map(|i| NewJob::new("aging", json!({"i": i})).priority(i % levels))
            .collect();
        storage.enqueue_batch(batch).await.expect("enqueue_batch");
    }
    let read = storage
        .rows_read_by_claim(&request("aging", 10))
        .await
        .expect("reads");
    eprintln!("an aging claim of 10 over {levels} levels read {read} rows");
    assert!(
        (7..=1_500).contains(&read),
        "an aging claim of 10 over {levels} levels read {read} rows"
    );
    let claimed = storage
        .dequeue(&request("aging", 10))
        .await
        .expect("dequeue");
    assert_eq!(claimed.len(), 10);
    assert!(
        claimed.iter().all(|job| job.priority == levels - 1),
        "nothing has aged yet: the top level first"
    );
    db.drop_database().await;
}

/// Enqueues `n` jobs into `queue`, in batches.
async fn fill(storage: &queue_mysql::MySqlStorage, queue: &str, n: usize) {
    for start in (0..n).step_by(1_000) {
        let jobs = (start..(start + 1_000).min(n))
            .map(|i| NewJob::new(queue, json!({ "i": i })))
            .collect();
        storage.enqueue_batch(jobs).await.expect("enqueue");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_read_their_queue_and_state_wherever_the_ids_sit() {
    let (_db, storage) = common::storage_in_new_database().await;
    // The queue listed holds the oldest ids, as a quiet queue does beside a
    // busy one; the claim took its oldest (running), some of those failed
    // back to wait for a retry (scheduled, old ids), the next ones stalled.
    // Then a busy queue's newer jobs, which no listing of the old queue
    // and no listing of a rare state may read through.
    const JOBS: usize = 20_000;
    fill(&storage, "old", JOBS).await;
    let claim = |n, lease| {
        let request = DequeueRequest::new(
            vec![QueueName::new("old").expect("valid")],
            n,
            lease,
            WorkerId::new("explain").expect("valid"),
        )
        .expect("valid request");
        let storage = storage.clone();
        async move { storage.dequeue(&request).await.expect("claim") }
    };
    let held = claim(200, Duration::from_secs(3_600)).await;
    for job in held.iter().step_by(10) {
        let lease = job.lease().expect("leased");
        storage
            .nack(
                &lease,
                json!("retry"),
                queue_core::Retry::After(Duration::from_secs(3_600)),
            )
            .await
            .expect("nack");
    }
    claim(20, Duration::from_millis(1)).await;
    fill(&storage, "busy", JOBS).await;
    tokio::time::sleep(Duration::from_millis(5)).await;

    let old = QueueName::new("old").expect("valid");
    let page = |queue: Option<&QueueName>, state| queue_core::JobFilter {
        queue: queue.cloned(),
        state,
        limit: 50,
        ..queue_core::JobFilter::default()
    };
    let mut filters = vec![("any state", page(Some(&old), None))];
    for state in queue_core::JobState::ALL {
        filters.push((state.as_str(), page(Some(&old), Some(state))));
        filters.push((state.as_str(), page(None, Some(state))));
    }
    for (what, filter) in filters {
        let expected = match filter.state {
            Some(queue_core::JobState::Scheduled | queue_core::JobState::Stalled) => 20,
            Some(queue_core::JobState::Exhausted | queue_core::JobState::Waiting) => 0,
            _ => 50,
        };
        let listed = storage.list_jobs(&filter).await.expect("list");
        assert_eq!(listed.jobs.len(), expected, "{what}: {filter:?}");
        // The page, the leased or scheduled jobs in scope (a few hundred)
        // and the index entries leading to them. Reading the busy queue's
        // jobs newest first, or the old queue's pending backlog, to reach
        // them reads thousands.
        let rows = storage.rows_read_by_listing(&filter).await.expect("reads");
        assert!(
            rows <= 1_000,
            "{what} (queue {:?}) read {rows} rows",
            filter.queue.as_ref().map(QueueName::as_str)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_listings_read_their_queue_and_status_wherever_the_ids_sit() {
    let (_db, storage) = common::storage_in_new_database().await;
    let filters = queue_testkit::placement::history_beside_a_busy_queue(&storage, 20_000).await;
    for (what, filter, rows) in filters {
        let listed = storage.list_history(&filter).await.expect("list");
        assert_eq!(listed.records.len(), rows, "{what}: {filter:?}");
        // A page per status at most and the index entries leading to it.
        // Reading the busy queue's 20,000 rows newest first to reach the
        // quiet queue's reads thousands.
        let read = storage
            .rows_read_by_history_listing(&filter)
            .await
            .expect("reads");
        assert!(read <= 100, "{what} read {read} rows");
    }
}

/// A fair claim reads a row or two of each group and level, and the jobs
/// it takes: beside 100,000 jobs of one group it reads about what it
/// reads beside 1,000, and serves the other groups' jobs in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_claims_read_each_group_not_its_backlog() {
    let (db, storage) = common::storage_in_new_database().await;
    let mut reads = Vec::new();
    for (queue, backlog) in [("fair_small", 1_000), ("fair_big", BACKLOG)] {
        placement::fair_queue_behind_a_backlog(&storage, queue, backlog).await;
        reads.push(
            storage
                .rows_read_by_claim(&request(queue, 8))
                .await
                .expect("reads"),
        );
        let claimed = storage.dequeue(&request(queue, 8)).await.expect("dequeue");
        assert_eq!(
            placement::groups_of(&claimed),
            placement::FAIR_CLAIM_GROUPS,
            "{queue}"
        );
    }
    let (small, big) = (reads[0], reads[1]);
    eprintln!("fair claim of 8: {small} rows read beside 1,000 jobs, {big} beside 100,000");
    assert!(
        small > 0 && big <= small + small / 5 + 40,
        "a fair claim read {big} rows beside 100,000 jobs, {small} beside 1,000"
    );
    db.drop_database().await;
}

/// A grouped claim counts the leases of the groups it meets among its
/// candidates, not every job of the queue: beside 100,000 jobs in 1,000
/// groups it reads about what it reads beside 2,000, and still takes one
/// job a group (each group's jobs come in pairs) and passes over the
/// groups whose one slot is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouped_claims_count_the_groups_they_meet_not_the_queue() {
    let (db, storage) = common::storage_in_new_database().await;
    let mut reads = Vec::new();
    for (queue, backlog) in [("grouped_small", 2_000), ("grouped_big", BACKLOG)] {
        for start in (0..backlog).step_by(5_000) {
            let jobs = (start..(start + 5_000).min(backlog))
                .map(|i| {
                    NewJob::new(queue, json!({ "i": i })).group_key(format!("g{}", i / 2 % 1_000))
                })
                .collect();
            storage.enqueue_batch(jobs).await.expect("enqueue");
        }
        let limits = queue_core::QueueLimits {
            group_concurrency: Some(1),
            ..queue_core::QueueLimits::default()
        };
        let name = QueueName::new(queue).expect("valid");
        storage
            .configure_queue(&name, &limits)
            .await
            .expect("configure");
        let running = storage.dequeue(&request(queue, 16)).await.expect("dequeue");
        reads.push(
            storage
                .rows_read_by_claim(&request(queue, 16))
                .await
                .expect("reads"),
        );
        let claimed = storage.dequeue(&request(queue, 16)).await.expect("dequeue");
        let mut groups: Vec<&str> = placement::groups_of(&running);
        groups.extend(placement::groups_of(&claimed));
        let distinct: std::collections::HashSet<&str> = groups.iter().copied().collect();
        assert_eq!(
            (running.len(), claimed.len(), distinct.len()),
            (16, 16, 32),
            "{queue}: two claims of 16 take 32 jobs of 32 groups"
        );
    }
    let (small, big) = (reads[0], reads[1]);
    eprintln!("grouped claim of 16: {small} rows read beside 2,000 jobs, {big} beside 100,000");
    assert!(
        small > 0 && big <= small + small / 5 + 40,
        "a grouped claim read {big} rows beside 100,000 jobs, {small} beside 2,000"
    );
    db.drop_database().await;
}
