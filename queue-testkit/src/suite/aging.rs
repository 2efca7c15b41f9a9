//! Priority aging ([`queue_core::Capability::PriorityAging`]): with a
//! period `P` on a queue, a claim serves a pending job as if
//! `floor((now - available_at) / P)` levels higher, so no level starves; the
//! stored priority never changes, and without the setting the order is the
//! plain one.

use std::time::Duration;

use queue_core::{Capability, Job, JobId, NewJob, QueueError, QueueLimits, Retry, Storage};
use serde_json::json;

use super::{Ctx, assert_invalid, lease_of, queue, request, secs};
use crate::suite::groups::group;

/// Limits with a priority aging period of `period`, and nothing else.
pub fn aging(period: Duration) -> QueueLimits {
    QueueLimits {
        priority_aging: Some(period),
        ..QueueLimits::default()
    }
}

/// The ids of `jobs`, in order.
fn ids(jobs: &[Job]) -> Vec<JobId> {
    jobs.iter().map(|job| job.id).collect()
}

impl<S: Storage> Ctx<S> {
    /// Enqueues one job of `priority` into `queue_name` now, and returns its id.
    pub async fn enqueue_at_priority(&self, queue_name: &str, priority: i32) -> JobId {
        self.enqueue(NewJob::new(queue_name, json!({ "p": priority })).priority(priority))
            .await
    }
}

/// A job that has waited `k` whole periods is claimed before a job of `k`
/// levels more that became due later, and not a microsecond sooner: with
/// a 10 s period, a priority-0 job that has waited 19.999 s still loses to
/// a new priority-2 job, and at 20 s it wins the tie by `available_at`.
pub async fn an_old_job_is_claimed_before_a_newer_one_exactly_when_its_periods_make_up_the_gap<
    S: Storage,
>(
    ctx: Ctx<S>,
) {
    ctx.configure("q", aging(secs(10))).await;
    let low = ctx.enqueue_at_priority("q", 0).await;
    ctx.clock.advance(Duration::from_millis(19_999));
    let first_two = ctx.enqueue_at_priority("q", 2).await;
    let second_two = ctx.enqueue_at_priority("q", 2).await;
    let three = ctx.enqueue_at_priority("q", 3).await;
    assert_eq!(ids(&ctx.claim("q", 1).await), vec![three]);
    assert_eq!(
        ids(&ctx.claim("q", 1).await),
        vec![first_two],
        "19.999 s is one whole period: the old job is at level 1, below 2"
    );
    ctx.clock.advance(Duration::from_millis(1));
    let claimed = ctx.claim("q", 1).await;
    assert_eq!(
        ids(&claimed),
        vec![low],
        "at 20 s the old job is at level 2, tied with the newer one, and due earlier"
    );
    assert_eq!(claimed[0].priority, 0, "the stored priority never changes");
    assert_eq!(ids(&ctx.claim("q", 1).await), vec![second_two]);
    assert_eq!(ctx.live(low).await.priority, 0);
}

/// One claim returns an aging queue's jobs by effective priority, then
/// `available_at`, then id, and a lower level that waited long enough goes
/// ahead of every higher one.
pub async fn aging_orders_by_effective_priority_then_available_at_then_id<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", aging(secs(10))).await;
    let x = ctx.enqueue_at_priority("q", 0).await; // at 0 s
    let w = ctx.enqueue_at_priority("q", -1).await; // at 0 s
    ctx.clock.advance(secs(10));
    let batch = vec![
        NewJob::new("q", json!("y1")).priority(1),
        NewJob::new("q", json!("y2")).priority(1),
    ];
    let ys = ctx
        .storage
        .enqueue_batch(batch)
        .await
        .expect("enqueue_batch");
    ctx.clock.advance(secs(15));
    let z = ctx.enqueue_at_priority("q", 3).await; // at 25 s
    ctx.clock.advance(secs(5));
    // At 30 s: x 0+3, w -1+3, y1 and y2 1+2, z 3+0.
    let claimed = ctx.claim("q", 10).await;
    assert_eq!(
        ids(&claimed),
        vec![x, ys[0].id, ys[1].id, z, w],
        "level 3 by available_at then id, then w at level 2"
    );
    let priorities: Vec<i32> = claimed.iter().map(|job| job.priority).collect();
    assert_eq!(priorities, vec![0, 1, 1, 3, -1], "as stored");
}

