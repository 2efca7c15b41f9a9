//! Workflows on standalone Redis beyond the conformance cases: a
//! dependant in a queue whose name is escaped in its keys (and a namespace
//! with a colon) is released and cancelled across queues, a reclaim that
//! fails two dependencies of a job names the lowest, a retried dead letter
//! keeps its dependencies, the keys a workflow writes are gone once
//! nothing needs them, and a batch's callback waits for a job of another
//! queue that joined it.

mod common;

use std::time::Duration;

use queue_core::{
    Capability, DependencyFailure, DequeueRequest, FinalStatus, Job, JobId, JobState, Lease,
    ManualClock, NewJob, PruneRequest, QueueError, QueueName, Retry, Storage, WorkerId,
};
use queue_redis::RedisStorage;
use serde_json::json;

/// Queue names whose keys escape `%`, `{` and `}`.
const ODD: &str = "{odd}%7D";
const ODDER: &str = "%{x";

async fn storage(namespace: &str) -> RedisStorage {
    common::connect(false)
        .await
        .with_namespace(namespace)
        .expect("a valid namespace")
}

async fn claim(storage: &RedisStorage, queue: &str) -> Job {
    claim_for(storage, queue, Duration::from_secs(30)).await
}

async fn claim_for(storage: &RedisStorage, queue: &str, lease: Duration) -> Job {
    let request = DequeueRequest::new(
        vec![QueueName::new(queue).expect("name")],
        1,
        lease,
        WorkerId::new("w").expect("worker id"),
    )
    .expect("request");
    let mut jobs = storage.dequeue(&request).await.expect("dequeue");
    assert_eq!(jobs.len(), 1, "one job claimable in {queue}");
    jobs.remove(0)
}

fn lease(job: &Job) -> Lease {
    Lease {
        job_id: job.id,
        worker_id: job.locked_by.clone().expect("claimed"),
        attempt: job.attempts,
    }
}

async fn state(storage: &RedisStorage, id: JobId) -> Option<JobState> {
    let now = storage.now().await.expect("now");
    storage
        .get_job(id)
        .await
        .expect("get_job")
        .map(|job| job.state(now))
}

async fn exists(conn: &mut redis::aio::MultiplexedConnection, key: String) -> bool {
    redis::cmd("EXISTS")
        .arg(&key)
        .query_async::<i64>(conn)
        .await
        .expect("exists")
        == 1
}

#[tokio::test]
async fn dependants_in_queues_with_escaped_names_are_released_and_cancelled() {
    let namespace = format!("{}:wf", common::fresh_namespace());
    let storage = storage(&namespace).await;
    assert!(storage.capabilities().supports(Capability::Dependencies));

    let a = storage
        .enqueue(NewJob::new("q", json!(1)))
        .await
        .expect("a")
        .id;
    let released = storage
        .enqueue(NewJob::new(ODD, json!(2)).depends_on(a))
        .await
        .expect("released")
        .id;
    let failing = storage
        .enqueue(NewJob::new(ODD, json!(3)).max_attempts(1))
        .await
        .expect("failing")
        .id;
    let cancelled = storage
        .enqueue(NewJob::new(ODDER, json!(4)).depends_on(failing))
        .await
        .expect("cancelled")
        .id;
    let behind = storage
        .enqueue(NewJob::new("q", json!(5)).depends_on(cancelled))
        .await
        .expect("behind")
        .id;
    assert_eq!(state(&storage, released).await, Some(JobState::Waiting));

    let first = claim(&storage, "q").await;
    assert_eq!(first.id, a);
    storage.ack(&lease(&first), None).await.expect("ack");
    assert_eq!(state(&storage, released).await, Some(JobState::Pending));

    // Pending since the ack, the released job comes after `failing`.
    let third = claim(&storage, ODD).await;
    assert_eq!(third.id, failing);
    let second = claim(&storage, ODD).await;
    assert_eq!(second.id, released);
    storage
        .nack(&lease(&third), json!("boom"), Retry::Never)
        .await
        .expect("nack");
    for (id, dependency, status) in [
        (cancelled, failing, FinalStatus::DeadLetter),
        (behind, cancelled, FinalStatus::Cancelled),
    ] {
        let record = storage
            .get_history(id)
            .await
            .expect("get_history")
            .expect("archived");
        assert_eq!(record.status, FinalStatus::Cancelled);
        assert_eq!(
            record.last_error,
            Some(queue_core::dependency_failed(dependency, status))
        );
    }
    let links = storage.job_links(cancelled).await.expect("job_links");
    assert_eq!(
        links.dependencies.iter().map(|l| l.id).collect::<Vec<_>>(),
        [failing]
    );
    assert_eq!(
        links
            .dependants
            .iter()
            .map(|l| l.queue.clone())
            .collect::<Vec<_>>(),
        [Some(QueueName::new("q").expect("name"))]
    );
    common::purge(false, namespace).await;
}

