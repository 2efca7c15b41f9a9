//! Flow control: a queue's concurrency and rate limits, enforced in the
//! claim, and the `queue_config` row they live in.

use std::time::Duration;

use queue_core::{Backoff, QueueConfig, QueueLimits, RateLimit, Retry, Storage};
use serde_json::json;

use super::{
    Ctx, LEASE, acks_of, assert_invalid, concurrency_limit, lease_of, queue, rate_limit, request,
    secs,
};

/// Limits read back as set, to the millisecond; pause and limits live in
/// one row without overwriting each other; default limits clear them.
pub async fn configure_queue_reads_back_and_keeps_the_paused_flag<S: Storage>(ctx: Ctx<S>) {
    let backoff = Backoff::new(secs(2), Duration::ZERO, secs(600), 0.25).expect("backoff");
    let limits = QueueLimits {
        concurrency: Some(3),
        group_concurrency: None,
        priority_aging: None,
        fair_groups: false,
        rate: Some(RateLimit {
            per_second: 2.5,
            burst: 4,
        }),
        lease: Some(Duration::from_millis(45_250)),
        backoff: Some(backoff),
    };
    assert!(ctx.configs().await.is_empty(), "no queue is configured yet");
    ctx.storage.pause_queue(&queue("a")).await.expect("pause");
    ctx.configure("a", limits).await;
    ctx.configure("b", concurrency_limit(7)).await;
    let configs = ctx.configs().await;
    assert_eq!(
        configs,
        vec![
            QueueConfig {
                queue: queue("a"),
                paused: true,
                limits,
            },
            QueueConfig {
                queue: queue("b"),
                paused: false,
                limits: concurrency_limit(7),
            },
        ]
    );
    ctx.storage.resume_queue(&queue("a")).await.expect("resume");
    assert_eq!(ctx.configs().await[0].limits, limits, "resume keeps limits");
    ctx.configure("b", QueueLimits::default()).await;
    let queues: Vec<_> = ctx.configs().await.into_iter().map(|c| c.queue).collect();
    assert_eq!(queues, vec![queue("a")], "b has neither limits nor pause");
}

/// Invalid limits are refused naming the field, and change nothing.
pub async fn configure_queue_rejects_invalid_limits<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", concurrency_limit(2)).await;
    let q = queue("q");
    assert_invalid(
        ctx.storage.configure_queue(&q, &concurrency_limit(0)).await,
        "concurrency",
    );
    assert_invalid(
        ctx.storage.configure_queue(&q, &rate_limit(-1.0, 1)).await,
        "rate",
    );
    assert_invalid(
        ctx.storage.configure_queue(&q, &rate_limit(1.0, 0)).await,
        "burst",
    );
    let lease = QueueLimits {
        lease: Some(Duration::ZERO),
        ..QueueLimits::default()
    };
    assert_invalid(ctx.storage.configure_queue(&q, &lease).await, "lease");
    assert_eq!(ctx.configs().await[0].limits, concurrency_limit(2));
}

/// A concurrency limit counts every held lease, expired ones too until
/// reclaim; ack, nack and reclaim free the slot.
pub async fn concurrency_limit_caps_the_leases_a_queue_holds<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", concurrency_limit(2)).await;
    ctx.fill("q", 6).await;
    let first = ctx.claim("q", 5).await;
    assert_eq!(first.len(), 2, "the limit, not the request, decides");
    assert!(ctx.claim_as("q", 5, "w2").await.is_empty(), "no slot left");
    ctx.storage
        .ack(&lease_of(&first[0]), None)
        .await
        .expect("ack");
    let second = ctx.claim_as("q", 5, "w2").await;
    assert_eq!(second.len(), 1, "an ack frees one slot");
    ctx.storage
        .nack(&lease_of(&second[0]), json!("x"), Retry::After(secs(60)))
        .await
        .expect("nack");
    assert_eq!(ctx.claim("q", 5).await.len(), 1, "a nack frees one slot");
    ctx.clock.advance(LEASE + secs(1));
    assert!(
        ctx.claim("q", 5).await.is_empty(),
        "an expired lease still holds its slot until reclaim"
    );
    ctx.storage.reclaim_stalled(10).await.expect("reclaim");
    assert_eq!(ctx.claim("q", 5).await.len(), 2, "reclaim frees them");
}

