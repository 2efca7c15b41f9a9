//! Nack: retry with backoff while attempts remain, dead letter after.

use chrono::TimeDelta;
use queue_core::{Backoff, FinalStatus, JobState, NackOutcome, Retry, Storage};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::json;

use super::{Ctx, LEASE, assert_invalid, assert_lease_lost, lease_of, secs, worker};

/// With attempts left the job is released and scheduled at now + delay,
/// keeping the error; it runs again once due.
pub async fn nack_with_attempts_left_schedules_a_retry<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 3).await;
    ctx.clock.advance(secs(1));
    let outcome = ctx
        .storage
        .nack(
            &lease_of(&job),
            json!({"error": "timeout"}),
            Retry::After(secs(10)),
        )
        .await
        .expect("nack");
    let due = ctx.now() + TimeDelta::seconds(10);
    assert_eq!(outcome, NackOutcome::Retrying { at: due });
    let stored = ctx.live(job.id).await;
    assert_eq!(stored.available_at, due);
    assert_eq!(stored.lease_until, None);
    assert_eq!(stored.locked_by, None);
    assert_eq!(stored.attempts, 1);
    assert_eq!(stored.last_error, Some(json!({"error": "timeout"})));
    assert_eq!(stored.state(ctx.now()), JobState::Scheduled);

    assert!(ctx.claim("q", 1).await.is_empty());
    ctx.clock.advance(secs(10));
    let again = ctx.claim_one("q").await;
    assert_eq!((again.id, again.attempts), (job.id, 2));
    assert_eq!(again.last_error, Some(json!({"error": "timeout"})));
}

/// A delay drawn from `Backoff` lands `available_at` inside its jitter bounds.
pub async fn nack_uses_a_backoff_delay_within_jitter_bounds<S: Storage>(ctx: Ctx<S>) {
    let backoff = Backoff::default();
    let mut rng = StdRng::seed_from_u64(42);
    let mut job = ctx.enqueue_and_claim("q", 5).await;
    for attempt in 1..=4 {
        assert_eq!(job.attempts, attempt);
        let delay = backoff.delay(attempt, &mut rng);
        let outcome = ctx
            .storage
            .nack(&lease_of(&job), json!(attempt), Retry::After(delay))
            .await
            .expect("nack");
        let NackOutcome::Retrying { at } = outcome else {
            panic!("attempt {attempt} of 5 should retry, got {outcome:?}");
        };
        let waited = (at - ctx.now()).to_std().expect("in the future");
        let (low, high) = backoff.bounds(attempt);
        let slack = std::time::Duration::from_micros(1);
        assert!(
            waited + slack >= low && waited <= high + slack,
            "{waited:?} not in [{low:?}, {high:?}]"
        );
        ctx.clock.set(at);
        job = ctx.claim_one("q").await;
    }
}

/// The last attempt's nack archives a dead letter holding the error.
pub async fn nack_at_max_attempts_dead_letters<S: Storage>(ctx: Ctx<S>) {
    let mut job = ctx.enqueue_and_claim("q", 2).await;
    ctx.storage
        .nack(&lease_of(&job), json!("first"), Retry::After(secs(0)))
        .await
        .expect("nack");
    job = ctx.claim_one("q").await;
    ctx.clock.advance(secs(4));
    let outcome = ctx
        .storage
        .nack(
            &lease_of(&job),
            json!({"error": "final"}),
            Retry::After(secs(10)),
        )
        .await
        .expect("nack");
    assert_eq!(outcome, NackOutcome::DeadLettered);
    assert_eq!(ctx.storage.get_job(job.id).await.expect("get_job"), None);
    let record = ctx.archived(job.id).await;
    assert_eq!(record.status, FinalStatus::DeadLetter);
    assert_eq!(record.last_error, Some(json!({"error": "final"})));
    assert_eq!(record.result, None);
    assert_eq!((record.attempts, record.max_attempts), (2, 2));
    assert_eq!(record.processed_by, Some(worker("w1")));
    assert_eq!(record.finished_at, ctx.now());
}

/// `Retry::Never` dead-letters even with attempts left.
pub async fn nack_with_retry_never_dead_letters_at_once<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 10).await;
    let outcome = ctx
        .storage
        .nack(&lease_of(&job), json!("fatal"), Retry::Never)
        .await
        .expect("nack");
    assert_eq!(outcome, NackOutcome::DeadLettered);
    let record = ctx.archived(job.id).await;
    assert_eq!(
        (record.status, record.attempts),
        (FinalStatus::DeadLetter, 1)
    );
}

/// A stale lease's nack is `LeaseLost` and changes nothing.
pub async fn nack_with_stale_lease_is_lease_lost_and_changes_nothing<S: Storage>(ctx: Ctx<S>) {
    let first = ctx.enqueue_and_claim("q", 5).await;
    ctx.clock.advance(LEASE + secs(1));
    ctx.storage.reclaim_stalled(10).await.expect("reclaim");
    let second = ctx.claim_one("q").await;
    assert_lease_lost(
        ctx.storage
            .nack(&lease_of(&first), json!("late"), Retry::After(secs(1)))
            .await,
    );
    assert_lease_lost(
        ctx.storage
            .nack(&lease_of(&first), json!("late"), Retry::Never)
            .await,
    );
    assert_eq!(ctx.live(first.id).await, second);
}

/// A retry delay above 100 years is `InvalidInput` and the lease stays held.
pub async fn nack_with_invalid_delay_is_rejected_and_changes_nothing<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 5).await;
    let result = ctx
        .storage
        .nack(
            &lease_of(&job),
            json!("x"),
            Retry::After(std::time::Duration::MAX),
        )
        .await;
    assert_invalid(result, "retry_delay");
    assert_eq!(ctx.live(job.id).await, job);
}

/// A lease that expired but nobody reclaimed or took is still current:
/// nack schedules the retry as usual.
pub async fn nack_on_an_expired_lease_nobody_took_succeeds<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 3).await;
    ctx.clock.advance(LEASE + secs(5));
    let outcome = ctx
        .storage
        .nack(&lease_of(&job), json!("late"), Retry::After(secs(10)))
        .await
        .expect("nack");
    let due = ctx.now() + TimeDelta::seconds(10);
    assert_eq!(outcome, NackOutcome::Retrying { at: due });
    let stored = ctx.live(job.id).await;
    assert_eq!((stored.lease_until, stored.locked_by), (None, None));
    assert_eq!(stored.available_at, due);
    assert_eq!(stored.last_error, Some(json!("late")));
}
