//! Promises that hold across processes: every case here has two handles on
//! one database ([`Ctx::second`]), as two hosts have. A storage that keeps
//! any of these in its own memory (a limiter's tally, a key cache, a
//! schedule's last fire) passes the single-handle cases and fails these.

use std::time::Duration;

use chrono::TimeDelta;
use futures_util::StreamExt;
use queue_core::{NewJob, PeriodicFire, ScheduleName, Storage, Wakeup};
use serde_json::json;

use super::{
    Ctx, acks_of, assert_lease_lost, concurrency_limit, lease_of, queue, rate_limit, request,
};

/// A unique key live through one handle is live through the other: the
/// second enqueue returns the first job's id and writes nothing.
pub async fn unique_key_holds_across_handles<S: Storage>(ctx: Ctx<S>) {
    let job = NewJob::new("q", json!(1)).unique_key("k");
    let first = ctx.storage.enqueue(job.clone()).await.expect("enqueue");
    let second = ctx.second().enqueue(job).await.expect("enqueue");
    assert!(!first.existed);
    assert!(
        second.existed,
        "the other handle made a second job: {second:?}"
    );
    assert_eq!(second.id, first.id);
    assert_eq!(ctx.live_count().await, 1);
}

/// A lease taken through one handle is the other's to ack, and then lost
/// to the first.
pub async fn a_lease_taken_by_one_handle_is_acked_by_another<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 1).await;
    ctx.second()
        .ack(&lease_of(&job), None)
        .await
        .expect("ack through the other handle");
    assert_lease_lost(ctx.storage.ack(&lease_of(&job), None).await);
}

/// A concurrency limit counts the leases held through every handle: with a
/// limit of 3, one handle holding 3 leaves the other nothing until it acks.
pub async fn concurrency_limit_holds_across_handles<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", concurrency_limit(3)).await;
    ctx.fill("q", 10).await;
    let first = (ctx.storage.dequeue(&request(&["q"], 10, "a")).await).expect("claim");
    assert_eq!(first.len(), 3);
    let second = (ctx.second().dequeue(&request(&["q"], 10, "b")).await).expect("claim");
    assert_eq!(second.len(), 0, "the other handle claimed past the limit");
    ctx.storage
        .ack_batch(&acks_of(&first[..2]))
        .await
        .expect("ack");
    let third = (ctx.second().dequeue(&request(&["q"], 10, "b")).await).expect("claim");
    assert_eq!(
        third.len(),
        2,
        "acks through one handle free slots for the other"
    );
}

/// One rate bucket per queue, whichever handle claims: a burst of 4 spent
/// through one handle leaves the other none until it refills.
pub async fn rate_limit_bucket_is_shared_across_handles<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", rate_limit(1.0, 4)).await;
    ctx.fill("q", 10).await;
    let first = (ctx.storage.dequeue(&request(&["q"], 10, "a")).await).expect("claim");
    assert_eq!(first.len(), 4);
    let second = (ctx.second().dequeue(&request(&["q"], 10, "b")).await).expect("claim");
    assert_eq!(second.len(), 0, "the other handle had a bucket of its own");
    ctx.clock.advance(Duration::from_secs(2));
    let refilled = (ctx.second().dequeue(&request(&["q"], 10, "b")).await).expect("claim");
    assert_eq!(refilled.len(), 2, "two seconds refill two tokens");
}

/// A queue paused through one handle yields nothing to the other; resumed
/// through the other, it yields again to the first.
pub async fn pause_by_one_handle_stops_claims_by_another<S: Storage>(ctx: Ctx<S>) {
    ctx.fill("q", 2).await;
    ctx.storage.pause_queue(&queue("q")).await.expect("pause");
    let held = (ctx.second().dequeue(&request(&["q"], 10, "b")).await).expect("claim");
    assert!(
        held.is_empty(),
        "the other handle claimed from a paused queue"
    );
    ctx.second()
        .resume_queue(&queue("q"))
        .await
        .expect("resume");
    assert_eq!(ctx.claim("q", 10).await.len(), 2);
}

/// A fire time recorded through one handle is not enqueued again through
/// the other, however the two interleave.
pub async fn a_fire_one_handle_recorded_is_not_repeated_by_another<S: Storage>(ctx: Ctx<S>) {
    let at = ctx.now();
    let fire = |at: chrono::DateTime<chrono::Utc>| PeriodicFire {
        schedule: ScheduleName::new("nightly").expect("valid name"),
        fire_at: at,
        next_fire_at: Some(at + TimeDelta::minutes(1)),
        job: NewJob::new("q", json!({ "at": at })),
    };
    let first = ctx.storage.enqueue_periodic(&fire(at)).await.expect("fire");
    assert!(first.is_some());
    let again = ctx
        .second()
        .enqueue_periodic(&fire(at))
        .await
        .expect("fire");
    assert_eq!(again, None, "the other handle fired the same time again");
    let next = (ctx
        .second()
        .enqueue_periodic(&fire(at + TimeDelta::minutes(1)))
        .await)
        .expect("fire");
    assert!(
        next.is_some(),
        "the next fire time is the other handle's to take"
    );
    assert_eq!(
        ctx.storage
            .enqueue_periodic(&fire(at + TimeDelta::minutes(1)))
            .await
            .expect("fire"),
        None
    );
    assert_eq!(ctx.live_count().await, 2);
}

/// A subscriber on one handle hears of a job enqueued through the other,
/// as a worker on one host hears of a job another host's producer commits.
pub async fn wakeups_reach_a_subscriber_on_another_handle<S: Storage>(ctx: Ctx<S>) {
    let mut wakeups = (ctx.second().subscribe().await)
        .expect("subscribe")
        .expect("the storage declares wake-ups, but subscribe answered None");
    ctx.enqueue(NewJob::new("q", json!(1))).await;
    let heard = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(wakeup) = wakeups.next().await {
            match wakeup {
                Ok(Wakeup::Queue(q)) if q == queue("q") => return true,
                Ok(Wakeup::All) => return true,
                _ => {}
            }
        }
        false
    })
    .await;
    assert_eq!(heard, Ok(true), "no wake-up for queue q within 10 s");
}
