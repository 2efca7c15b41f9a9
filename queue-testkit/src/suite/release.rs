//! Release: give a job back at shutdown without burning its attempt.

use queue_core::{JobState, Storage};

use super::{Ctx, LEASE, lease_of, secs};

/// Release clears the lease, gives the attempt back, and makes it pending now.
pub async fn release_returns_job_without_burning_an_attempt<S: Storage>(ctx: Ctx<S>) {
    let id = ctx.enqueue_and_claim("q", 1).await.id;
    let first_claim = ctx.now();
    ctx.clock.advance(secs(5));
    let job = ctx.live(id).await;
    assert!(ctx.storage.release(&lease_of(&job)).await.expect("release"));
    let stored = ctx.live(id).await;
    assert_eq!(stored.attempts, 0);
    assert_eq!(stored.lease_until, None);
    assert_eq!(stored.locked_by, None);
    assert_eq!(stored.available_at, ctx.now());
    assert_eq!(stored.state(ctx.now()), JobState::Pending);
    let again = ctx.claim_one("q").await;
    assert_eq!(again.attempts, 1, "the only attempt is still available");
    assert_eq!(again.first_locked_at, Some(first_claim));
}

/// A lost lease releases nothing.
pub async fn release_with_stale_lease_returns_false<S: Storage>(ctx: Ctx<S>) {
    let first = ctx.enqueue_and_claim("q", 5).await;
    ctx.clock.advance(LEASE + secs(1));
    ctx.storage.reclaim_stalled(10).await.expect("reclaim");
    let second = ctx.claim_one("q").await;
    assert!(
        !ctx.storage
            .release(&lease_of(&first))
            .await
            .expect("release")
    );
    assert_eq!(ctx.live(first.id).await, second);
}

/// A lease that expired but nobody reclaimed or took is still current:
/// release gives the job back and returns true.
pub async fn release_on_an_expired_lease_nobody_took_succeeds<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 3).await;
    ctx.clock.advance(LEASE + secs(5));
    assert!(ctx.storage.release(&lease_of(&job)).await.expect("release"));
    let stored = ctx.live(job.id).await;
    assert_eq!(stored.attempts, 0);
    assert_eq!((stored.lease_until, stored.locked_by), (None, None));
    assert_eq!(stored.available_at, ctx.now());
}
