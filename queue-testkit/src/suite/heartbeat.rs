//! Heartbeat: extend a live lease; report lost ones; batched form.

use chrono::TimeDelta;
use queue_core::{NewJob, Storage};
use serde_json::json;

use super::{Ctx, LEASE, assert_invalid, lease_of, secs, worker};

/// A live lease moves to now + extension.
pub async fn heartbeat_extends_a_live_lease<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 5).await;
    ctx.clock.advance(secs(20));
    assert!(
        ctx.storage
            .heartbeat(&lease_of(&job), secs(60))
            .await
            .expect("heartbeat")
    );
    let stored = ctx.live(job.id).await;
    assert_eq!(stored.lease_until, Some(ctx.now() + TimeDelta::seconds(60)));
    ctx.clock.advance(secs(50));
    assert!(ctx.claim_as("q", 1, "w2").await.is_empty(), "still leased");
    assert_eq!(stored.attempts, 1, "a heartbeat is not an attempt");
}

/// An expired lease is not revived, even when nobody took the job.
pub async fn heartbeat_on_expired_lease_returns_false<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 5).await;
    ctx.clock.advance(LEASE);
    assert!(
        !ctx.storage
            .heartbeat(&lease_of(&job), secs(60))
            .await
            .expect("heartbeat")
    );
    assert_eq!(ctx.live(job.id).await, job, "nothing changed");
}

/// Another worker's or another attempt's lease gets false.
pub async fn heartbeat_on_foreign_lease_returns_false<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 5).await;
    let mut foreign = lease_of(&job);
    foreign.worker_id = worker("w2");
    assert!(
        !ctx.storage
            .heartbeat(&foreign, secs(60))
            .await
            .expect("heartbeat")
    );
    let mut wrong_attempt = lease_of(&job);
    wrong_attempt.attempt = 0;
    assert!(
        !ctx.storage
            .heartbeat(&wrong_attempt, secs(60))
            .await
            .expect("heartbeat")
    );
    let mut unknown = lease_of(&job);
    unknown.job_id = queue_core::JobId(job.id.get() + 1_000_000);
    assert!(
        !ctx.storage
            .heartbeat(&unknown, secs(60))
            .await
            .expect("heartbeat")
    );
    assert_eq!(ctx.live(job.id).await, job);
}

/// After expiry and a new claim by the same worker id, the old lease's
/// heartbeat is false and the new lease keeps its end.
pub async fn heartbeat_with_stale_lease_returns_false_and_changes_nothing<S: Storage>(ctx: Ctx<S>) {
    let first = ctx.enqueue_and_claim("q", 5).await;
    ctx.clock.advance(LEASE + secs(1));
    ctx.storage.reclaim_stalled(10).await.expect("reclaim");
    let second = ctx.claim_one("q").await;
    assert!(
        !ctx.storage
            .heartbeat(&lease_of(&first), secs(600))
            .await
            .expect("heartbeat")
    );
    assert_eq!(ctx.live(first.id).await, second);
}

/// Once acked, the lease is gone.
pub async fn heartbeat_after_ack_returns_false<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 5).await;
    ctx.storage.ack(&lease_of(&job), None).await.expect("ack");
    assert!(
        !ctx.storage
            .heartbeat(&lease_of(&job), secs(60))
            .await
            .expect("heartbeat")
    );
}

/// The batched form answers per lease, in order, extending only live ones.
pub async fn heartbeat_batch_reports_each_lease<S: Storage>(ctx: Ctx<S>) {
    for i in 0..3 {
        ctx.enqueue(NewJob::new("q", json!(i))).await;
    }
    let jobs = ctx.claim("q", 3).await;
    ctx.storage
        .ack(&lease_of(&jobs[1]), None)
        .await
        .expect("ack");
    let mut foreign = lease_of(&jobs[2]);
    foreign.worker_id = worker("w9");
    ctx.clock.advance(secs(10));
    let leases = [
        lease_of(&jobs[0]),
        lease_of(&jobs[1]),
        foreign,
        lease_of(&jobs[2]),
    ];
    let alive = ctx
        .storage
        .heartbeat_batch(&leases, secs(45))
        .await
        .expect("heartbeat_batch");
    assert_eq!(alive, [true, false, false, true]);
    for job in [&jobs[0], &jobs[2]] {
        let until = ctx.live(job.id).await.lease_until;
        assert_eq!(until, Some(ctx.now() + TimeDelta::seconds(45)));
    }
    assert!(
        ctx.storage
            .heartbeat_batch(&[], secs(45))
            .await
            .expect("empty")
            .is_empty()
    );
}

/// An extension of zero or over a day is `InvalidInput` naming `extend_by`.
pub async fn heartbeat_with_invalid_duration_is_rejected<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 5).await;
    assert_invalid(
        ctx.storage.heartbeat(&lease_of(&job), secs(0)).await,
        "extend_by",
    );
    assert_invalid(
        ctx.storage
            .heartbeat_batch(&[lease_of(&job)], secs(86_401))
            .await,
        "extend_by",
    );
    assert_eq!(ctx.live(job.id).await, job);
}
