//! The plans of the listings and of stats: each reads the index range of
//! its queue, state, key or id, never every live job or history row.

use std::time::Duration;

use queue_core::{
    DequeueRequest, JobFilter, JobState, NewJob, QueueName, Retry, Storage, UniqueKey, WorkerId,
};
use queue_sqlite::SqliteStorage;
use serde_json::json;

async fn fill(storage: &SqliteStorage, queue: &str, n: usize) {
    for start in (0..n).step_by(1_000) {
        let jobs = (start..(start + 1_000).min(n))
            .map(|i| NewJob::new(queue, json!({ "i": i })))
            .collect();
        storage.enqueue_batch(jobs).await.expect("enqueue");
    }
}

async fn claim(
    storage: &SqliteStorage,
    queue: &str,
    n: u32,
    lease: Duration,
) -> Vec<queue_core::Job> {
    let request = DequeueRequest::new(
        vec![QueueName::new(queue).expect("valid")],
        n,
        lease,
        WorkerId::new("explain").expect("valid"),
    )
    .expect("valid request");
    storage.dequeue(&request).await.expect("claim")
}

/// The steps of `plan` that read a whole table or index of jobs or
/// history (`SCAN`), but for the partial indexes of the leased and the
/// exhausted jobs, which hold only those.
fn full_reads(plan: &[String]) -> Vec<&String> {
    plan.iter()
        .filter(|step| {
            let target = step.strip_prefix("SCAN ").and_then(|s| s.split(' ').next());
            matches!(target, Some("job_queue" | "job_history" | "j" | "q" | "h"))
                && !step.contains("job_queue_lease_until")
                && !step.contains("job_queue_exhausted")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_read_their_queue_and_state_wherever_the_ids_sit() {
    let storage = SqliteStorage::connect("sqlite::memory:")
        .await
        .expect("open");
    // The queue listed holds the oldest ids, as a quiet queue does beside
    // a busy one; the claim took its oldest (running), some of those
    // failed back to wait for a retry (scheduled, old ids), the next ones
    // stalled. Then a keyed job and a busy queue's newer jobs, which no
    // listing of the old queue and no listing of a rare state may read
    // through.
    fill(&storage, "old", 5_000).await;
    let held = claim(&storage, "old", 200, Duration::from_secs(3_600)).await;
    for job in held.iter().step_by(10) {
        let lease = job.lease().expect("leased");
        storage
            .nack(
                &lease,
                json!("retry"),
                Retry::After(Duration::from_secs(3_600)),
            )
            .await
            .expect("nack");
    }
    claim(&storage, "old", 20, Duration::from_millis(1)).await;
    storage
        .enqueue_batch(vec![NewJob::new("old", json!({})).unique_key("the-key")])
        .await
        .expect("enqueue keyed");
    fill(&storage, "busy", 5_000).await;
    tokio::time::sleep(Duration::from_millis(5)).await;

    let old = QueueName::new("old").expect("valid");
    let page = |queue: Option<&QueueName>, state| JobFilter {
        queue: queue.cloned(),
        state,
        limit: 50,
        ..JobFilter::default()
    };
    let mut filters = vec![
        ("any state", page(Some(&old), None)),
        (
            "a deep page",
            JobFilter {
                before: Some(held[100].id),
                ..page(Some(&old), None)
            },
        ),
        (
            "a unique key",
            JobFilter {
                unique_key: Some(UniqueKey::new("the-key").expect("valid")),
                ..page(None, None)
            },
        ),
        (
            "an id",
            JobFilter {
                id: Some(held[0].id),
                ..page(None, None)
            },
        ),
    ];
    for state in JobState::ALL {
        filters.push((state.as_str(), page(Some(&old), Some(state))));
        if state != JobState::Pending {
            filters.push((state.as_str(), page(None, Some(state))));
        }
    }
    for (what, filter) in filters {
        let expected = match (filter.state, &filter.unique_key, filter.id) {
            (_, Some(_), _) | (_, _, Some(_)) => 1,
            (Some(JobState::Scheduled | JobState::Stalled), _, _) => 20,
            (Some(JobState::Exhausted | JobState::Waiting), _, _) => 0,
            _ => 50,
        };
        let listed = storage.list_jobs(&filter).await.expect("list");
        assert_eq!(listed.jobs.len(), expected, "{what}: {filter:?}");
        let plan = storage.explain_list_jobs(&filter).await.expect("explain");
        assert!(
            full_reads(&plan).is_empty(),
            "{what} ({filter:?}) reads every job: {plan:#?}"
        );
    }
    // Over every queue, newest first from the end of the primary key: a
    // page's rows, no sort of every job.
    for state in [None, Some(JobState::Pending)] {
        let plan = storage
            .explain_list_jobs(&page(None, state))
            .await
            .expect("explain");
        assert!(
            !plan.iter().any(|step| step.contains("TEMP B-TREE")),
            "{state:?}: {plan:#?}"
        );
    }

    let plan = storage.explain_stats().await.expect("explain");
    assert!(full_reads(&plan).is_empty(), "stats: {plan:#?}");
}

#[tokio::test]
async fn history_listings_read_their_queue_and_status_wherever_the_ids_sit() {
    let storage = SqliteStorage::connect("sqlite::memory:")
        .await
        .expect("open");
    let filters = queue_testkit::placement::history_beside_a_busy_queue(&storage, 5_000).await;
    for (what, filter, rows) in filters {
        let listed = storage.list_history(&filter).await.expect("list");
        assert_eq!(listed.records.len(), rows, "{what}: {filter:?}");
        let plan = storage
            .explain_list_history(&filter)
            .await
            .expect("explain");
        // Index ranges, merged by id when a queue's every status is
        // listed: no sort of a queue's whole history, and no read of every
        // row but the primary key's from its end, with no filter at all.
        let sorts = plan.iter().any(|step| step.contains("TEMP B-TREE"));
        if filter.queue.is_none() && filter.status.is_none() {
            assert!(!sorts, "{what}: {plan:#?}");
        } else {
            assert!(full_reads(&plan).is_empty(), "{what}: {plan:#?}");
            assert!(
                !sorts || (filter.queue.is_some() && filter.status.is_none()),
                "{what}: {plan:#?}"
            );
        }
    }
}

#[tokio::test]
async fn a_fair_claim_reads_each_group_s_head_not_its_backlog() {
    let storage = SqliteStorage::connect("sqlite::memory:")
        .await
        .expect("open");
    let tenants = QueueName::new("tenants").expect("valid");
    let limits = queue_core::QueueLimits {
        fair_groups: true,
        ..queue_core::QueueLimits::default()
    };
    storage
        .configure_queue(&tenants, &limits)
        .await
        .expect("configure");
    for start in (0..5_000).step_by(1_000) {
        let jobs = (start..start + 1_000)
            .map(|i| NewJob::new("tenants", json!({ "i": i })).group_key("large"))
            .collect();
        storage.enqueue_batch(jobs).await.expect("enqueue");
    }
    let first = claim(&storage, "tenants", 2, Duration::from_secs(60)).await;
    assert!(
        first
            .iter()
            .all(|job| job.group_key.as_ref().map(|g| g.as_str()) == Some("large"))
    );
    storage
        .enqueue(NewJob::new("tenants", json!({})).group_key("small"))
        .await
        .expect("enqueue small");
    let next = claim(&storage, "tenants", 1, Duration::from_secs(60)).await;
    assert_eq!(
        next[0].group_key.as_ref().map(|g| g.as_str()),
        Some("small"),
        "behind 4,998 jobs of large"
    );
    for group in [Some("large"), Some("small"), None] {
        let key = group.map(|g| queue_core::GroupKey::new(g).expect("valid"));
        let plans = storage
            .explain_fair_claim(&tenants, key.as_ref())
            .await
            .expect("explain");
        for plan in plans {
            // Every read of a job is a search of `job_queue_fair`; the
            // paused check a search of `queue_config`'s key.
            assert!(
                plan.iter()
                    .filter(|step| step.contains("job_queue"))
                    .all(|step| step.starts_with("SEARCH job_queue USING")
                        && step.contains("INDEX job_queue_fair (queue_name=?")),
                "{group:?}: {plan:#?}"
            );
            assert!(
                !plan.iter().any(|step| step.starts_with("SCAN")),
                "{group:?}: {plan:#?}"
            );
            assert!(
                !plan.iter().any(|step| step.contains("TEMP B-TREE")),
                "{group:?}: {plan:#?}"
            );
        }
    }
}