#[tokio::test]
async fn workflow_keys_go_once_nothing_needs_them() {
    let namespace = common::fresh_namespace();
    let storage = storage(&namespace).await;
    let mut conn = common::raw_connection().await;
    let prefix = format!("{namespace}:{{q}}");

    let a = storage
        .enqueue(NewJob::new("q", json!(1)))
        .await
        .expect("a")
        .id;
    let w = storage
        .enqueue(NewJob::new("q", json!(2)).depends_on(a))
        .await
        .expect("w")
        .id;
    let waits = format!("{prefix}:waits:{:019}", w.get());
    let dependants = format!("{prefix}:dependants:{:019}", a.get());
    assert!(exists(&mut conn, waits.clone()).await);
    assert!(exists(&mut conn, dependants.clone()).await);

    // Cancelled while waiting, the job forgets what it waited for; its
    // dependency still lists it.
    storage.cancel(w).await.expect("cancel");
    assert!(!exists(&mut conn, waits).await);
    let links = storage.job_links(a).await.expect("job_links");
    assert_eq!(links.dependants.len(), 1);

    // Finishing `a` finds nothing left to count; pruning its row drops
    // its dependants.
    let held = claim(&storage, "q").await;
    assert_eq!(held.id, a);
    storage.ack(&lease(&held), None).await.expect("ack");
    let pruned = storage
        .prune_history(&PruneRequest {
            older_than: Duration::ZERO,
            status: None,
            limit: 100,
        })
        .await
        .expect("prune");
    assert_eq!(pruned, 2);
    assert!(!exists(&mut conn, dependants).await);
    assert!(matches!(
        storage.job_links(a).await,
        Err(queue_core::QueueError::NotFound { .. })
    ));
    common::purge(false, namespace).await;
}

#[tokio::test]
async fn a_reclaim_failing_two_dependencies_names_the_lowest() {
    let namespace = common::fresh_namespace();
    let clock = ManualClock::new(chrono::Utc::now());
    let storage = storage(&namespace).await.with_clock(clock.clone());
    let low = storage
        .enqueue(NewJob::new("q", json!(1)).max_attempts(1))
        .await
        .expect("low")
        .id;
    let high = storage
        .enqueue(NewJob::new("q", json!(2)).max_attempts(1))
        .await
        .expect("high")
        .id;
    let waiter = storage
        .enqueue(NewJob::new("after", json!(3)).depends_on_all([high, low]))
        .await
        .expect("waiter")
        .id;
    // `high`'s lease ends first, so the reclaim takes it first.
    assert_eq!(
        claim_for(&storage, "q", Duration::from_secs(60)).await.id,
        low
    );
    assert_eq!(
        claim_for(&storage, "q", Duration::from_secs(30)).await.id,
        high
    );
    clock.advance(Duration::from_secs(61));
    let outcome = storage.reclaim_stalled(10).await.expect("reclaim");
    assert_eq!(outcome.dead_lettered, 2);
    let record = storage
        .get_history(waiter)
        .await
        .expect("get_history")
        .expect("cancelled");
    assert_eq!(
        record.last_error,
        Some(queue_core::dependency_failed(low, FinalStatus::DeadLetter))
    );
    common::purge(false, namespace).await;
}

#[tokio::test]
async fn a_retried_dead_letter_keeps_its_dependencies() {
    let namespace = common::fresh_namespace();
    let storage = storage(&namespace).await;
    let a = storage
        .enqueue(NewJob::new("q", json!(1)))
        .await
        .expect("a")
        .id;
    let w = storage
        .enqueue(
            NewJob::new("q", json!(2))
                .max_attempts(1)
                .depends_on(a)
                .on_dependency_failure(DependencyFailure::Run),
        )
        .await
        .expect("w")
        .id;
    storage.discard(a).await.expect("discard");
    let held = claim(&storage, "q").await;
    assert_eq!(held.id, w);
    storage
        .nack(&lease(&held), json!("boom"), Retry::Never)
        .await
        .expect("nack");
    storage.retry_dead_letter(w).await.expect("retry");
    let links = storage.job_links(w).await.expect("job_links");
    assert_eq!(
        links.dependencies.iter().map(|l| l.id).collect::<Vec<_>>(),
        [a]
    );
    assert_eq!(state(&storage, w).await, Some(JobState::Pending));
    common::purge(false, namespace).await;
}

