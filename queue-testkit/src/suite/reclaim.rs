//! Reclaim: recover stalled leases in bounded batches.

use queue_core::{FinalStatus, JobState, ReclaimOutcome, Storage};
use serde_json::json;

use super::{Ctx, LEASE, assert_invalid, queue, secs, worker};

/// A stalled job with attempts left returns to pending, noting why.
pub async fn reclaim_returns_stalled_jobs_to_pending<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 3).await;
    ctx.clock.advance(LEASE + secs(5));
    let outcome = ctx.storage.reclaim_stalled(100).await.expect("reclaim");
    assert_eq!(
        outcome,
        ReclaimOutcome {
            requeued: 1,
            dead_lettered: 0
        }
    );
    let stored = ctx.live(job.id).await;
    assert_eq!(stored.state(ctx.now()), JobState::Pending);
    assert_eq!(stored.attempts, 1, "the expired attempt still counts");
    assert_eq!(stored.available_at, ctx.now());
    assert_eq!((stored.lease_until, stored.locked_by), (None, None));
    assert_eq!(
        stored.last_error,
        Some(json!({"kind": "lease_expired", "worker_id": "w1", "attempt": 1}))
    );
    assert_eq!(
        ctx.storage.reclaim_stalled(100).await.expect("reclaim"),
        ReclaimOutcome::default()
    );
}

/// A stalled job on its last attempt becomes a dead letter.
pub async fn reclaim_dead_letters_stalled_jobs_without_attempts_left<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 1).await;
    ctx.clock.advance(LEASE);
    let outcome = ctx.storage.reclaim_stalled(100).await.expect("reclaim");
    assert_eq!(
        outcome,
        ReclaimOutcome {
            requeued: 0,
            dead_lettered: 1
        }
    );
    assert_eq!(ctx.storage.get_job(job.id).await.expect("get_job"), None);
    let record = ctx.archived(job.id).await;
    assert_eq!(record.status, FinalStatus::DeadLetter);
    assert_eq!(record.attempts, 1);
    assert_eq!(record.processed_by, None, "nobody finished it");
    assert_eq!(
        record.last_error,
        Some(json!({"kind": "lease_expired", "worker_id": "w1", "attempt": 1}))
    );
    assert_eq!(record.finished_at, ctx.now());
}

/// At most `limit` jobs per call, oldest lease first.
pub async fn reclaim_respects_its_batch_limit_oldest_lease_first<S: Storage>(ctx: Ctx<S>) {
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(ctx.enqueue_and_claim("q", 3).await.id);
        ctx.clock.advance(secs(1));
    }
    ctx.clock.advance(LEASE);
    let first = ctx.storage.reclaim_stalled(2).await.expect("reclaim");
    assert_eq!(first.total(), 2);
    for (i, id) in ids.iter().enumerate() {
        let pending = ctx.live(*id).await.state(ctx.now()) == JobState::Pending;
        assert_eq!(pending, i < 2, "job {i} (oldest first)");
    }
    assert_eq!(
        ctx.storage
            .reclaim_stalled(2)
            .await
            .expect("reclaim")
            .total(),
        2
    );
    assert_eq!(
        ctx.storage
            .reclaim_stalled(2)
            .await
            .expect("reclaim")
            .total(),
        1
    );
    assert_eq!(
        ctx.storage
            .reclaim_stalled(2)
            .await
            .expect("reclaim")
            .total(),
        0
    );
}

/// Running, pending and scheduled jobs are left as they are.
pub async fn reclaim_leaves_running_and_pending_jobs_alone<S: Storage>(ctx: Ctx<S>) {
    let running = ctx.enqueue_and_claim("q", 3).await;
    let pending = ctx.enqueue(queue_core::NewJob::new("q", json!(2))).await;
    let scheduled = ctx
        .enqueue(queue_core::NewJob::new("q", json!(3)).delay(secs(3600)))
        .await;
    ctx.clock.advance(LEASE - secs(1));
    assert_eq!(
        ctx.storage.reclaim_stalled(100).await.expect("reclaim"),
        ReclaimOutcome::default()
    );
    assert_eq!(ctx.live(running.id).await, running);
    assert_eq!(ctx.live(pending).await.state(ctx.now()), JobState::Pending);
    assert_eq!(
        ctx.live(scheduled).await.state(ctx.now()),
        JobState::Scheduled
    );
}

/// A limit of 0 or above `MAX_BATCH` is `InvalidInput` naming `limit`.
pub async fn reclaim_with_invalid_limit_is_rejected<S: Storage>(ctx: Ctx<S>) {
    assert_invalid(ctx.storage.reclaim_stalled(0).await, "limit");
    assert_invalid(
        ctx.storage.reclaim_stalled(queue_core::MAX_BATCH + 1).await,
        "limit",
    );
}

/// Reclaim picks the leases that ended first, not the lowest ids: leases
/// claimed for different durations end in another order than their ids.
pub async fn reclaim_picks_the_earliest_lease_end_not_the_lowest_id<S: Storage>(ctx: Ctx<S>) {
    let mut ids = Vec::new();
    for (q, lease) in [("a", 30), ("b", 20), ("c", 10)] {
        let id = ctx
            .enqueue(queue_core::NewJob::new(q, json!(lease)).max_attempts(3))
            .await;
        let claim = queue_core::DequeueRequest::new(vec![queue(q)], 1, secs(lease), worker("w1"))
            .expect("valid request");
        let jobs = ctx.storage.dequeue(&claim).await.expect("dequeue");
        assert_eq!(jobs.len(), 1);
        ids.push(id);
    }
    ctx.clock.advance(secs(31));
    let expected_order = [ids[2], ids[1], ids[0]];
    for (n, id) in expected_order.iter().enumerate() {
        assert_eq!(
            ctx.storage
                .reclaim_stalled(1)
                .await
                .expect("reclaim")
                .requeued,
            1
        );
        for (m, later) in expected_order.iter().enumerate() {
            let pending = ctx.live(*later).await.lease_until.is_none();
            assert_eq!(pending, m <= n, "after reclaim {n}, job {later} (id {id})");
        }
    }
}