/// Eight workers claiming at once never hold more than the limit.
pub async fn concurrency_limit_holds_under_concurrent_claims<S: Storage>(ctx: Ctx<S>) {
    const LIMIT: usize = 3;
    ctx.configure("q", concurrency_limit(LIMIT as u32)).await;
    ctx.fill("q", 40).await;
    for round in 0..5 {
        // Polled together on this task rather than spawned: each claim
        // runs up to its first await before the next starts, so a claim
        // that reads the limits, awaits, then claims meets the others in
        // that window on every run, however busy the machine; a database
        // still receives the eight claims at once.
        let claims = (0..8).map(|n| {
            let worker = format!("w{round}-{n}");
            let storage = &ctx.storage;
            async move {
                storage
                    .dequeue(&request(&["q"], 4, &worker))
                    .await
                    .expect("dequeue")
            }
        });
        let claimed: Vec<_> = futures_util::future::join_all(claims)
            .await
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(
            claimed.len(),
            LIMIT,
            "round {round}: the racing claims together took {} jobs",
            claimed.len()
        );
        ctx.storage
            .ack_batch(&acks_of(&claimed))
            .await
            .expect("ack_batch");
    }
}

/// The bucket starts full, takes a token per job, and refills at the rate
/// on the storage's clock up to the burst.
pub async fn rate_limit_refills_its_bucket_on_the_storage_clock<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", rate_limit(2.0, 4)).await;
    ctx.fill("q", 30).await;
    assert_eq!(
        ctx.claim("q", 10).await.len(),
        4,
        "a full bucket: the burst"
    );
    assert!(ctx.claim("q", 10).await.is_empty(), "the bucket is empty");
    ctx.clock.advance(Duration::from_millis(499));
    assert!(ctx.claim("q", 10).await.is_empty(), "not yet a whole token");
    ctx.clock.advance(Duration::from_millis(1));
    assert_eq!(
        ctx.claim("q", 10).await.len(),
        1,
        "2/s: one token in 500 ms"
    );
    ctx.clock.advance(Duration::from_millis(1_250));
    assert_eq!(ctx.claim("q", 10).await.len(), 2, "2.5 tokens: two whole");
    ctx.clock.advance(Duration::from_millis(250));
    assert_eq!(ctx.claim("q", 10).await.len(), 1, "the half token was kept");
    ctx.clock.advance(secs(60));
    assert_eq!(
        ctx.claim("q", 10).await.len(),
        4,
        "refilled up to the burst only"
    );
}

/// In a claim over several queues each queue's limits bind only its own
/// jobs.
pub async fn limits_bind_only_their_queue_in_a_multi_queue_claim<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("slow", concurrency_limit(1)).await;
    ctx.fill("slow", 3).await;
    ctx.fill("fast", 3).await;
    let claimed = ctx
        .storage
        .dequeue(&request(&["fast", "slow"], 10, "w1"))
        .await
        .expect("dequeue");
    let slow = claimed.iter().filter(|j| j.queue == queue("slow")).count();
    let fast = claimed.iter().filter(|j| j.queue == queue("fast")).count();
    assert_eq!((slow, fast), (1, 3));
}

/// A change of limits binds the next claim; default limits lift them.
pub async fn configure_queue_takes_effect_at_the_next_claim<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", concurrency_limit(1)).await;
    ctx.fill("q", 10).await;
    assert_eq!(ctx.claim("q", 10).await.len(), 1);
    ctx.configure("q", concurrency_limit(3)).await;
    assert_eq!(ctx.claim("q", 10).await.len(), 2, "three held in all");
    ctx.configure("q", rate_limit(1.0, 2)).await;
    assert_eq!(ctx.claim("q", 10).await.len(), 2, "a new rate starts full");
    ctx.configure("q", QueueLimits::default()).await;
    assert_eq!(ctx.claim("q", 10).await.len(), 5, "no limit left");
}