/// Without the setting the order is the plain one however long jobs wait,
/// on a queue with other limits and on one never configured; in a claim
/// over an aging and a plain queue, the jobs compare by effective priority
/// (the plain queue's is its stored one).
pub async fn without_aging_the_order_stays_plain<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("limited", super::concurrency_limit(10)).await;
    ctx.configure("aging", aging(secs(10))).await;
    let mut old = Vec::new();
    for name in ["limited", "plain", "aging"] {
        old.push(ctx.enqueue_at_priority(name, 0).await);
    }
    ctx.clock.advance(Duration::from_secs(30 * 24 * 3600));
    for (name, old) in [("limited", old[0]), ("plain", old[1])] {
        let high = ctx.enqueue_at_priority(name, 1).await;
        assert_eq!(
            ids(&ctx.claim(name, 2).await),
            vec![high, old],
            "{name} has no aging: 30 days of waiting lift nothing"
        );
    }
    // The old aging job is at level 259,200; a new plain job of 5 is below.
    let plain = ctx.enqueue_at_priority("plain", 5).await;
    let fresh = ctx.enqueue_at_priority("aging", 1).await;
    // One job over both queues: the aged one, though its stored level is
    // below the plain job's.
    let best = (ctx.storage)
        .dequeue(&request(&["aging", "plain"], 1, "w2"))
        .await
        .expect("dequeue");
    assert_eq!(ids(&best), vec![old[2]]);
    let both = (ctx.storage)
        .dequeue(&request(&["aging", "plain"], 10, "w2"))
        .await
        .expect("dequeue");
    assert_eq!(ids(&both), vec![plain, fresh]);
}

/// Lifting the setting restores the plain order at the next claim, and
/// setting it again brings the aged order back: nothing was written to the
/// jobs.
pub async fn lifting_aging_restores_the_plain_order<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", aging(secs(1))).await;
    let low = ctx.enqueue_at_priority("q", 0).await;
    ctx.clock.advance(secs(5));
    let high = ctx.enqueue_at_priority("q", 4).await;
    let aged = ctx.claim("q", 1).await;
    assert_eq!(ids(&aged), vec![low], "5 periods lift the old job past 4");
    ctx.storage
        .ack(&lease_of(&aged[0]), None)
        .await
        .expect("ack");
    let low = ctx.enqueue_at_priority("q", 0).await;
    ctx.clock.advance(secs(5));
    ctx.configure("q", super::concurrency_limit(5)).await;
    assert_eq!(
        ids(&ctx.claim("q", 1).await),
        vec![high],
        "the aging is lifted: plain order"
    );
    ctx.configure("q", aging(secs(1))).await;
    let higher = ctx.enqueue_at_priority("q", 4).await;
    assert_eq!(
        ids(&ctx.claim("q", 2).await),
        vec![low, higher],
        "aging again: 5 periods"
    );
    ctx.configure("q", QueueLimits::default()).await;
    assert!(
        ctx.configs()
            .await
            .iter()
            .all(|c| c.limits == QueueLimits::default())
    );
}

/// The wait counts from `available_at`: a job put back by a nack with a
/// delay, or by a release, ages from when it became due again, not from
/// its enqueue.
pub async fn a_retried_or_released_job_ages_from_when_it_became_due<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", aging(secs(10))).await;
    let retried = ctx.enqueue_at_priority("q", 0).await;
    let released = ctx.enqueue_at_priority("q", 0).await;
    ctx.clock.advance(secs(100));
    let both = ctx.claim("q", 2).await;
    assert_eq!(ids(&both), vec![retried, released]);
    ctx.storage
        .nack(&lease_of(&both[0]), json!("e"), Retry::After(secs(5)))
        .await
        .expect("nack");
    ctx.clock.advance(secs(5));
    assert!(
        ctx.storage
            .release(&lease_of(&both[1]))
            .await
            .expect("release")
    );
    // Both due now (the nack's at +5 s, the release at once): neither has
    // waited a period.
    let one = ctx.enqueue_at_priority("q", 1).await;
    assert_eq!(ids(&ctx.claim("q", 3).await), vec![one, retried, released]);
}

/// Aging changes which jobs a limited claim takes, not how many: a queue's
/// concurrency limit and its group concurrency still hold, and a full
/// group's aged job is skipped for the next eligible one.
pub async fn aging_keeps_concurrency_and_group_limits<S: Storage>(ctx: Ctx<S>) {
    ctx.configure(
        "q",
        QueueLimits {
            concurrency: Some(2),
            group_concurrency: Some(1),
            priority_aging: Some(secs(10)),
            ..QueueLimits::default()
        },
    )
    .await;
    let a1 = ctx
        .enqueue(NewJob::new("q", json!("a1")).group_key("a"))
        .await;
    let a2 = ctx
        .enqueue(NewJob::new("q", json!("a2")).group_key("a"))
        .await;
    ctx.clock.advance(secs(30));
    let b1 = ctx
        .enqueue(NewJob::new("q", json!("b1")).group_key("b").priority(2))
        .await;
    ctx.enqueue(NewJob::new("q", json!("b2")).group_key("b").priority(2))
        .await;
    ctx.enqueue(NewJob::new("q", json!("c")).priority(1)).await;
    let claimed = ctx.claim("q", 10).await;
    assert_eq!(
        ids(&claimed),
        vec![a1, b1],
        "a1 at level 3 first, a2 skipped (group a full), then b1; the concurrency limit of 2 stops the claim"
    );
    assert_eq!(claimed[0].group_key, Some(group("a")));
    assert!(
        ctx.claim_as("q", 10, "w2").await.is_empty(),
        "both slots held"
    );
    ctx.storage
        .ack(&lease_of(&claimed[0]), None)
        .await
        .expect("ack");
    assert_eq!(ids(&ctx.claim_as("q", 10, "w2").await), vec![a2]);
}

