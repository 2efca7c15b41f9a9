//! Ack: archive as completed, guarded by the full lease; batched ack.

use chrono::TimeDelta;
use queue_core::{Ack, FinalStatus, NewJob, Storage};
use serde_json::json;

use super::{Ctx, LEASE, assert_lease_lost, lease_of, secs, worker};

/// Ack moves the job to history as `completed` with everything it knew.
pub async fn ack_archives_completed_with_result<S: Storage>(ctx: Ctx<S>) {
    let id = ctx
        .enqueue(
            NewJob::new("q", json!({"in": 1}))
                .priority(3)
                .unique_key("k")
                .max_attempts(5),
        )
        .await;
    let enqueued_at = ctx.now();
    ctx.clock.advance(secs(2));
    let job = ctx.claim_one("q").await;
    let started = ctx.now();
    ctx.clock.advance(secs(3));
    ctx.storage
        .ack(&lease_of(&job), Some(json!({"out": [1, 2]})))
        .await
        .expect("ack");
    assert_eq!(
        ctx.storage.get_job(id).await.expect("get_job"),
        None,
        "live row removed"
    );
    let record = ctx.archived(id).await;
    assert_eq!(record.status, FinalStatus::Completed);
    assert_eq!(record.result, Some(json!({"out": [1, 2]})));
    assert_eq!(record.payload, json!({"in": 1}));
    assert_eq!(record.queue.as_str(), "q");
    assert_eq!(record.priority, 3);
    assert_eq!(record.unique_key.as_ref().map(|k| k.as_str()), Some("k"));
    assert_eq!((record.attempts, record.max_attempts), (1, 5));
    assert_eq!(record.processed_by, Some(worker("w1")));
    assert_eq!(record.created_at, enqueued_at);
    assert_eq!(record.started_at, Some(started));
    assert_eq!(record.finished_at, ctx.now());
    assert_eq!(record.last_error, None);
}

/// After expiry and a new claim (even by the same worker id), the old
/// lease's ack is `LeaseLost` and the new holder's job is untouched.
pub async fn ack_with_stale_lease_is_lease_lost_and_changes_nothing<S: Storage>(ctx: Ctx<S>) {
    let first = ctx.enqueue_and_claim("q", 5).await;
    ctx.clock.advance(LEASE + secs(1));
    ctx.storage.reclaim_stalled(10).await.expect("reclaim");
    let second = ctx.claim_one("q").await;
    assert_eq!(second.locked_by, first.locked_by, "same worker id");
    assert_eq!(second.attempts, 2);

    assert_lease_lost(ctx.storage.ack(&lease_of(&first), None).await);
    assert_eq!(ctx.live(first.id).await, second, "nothing changed");
    assert_eq!(
        ctx.storage
            .get_history(first.id)
            .await
            .expect("get_history"),
        None
    );
    ctx.storage
        .ack(&lease_of(&second), None)
        .await
        .expect("current lease acks");
}

/// A second ack of the same lease is `LeaseLost`; history is written once.
pub async fn ack_twice_is_lease_lost<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 5).await;
    ctx.storage
        .ack(&lease_of(&job), Some(json!(1)))
        .await
        .expect("ack");
    let record = ctx.archived(job.id).await;
    assert_lease_lost(ctx.storage.ack(&lease_of(&job), Some(json!(2))).await);
    assert_eq!(ctx.archived(job.id).await, record);
}

/// A lease naming another worker is `LeaseLost`.
pub async fn ack_by_another_worker_is_lease_lost<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 5).await;
    let mut forged = lease_of(&job);
    forged.worker_id = worker("intruder");
    assert_lease_lost(ctx.storage.ack(&forged, None).await);
    let mut wrong_attempt = lease_of(&job);
    wrong_attempt.attempt = 2;
    assert_lease_lost(ctx.storage.ack(&wrong_attempt, None).await);
    assert_eq!(ctx.live(job.id).await, job);
}

/// A lease past its end that nobody reclaimed or claimed still acks.
pub async fn ack_after_expiry_without_reclaim_succeeds<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 5).await;
    ctx.clock.advance(LEASE + secs(10));
    ctx.storage.ack(&lease_of(&job), None).await.expect("ack");
    let record = ctx.archived(job.id).await;
    assert_eq!(record.status, FinalStatus::Completed);
    assert_eq!(
        record.finished_at - record.started_at.expect("started"),
        TimeDelta::seconds(40)
    );
}

/// A batched ack reports per lease and acks only the current ones.
pub async fn ack_batch_reports_each_lease<S: Storage>(ctx: Ctx<S>) {
    for i in 0..3 {
        ctx.enqueue(NewJob::new("q", json!(i))).await;
    }
    let jobs = ctx.claim("q", 3).await;
    ctx.storage
        .ack(&lease_of(&jobs[1]), None)
        .await
        .expect("ack");
    let mut foreign = lease_of(&jobs[2]);
    foreign.worker_id = worker("other");
    let acks = vec![
        Ack {
            lease: lease_of(&jobs[0]),
            result: Some(json!("a")),
        },
        Ack {
            lease: lease_of(&jobs[1]),
            result: Some(json!("b")),
        },
        Ack {
            lease: foreign,
            result: None,
        },
        Ack {
            lease: lease_of(&jobs[2]),
            result: Some(json!("c")),
        },
    ];
    let acked = ctx.storage.ack_batch(&acks).await.expect("ack_batch");
    assert_eq!(acked, [true, false, false, true]);
    assert_eq!(ctx.archived(jobs[0].id).await.result, Some(json!("a")));
    assert_eq!(
        ctx.archived(jobs[1].id).await.result,
        None,
        "first ack kept"
    );
    assert_eq!(ctx.archived(jobs[2].id).await.result, Some(json!("c")));
    assert!(
        ctx.storage
            .ack_batch(&[])
            .await
            .expect("empty batch")
            .is_empty()
    );
}

/// A lease repeated within one batch is acked once: the first entry wins
/// and the repeat reports a lost lease.
pub async fn ack_batch_acks_a_repeated_lease_once<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 3).await;
    let other = ctx.enqueue_and_claim("q", 3).await;
    let acks = vec![
        Ack {
            lease: lease_of(&job),
            result: Some(json!("first")),
        },
        Ack {
            lease: lease_of(&other),
            result: None,
        },
        Ack {
            lease: lease_of(&job),
            result: Some(json!("second")),
        },
    ];
    let acked = ctx.storage.ack_batch(&acks).await.expect("ack_batch");
    assert_eq!(acked, [true, true, false]);
    let record = ctx.archived(job.id).await;
    assert_eq!(record.result, Some(json!("first")));
    assert_eq!(record.status, FinalStatus::Completed);
    let history = ctx.all_history().await;
    assert_eq!(history.len(), 2, "one history row per job: {history:?}");
}