#[tokio::test]
async fn a_refused_linked_batch_writes_no_job() {
    let namespace = common::fresh_namespace();
    let storage = storage(&namespace).await;
    let mut conn = common::raw_connection().await;
    let known = storage
        .enqueue(NewJob::new("q", json!(1)))
        .await
        .expect("known")
        .id;
    let queues = async |conn: &mut redis::aio::MultiplexedConnection| {
        let mut names: Vec<String> = redis::cmd("HKEYS")
            .arg(format!("{{{namespace}}}:queues"))
            .query_async(conn)
            .await
            .expect("queues");
        names.sort();
        names
    };
    // An id of a queue index no queue has is refused before anything is
    // written, the queue registry included; one of "q" never given, by the
    // script (the batch's queue is registered by then, but holds no job).
    for (unknown, registered) in [
        (JobId((1 << 20) | 77), vec!["q"]),
        (JobId(known.get() + (1000 << 20)), vec!["fresh", "q"]),
    ] {
        let refused = storage
            .enqueue_batch(vec![
                NewJob::new("fresh", json!(2)),
                NewJob::new("fresh", json!(3)).depends_on(unknown),
            ])
            .await;
        assert!(
            matches!(
                refused,
                Err(queue_core::QueueError::InvalidInput {
                    field: "depends_on",
                    ..
                })
            ),
            "{refused:?}"
        );
        assert_eq!(queues(&mut conn).await, registered);
        let stats = storage.stats().await.expect("stats");
        let live: u64 = stats.iter().map(|s| s.live()).sum();
        assert_eq!(live, 1, "only the known job: {stats:?}");
    }
    common::purge(false, namespace).await;
}

/// A job in another queue than its callback joins the batch, and the
/// callback waits for it; a join whose callback's queue was never
/// registered is refused as a closed batch before any script runs,
/// nothing written, the queue registry included.
#[tokio::test]
async fn a_job_joins_a_batch_whose_callback_is_in_another_queue() {
    let namespace = common::fresh_namespace();
    let storage = storage(&namespace).await;
    assert!(storage.capabilities().supports(Capability::Batches));
    let outcomes = storage
        .enqueue_batch(queue_core::batch(
            vec![NewJob::new("q", json!(0))],
            NewJob::new("done", json!({})),
        ))
        .await
        .expect("a batch");
    let callback = outcomes[1].id;
    let joined = storage
        .enqueue(NewJob::new("other", json!(1)).joins(callback))
        .await
        .expect("a join")
        .id;
    for queue in ["q", "other"] {
        let job = claim(&storage, queue).await;
        assert_eq!(
            storage
                .job_links(callback)
                .await
                .expect("links")
                .dependencies
                .len(),
            2
        );
        assert_eq!(state(&storage, callback).await, Some(JobState::Waiting));
        storage
            .ack(&job.lease().expect("leased"), None)
            .await
            .expect("ack");
    }
    let done = claim(&storage, "done").await;
    assert_eq!(done.id, callback);
    let links = storage.job_links(callback).await.expect("links");
    assert_eq!(
        links.dependencies.iter().map(|l| l.id).collect::<Vec<_>>(),
        [outcomes[0].id, joined]
    );
    let mut conn = common::raw_connection().await;
    let registry = format!("{{{namespace}}}:queues");
    let queues = async |conn: &mut redis::aio::MultiplexedConnection| {
        let mut names: Vec<String> = redis::cmd("HKEYS")
            .arg(&registry)
            .query_async(conn)
            .await
            .expect("queues");
        names.sort();
        names
    };
    let before = queues(&mut conn).await;
    let refused = storage
        .enqueue_batch(vec![
            NewJob::new("fresh", json!(2)),
            NewJob::new("fresh", json!(3)).joins(JobId((1 << 20) | 77)),
        ])
        .await;
    assert!(
        matches!(refused, Err(QueueError::Conflict { .. })),
        "{refused:?}"
    );
    assert_eq!(queues(&mut conn).await, before);
    common::purge(false, namespace).await;
}
