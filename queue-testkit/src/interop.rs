//! What a storage must make of rows that hand-written SQL wrote (the design
//! document's statements, `docs/sql-interop.md`): shared by every SQL
//! backend's `tests/plain_sql.rs`, which run the statements in their own
//! dialect and then call these.

use std::time::Duration;

use queue_core::{
    DequeueRequest, FinalStatus, HistoryFilter, JobId, JobState, Lease, QueueError, QueueName,
    Storage, WorkerId,
};
use serde_json::json;

/// Claims one job of `queue` as `worker` through the storage.
///
/// # Panics
/// When there is no pending job, or the storage fails.
pub async fn claim<S: Storage>(storage: &S, queue: &str, worker: &str) -> Lease {
    let request = DequeueRequest::new(
        vec![QueueName::new(queue).expect("a valid queue name")],
        1,
        Duration::from_secs(30),
        WorkerId::new(worker).expect("a valid worker id"),
    )
    .expect("a valid request");
    let job = storage
        .dequeue(&request)
        .await
        .expect("dequeue")
        .pop()
        .expect("a pending job");
    job.lease().expect("a claimed job has a lease")
}

/// A job claimed (attempt 1) and heartbeated by hand as `worker` is running,
/// and the storage heartbeats and acks it under that lease.
///
/// # Panics
/// When the storage disagrees.
pub async fn claimed_by_hand_is_acked_by_the_storage<S: Storage>(
    storage: &S,
    id: JobId,
    worker: &str,
) {
    let lease = Lease {
        job_id: id,
        worker_id: WorkerId::new(worker).expect("a valid worker id"),
        attempt: 1,
    };
    let job = storage.get_job(id).await.expect("read").expect("live");
    assert_eq!(
        job.state(storage.now().await.expect("now")),
        JobState::Running
    );
    assert!(
        storage
            .heartbeat(&lease, Duration::from_secs(30))
            .await
            .expect("heartbeat"),
        "the hand-written lease is current"
    );
    storage
        .ack(&lease, None)
        .await
        .expect("the storage acks the hand-written lease");
    let record = storage
        .get_history(id)
        .await
        .expect("read")
        .expect("archived");
    assert_eq!(
        record.processed_by.as_ref().map(WorkerId::as_str),
        Some(worker)
    );
}

/// A job nacked by hand with a 10 s base (and up to 20 % jitter) waits:
/// scheduled, due in 8 to 12 s, and its old lease is lost.
///
/// # Panics
/// When the storage disagrees.
pub async fn nacked_by_hand_waits<S: Storage>(storage: &S, lease: &Lease, queue: &str) {
    let job = storage
        .get_job(lease.job_id)
        .await
        .expect("read")
        .expect("live");
    assert_eq!(
        job.state(storage.now().await.expect("now")),
        JobState::Scheduled
    );
    let due = storage
        .next_due(&[QueueName::new(queue).expect("a valid queue name")])
        .await
        .expect("next due")
        .expect("a scheduled job");
    assert!(
        due > Duration::from_secs(7) && due <= Duration::from_secs(12),
        "{due:?}"
    );
    assert!(matches!(
        storage.ack(lease, None).await,
        Err(QueueError::LeaseLost { .. })
    ));
}

/// `done` archived by hand as completed with result `"done"`, and `dead` as
/// a dead letter with result `{"error": {"message": "boom"}}`, both without
/// `max_attempts`: they read back (max attempts 0, "not recorded"), `dead`
/// is the only dead letter, and retrying it gives it the default allowance.
///
/// # Panics
/// When the storage disagrees.
pub async fn archived_by_hand_reads_back_and_retries<S: Storage>(
    storage: &S,
    done: JobId,
    dead: JobId,
) {
    let record = storage
        .get_history(done)
        .await
        .expect("read")
        .expect("archived");
    assert_eq!(record.status, FinalStatus::Completed);
    assert_eq!(record.result, Some(json!("done")));
    assert_eq!(
        (record.attempts, record.max_attempts),
        (1, 0),
        "0: not recorded"
    );
    let page = storage
        .list_dead_letters(&HistoryFilter::default())
        .await
        .expect("dead letters");
    assert_eq!(
        page.records.iter().map(|r| r.id).collect::<Vec<_>>(),
        [dead]
    );
    assert_eq!(
        page.records[0].result,
        Some(json!({ "error": { "message": "boom" } }))
    );
    storage.retry_dead_letter(dead).await.expect("retry");
    let job = storage
        .get_job(dead)
        .await
        .expect("read")
        .expect("live again");
    assert_eq!(
        (job.attempts, job.max_attempts),
        (0, 20),
        "the default allowance"
    );
}
