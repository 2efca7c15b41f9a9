//! Periodic fires: each fire time of a schedule yields one job, however
//! many processes try and whether or not its job has finished.

use chrono::{DateTime, TimeDelta, Utc};
use queue_core::{NewJob, PeriodicFire, ScheduleName, Storage};
use serde_json::json;

use super::{Ctx, assert_invalid, lease_of};

fn fire(at: DateTime<Utc>, next: DateTime<Utc>) -> PeriodicFire {
    PeriodicFire {
        schedule: ScheduleName::new("nightly").expect("valid name"),
        fire_at: at,
        next_fire_at: Some(next),
        job: NewJob::new("q", json!({ "at": at })),
    }
}

/// The first call for a fire time enqueues; a repeat, an earlier time, or
/// a repeat after the job finished enqueues nothing; a later time does.
pub async fn enqueue_periodic_enqueues_each_fire_time_once<S: Storage>(ctx: Ctx<S>) {
    let t1 = ctx.now();
    let t2 = t1 + TimeDelta::minutes(1);
    let t3 = t2 + TimeDelta::minutes(1);
    let first = ctx
        .storage
        .enqueue_periodic(&fire(t1, t2))
        .await
        .expect("fire");
    assert!(first.is_some_and(|o| !o.existed), "first fire: {first:?}");
    assert_eq!(
        ctx.storage
            .enqueue_periodic(&fire(t1, t2))
            .await
            .expect("fire"),
        None
    );
    let job = ctx.claim_one("q").await;
    ctx.storage.ack(&lease_of(&job), None).await.expect("ack");
    assert_eq!(
        ctx.storage
            .enqueue_periodic(&fire(t1, t2))
            .await
            .expect("fire"),
        None,
        "a finished fire does not fire again"
    );
    let later = ctx
        .storage
        .enqueue_periodic(&fire(t2, t3))
        .await
        .expect("fire");
    assert!(later.is_some());
    let earlier = ctx
        .storage
        .enqueue_periodic(&fire(t1, t2))
        .await
        .expect("fire");
    assert_eq!(earlier, None, "an older fire time after a newer one");
    assert_eq!(ctx.live_count().await, 1);
    let schedules = ctx.storage.schedules().await.expect("schedules");
    assert_eq!(schedules.len(), 1);
    assert_eq!(schedules[0].schedule.as_str(), "nightly");
    assert_eq!(
        (schedules[0].last_fire_at, schedules[0].next_fire_at),
        (t2, Some(t3))
    );
}

/// Eight callers racing one fire time make one job.
pub async fn concurrent_periodic_fires_make_one_job<S: Storage>(ctx: Ctx<S>) {
    for round in 0..5 {
        let at = ctx.now() + TimeDelta::seconds(round);
        // Polled together on this task, not spawned: each racer runs to its
        // first await before the next starts, so a storage that reads,
        // awaits and then writes meets the others in that window every run.
        let fire = fire(at, at + TimeDelta::seconds(1));
        let racers = (0..8).map(|_| ctx.storage.enqueue_periodic(&fire));
        let mut enqueued = 0;
        for outcome in futures_util::future::join_all(racers).await {
            enqueued += usize::from(outcome.expect("fire").is_some());
        }
        assert_eq!(enqueued, 1, "round {round}");
    }
    assert_eq!(ctx.live_count().await, 5);
}

/// An invalid fire records nothing: the same fire time, made valid, still
/// enqueues.
pub async fn enqueue_periodic_with_invalid_input_records_nothing<S: Storage>(ctx: Ctx<S>) {
    let t1 = ctx.now();
    let mut bad = fire(t1, t1 + TimeDelta::minutes(1));
    bad.job = bad.job.max_attempts(0);
    assert_invalid(ctx.storage.enqueue_periodic(&bad).await, "max_attempts");
    assert!(ctx.storage.schedules().await.expect("schedules").is_empty());
    assert_eq!(ctx.live_count().await, 0);
    let good = fire(t1, t1 + TimeDelta::minutes(1));
    assert!(
        ctx.storage
            .enqueue_periodic(&good)
            .await
            .expect("fire")
            .is_some()
    );
}