/// A period under 1 s or over 30 days is refused as `InvalidInput`
/// naming `priority_aging`, and nothing is written: the queue's limits
/// stay as they were, and an unconfigured queue gets no config row.
/// Accepted periods read back to the millisecond.
pub async fn priority_aging_with_invalid_input_writes_nothing<S: Storage>(ctx: Ctx<S>) {
    let kept = QueueLimits {
        concurrency: Some(3),
        priority_aging: Some(secs(60)),
        ..QueueLimits::default()
    };
    ctx.configure("q", kept).await;
    for period in [
        Duration::ZERO,
        Duration::from_millis(999),
        queue_core::MAX_PRIORITY_AGING + Duration::from_millis(1),
    ] {
        for name in ["q", "fresh"] {
            assert_invalid(
                ctx.storage
                    .configure_queue(&queue(name), &aging(period))
                    .await,
                "priority_aging",
            );
        }
    }
    let configs = ctx.configs().await;
    assert_eq!(configs.len(), 1, "no config row was made: {configs:?}");
    assert_eq!(configs[0].limits, kept, "unchanged");
    ctx.configure("q", aging(queue_core::MAX_PRIORITY_AGING))
        .await;
    ctx.configure("r", aging(Duration::from_millis(1_500)))
        .await;
    let configs = ctx.configs().await;
    assert_eq!(
        (configs.iter().map(|c| c.limits.priority_aging)).collect::<Vec<_>>(),
        vec![
            Some(queue_core::MAX_PRIORITY_AGING),
            Some(Duration::from_millis(1_500))
        ]
    );
}

/// Two handles on one database, as two hosts: a period set through one
/// reads back and orders the claims made through the other, and lifting
/// it through the other restores the plain order for both.
pub async fn priority_aging_binds_claims_through_another_handle<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", aging(secs(2))).await;
    let second = ctx.second();
    let configs = second.queue_configs().await.expect("queue_configs");
    assert_eq!(configs[0].limits.priority_aging, Some(secs(2)));
    let old = ctx.enqueue_at_priority("q", 0).await;
    let older_low = ctx.enqueue_at_priority("q", -1).await;
    ctx.clock.advance(secs(6));
    let new = ctx.enqueue_at_priority("q", 2).await;
    let claimed = (second.dequeue(&request(&["q"], 1, "other")))
        .await
        .expect("dequeue");
    assert_eq!(
        ids(&claimed),
        vec![old],
        "level 0+3 beats 2 through the other handle"
    );
    second
        .configure_queue(&queue("q"), &QueueLimits::default())
        .await
        .expect("configure_queue");
    let claimed = (ctx.storage.dequeue(&request(&["q"], 2, "first")))
        .await
        .expect("dequeue");
    assert_eq!(
        ids(&claimed),
        vec![new, older_low],
        "lifted through the other handle: plain order here"
    );
}

/// What a storage that does not declare [`Capability::PriorityAging`]
/// must do, for a backend's own test to call (the suite's cases run only
/// on storages that declare it): a `configure_queue` that sets a period is
/// refused with `NotSupported` naming the capability, and nothing is
/// written (no config row, the old limits kept).
///
/// # Panics
/// When the storage declares the capability, or accepts a period.
pub async fn priority_aging_is_refused_without_the_capability<S: Storage>(storage: &S) {
    assert!(
        !storage.capabilities().supports(Capability::PriorityAging),
        "the storage declares priority aging: run the suite's cases instead"
    );
    let refused = |what: &str, result: queue_core::Result<()>| match result {
        Err(QueueError::NotSupported {
            capability: Some(Capability::PriorityAging),
            ..
        }) => {}
        other => panic!("{what}: expected NotSupported (priority_aging), got {other:?}"),
    };
    let with_aging = QueueLimits {
        concurrency: Some(2),
        priority_aging: Some(secs(60)),
        ..QueueLimits::default()
    };
    refused(
        "configure_queue",
        storage.configure_queue(&queue("q"), &with_aging).await,
    );
    if storage.capabilities().supports(Capability::FlowLimits) {
        let configs = storage.queue_configs().await.expect("queue_configs");
        assert!(configs.is_empty(), "a config row was written: {configs:?}");
    }
}