/// A claim takes one token per job it claims, not per job it asked for:
/// a burst of 5 that two jobs drew from has 3 left.
pub async fn a_claim_takes_one_token_per_job_it_claims<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", rate_limit(0.001, 5)).await;
    ctx.fill("q", 2).await;
    assert_eq!(ctx.claim("q", 10).await.len(), 2);
    ctx.fill("q", 5).await;
    assert_eq!(ctx.claim("q", 10).await.len(), 3, "the bucket holds 3");
    assert_eq!(ctx.claim("q", 10).await.len(), 0);
}

/// A paused queue yields nothing, whatever limits it has.
pub async fn a_paused_queue_with_limits_yields_nothing<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", concurrency_limit(5)).await;
    ctx.fill("q", 2).await;
    ctx.storage.pause_queue(&queue("q")).await.expect("pause");
    assert!(
        ctx.claim("q", 10).await.is_empty(),
        "claimed from a paused queue"
    );
    ctx.storage.resume_queue(&queue("q")).await.expect("resume");
    assert_eq!(ctx.claim("q", 10).await.len(), 2);
}

/// Every way a lease ends gives its concurrency slot back: snooze, cancel,
/// discard, release, nack and ack each let the next claim take a job.
pub async fn every_way_a_lease_ends_gives_its_slot_back<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", concurrency_limit(1)).await;
    ctx.fill("q", 6).await;
    let one = |what: &'static str| {
        let ctx = &ctx;
        async move {
            let claimed = ctx.claim("q", 10).await;
            assert_eq!(claimed.len(), 1, "after {what}, the slot is free again");
            claimed.into_iter().next().expect("one job")
        }
    };
    let job = one("the start").await;
    assert!(ctx.claim("q", 10).await.is_empty(), "the limit holds");
    ctx.storage
        .snooze(&lease_of(&job), secs(600))
        .await
        .expect("snooze");
    let job = one("a snooze").await;
    ctx.storage.cancel(job.id).await.expect("cancel");
    let job = one("a cancel").await;
    ctx.storage.discard(job.id).await.expect("discard");
    let job = one("a discard").await;
    assert!(ctx.storage.release(&lease_of(&job)).await.expect("release"));
    let job = one("a release").await;
    (ctx.storage
        .nack(&lease_of(&job), json!("e"), Retry::After(secs(600)))
        .await)
        .expect("nack");
    let job = one("a nack").await;
    ctx.storage.ack(&lease_of(&job), None).await.expect("ack");
    one("an ack").await;
}

/// Racing claims over a paused queue and a queue limited to 2 jobs at
/// once hold the limit: a claim that waited while another took the 2
/// counts them. (MariaDB counted the leases in a read view opened before
/// the wait, by the paused queue's config row read first: a racer took a
/// third job, every run.)
pub async fn racing_claims_over_a_paused_and_a_limited_queue_keep_the_limit<S: Storage>(
    ctx: Ctx<S>,
) {
    ctx.configure("b", concurrency_limit(2)).await;
    ctx.storage.pause_queue(&queue("a")).await.expect("pause");
    for round in 0..5 {
        ctx.fill("a", 2).await;
        ctx.fill("b", 4).await;
        // Polled together on this task (see
        // `concurrency::racing_claims_take_each_queues_jobs_in_order`).
        let racers = (0..4).map(|n| {
            let request = request(&["a", "b"], 2, &format!("c{n}"));
            let storage = &ctx.storage;
            async move { storage.dequeue(&request).await.expect("dequeue") }
        });
        let claimed: Vec<_> = futures_util::future::join_all(racers)
            .await
            .into_iter()
            .flatten()
            .collect();
        assert!(
            claimed.iter().all(|job| job.queue == queue("b")),
            "round {round}: a job of the paused queue"
        );
        assert_eq!(claimed.len(), 2, "round {round}: the limit is 2");
        (ctx.storage.ack_batch(&acks_of(&claimed)))
            .await
            .expect("ack");
    }
}
