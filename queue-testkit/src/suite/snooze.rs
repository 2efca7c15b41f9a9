//! Snooze: a handler's "not now", which gives the claim back.

use queue_core::{FinalStatus, JobState, Retry, Storage};
use serde_json::json;

use super::{Ctx, LEASE, assert_invalid, assert_lease_lost, lease_of, secs};

/// Snooze schedules the job later, gives the attempt back and counts the
/// snooze, in the row and then in history.
pub async fn snooze_puts_the_job_off_without_counting_an_attempt<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 1).await;
    let started = ctx.now();
    ctx.clock.advance(secs(2));
    let at = ctx
        .storage
        .snooze(&lease_of(&job), secs(10))
        .await
        .expect("snooze");
    assert_eq!(at, ctx.now() + chrono::TimeDelta::seconds(10));
    let stored = ctx.live(job.id).await;
    assert_eq!((stored.attempts, stored.snoozes), (0, 1));
    assert_eq!(stored.state(ctx.now()), JobState::Scheduled);
    assert_eq!(stored.available_at, at);
    assert_eq!((stored.lease_until, stored.locked_by), (None, None));
    assert!(
        ctx.claim("q", 1).await.is_empty(),
        "not due before the delay"
    );
    ctx.clock.advance(secs(10));
    let again = ctx.claim_one("q").await;
    assert_eq!(again.attempts, 1, "its only attempt is still there");
    assert_eq!(again.first_locked_at, Some(started));
    ctx.storage.ack(&lease_of(&again), None).await.expect("ack");
    let record = ctx.archived(job.id).await;
    assert_eq!((record.status, record.snoozes), (FinalStatus::Completed, 1));
}

/// A lost lease cannot snooze, nor can a delay out of range; neither
/// changes the job.
pub async fn snooze_needs_the_current_lease_and_a_valid_delay<S: Storage>(ctx: Ctx<S>) {
    let first = ctx.enqueue_and_claim("q", 5).await;
    assert_invalid(
        ctx.storage
            .snooze(&lease_of(&first), secs(200 * 366 * 24 * 3600))
            .await,
        "delay",
    );
    ctx.clock.advance(LEASE + secs(1));
    ctx.storage.reclaim_stalled(10).await.expect("reclaim");
    let second = ctx.claim_one("q").await;
    assert_lease_lost(ctx.storage.snooze(&lease_of(&first), secs(5)).await);
    assert_eq!(ctx.live(first.id).await, second, "nothing changed");
}

/// A snooze after a failed attempt keeps that attempt's error: the job's
/// `last_error` is still the nack's when it runs again.
pub async fn snooze_keeps_the_error_of_the_last_failed_attempt<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 3).await;
    let error = json!({"error": "timeout"});
    ctx.storage
        .nack(&lease_of(&job), error.clone(), Retry::After(secs(1)))
        .await
        .expect("nack");
    ctx.clock.advance(secs(2));
    let again = ctx.claim_one("q").await;
    ctx.storage
        .snooze(&lease_of(&again), secs(1))
        .await
        .expect("snooze");
    assert_eq!(ctx.live(job.id).await.last_error, Some(error.clone()));
    ctx.clock.advance(secs(2));
    let third = ctx.claim_one("q").await;
    assert_eq!(third.last_error, Some(error));
}
