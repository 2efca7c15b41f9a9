//! Enqueue: ids, payloads, unique keys, schedules, validation, batches.

use chrono::TimeDelta;
use queue_core::{EnqueueOutcome, JobState, NewJob, Storage};
use serde::ser::{Error as _, Serialize, Serializer};
use serde_json::json;

use super::{Ctx, assert_invalid, secs, start};

/// A new job gets an id and is pending with attempts 0, as enqueued.
pub async fn enqueue_returns_id_and_pending_job<S: Storage>(ctx: Ctx<S>) {
    let id = ctx
        .enqueue(
            NewJob::new("mail", json!({"to": "ada"}))
                .priority(7)
                .max_attempts(4),
        )
        .await;
    let job = ctx.live(id).await;
    assert_eq!(job.id, id);
    assert_eq!(job.queue.as_str(), "mail");
    assert_eq!(job.priority, 7);
    assert_eq!(job.max_attempts, 4);
    assert_eq!(job.attempts, 0);
    assert_eq!(job.unique_key, None);
    assert_eq!(job.payload, json!({"to": "ada"}));
    assert_eq!(job.available_at, ctx.now());
    assert_eq!(job.created_at, ctx.now());
    assert_eq!(job.lease_until, None);
    assert_eq!(job.locked_by, None);
    assert_eq!(job.first_locked_at, None);
    assert_eq!(job.last_error, None);
    assert_eq!(job.state(ctx.now()), JobState::Pending);
}

/// Nested JSON, unicode and numbers at the i64/u64/f64 edges read back equal.
pub async fn enqueue_round_trips_payload_values<S: Storage>(ctx: Ctx<S>) {
    let payloads = [
        json!({"a": {"b": {"c": [1, [2, [3, {"d": null}]]]}}, "e": true}),
        json!("héllo wörld — 你好 — 🎉 — \"quoted\" \\ back\nslash"),
        json!({"max": i64::MAX, "min": i64::MIN, "umax": u64::MAX}),
        json!({"big": f64::MAX, "tiny": f64::MIN_POSITIVE, "subnormal": 5e-324, "third": 1.0 / 3.0}),
        json!([]),
        json!({}),
        json!(null),
        json!(0),
        json!({"ключ": "значение", "emoji 🔑": ["✓"]}),
    ];
    for payload in payloads {
        let id = ctx.enqueue(NewJob::new("q", &payload)).await;
        assert_eq!(ctx.live(id).await.payload, payload);
        let claimed = ctx.claim_one("q").await;
        assert_eq!(claimed.payload, payload, "dequeue returns the payload too");
        ctx.storage
            .ack(&super::lease_of(&claimed), Some(payload.clone()))
            .await
            .expect("ack");
        assert_eq!(ctx.archived(id).await.result, Some(payload.clone()));
        assert_eq!(ctx.archived(id).await.payload, payload);
    }
}

/// A 1 MiB payload is stored and read back whole.
pub async fn enqueue_round_trips_a_one_mib_payload<S: Storage>(ctx: Ctx<S>) {
    let blob: String = "0123456789abcdef".repeat(64 * 1024);
    let payload = json!({ "blob": blob });
    let id = ctx.enqueue(NewJob::new("big", &payload)).await;
    assert_eq!(ctx.live(id).await.payload, payload);
    assert_eq!(ctx.claim_one("big").await.payload, payload);
}

/// A live unique key returns the first job, `existed = true`, writes nothing.
pub async fn enqueue_with_live_unique_key_returns_existing_job<S: Storage>(ctx: Ctx<S>) {
    let first = ctx
        .enqueue(NewJob::new("q", json!({"v": 1})).unique_key("k"))
        .await;
    let second = ctx
        .storage
        .enqueue(
            NewJob::new("q", json!({"v": 2}))
                .unique_key("k")
                .priority(9),
        )
        .await
        .expect("enqueue");
    assert_eq!(
        second,
        EnqueueOutcome {
            id: first,
            existed: true
        }
    );
    let job = ctx.live(first).await;
    assert_eq!(job.payload, json!({"v": 1}), "the live job is unchanged");
    assert_eq!(job.priority, 0);
    assert_eq!(ctx.live_count().await, 1);
    // Still deduplicated while running.
    ctx.claim_one("q").await;
    let third = ctx
        .storage
        .enqueue(NewJob::new("q", json!({"v": 3})).unique_key("k"))
        .await
        .expect("enqueue");
    assert_eq!(
        third,
        EnqueueOutcome {
            id: first,
            existed: true
        }
    );
}

/// The same key in another queue is a different job.
pub async fn enqueue_same_key_in_another_queue_is_a_new_job<S: Storage>(ctx: Ctx<S>) {
    let a = ctx
        .enqueue(NewJob::new("a", json!(1)).unique_key("k"))
        .await;
    let b = ctx
        .enqueue(NewJob::new("b", json!(1)).unique_key("k"))
        .await;
    assert_ne!(a, b);
    assert_eq!(ctx.live_count().await, 2);
}

/// Jobs without a key never collide, even with equal payloads.
pub async fn enqueue_without_key_never_collides<S: Storage>(ctx: Ctx<S>) {
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(ctx.enqueue(NewJob::new("q", json!({"same": true}))).await);
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3);
}

/// Once archived (completed or dead letter) a key is free again.
pub async fn enqueue_key_is_free_again_once_job_is_archived<S: Storage>(ctx: Ctx<S>) {
    let first = ctx
        .enqueue(NewJob::new("q", json!(1)).unique_key("k"))
        .await;
    let job = ctx.claim_one("q").await;
    ctx.storage
        .ack(&super::lease_of(&job), None)
        .await
        .expect("ack");

    let second = ctx
        .enqueue(NewJob::new("q", json!(2)).unique_key("k"))
        .await;
    assert_ne!(second, first);
    let job = ctx.claim_one("q").await;
    ctx.storage
        .nack(
            &super::lease_of(&job),
            json!("boom"),
            queue_core::Retry::Never,
        )
        .await
        .expect("nack");

    let third = ctx
        .enqueue(NewJob::new("q", json!(3)).unique_key("k"))
        .await;
    assert_eq!(ctx.live(third).await.payload, json!(3));
}

/// Once discarded, a key is free again.
pub async fn enqueue_key_is_free_again_once_job_is_discarded<S: Storage>(ctx: Ctx<S>) {
    let first = ctx
        .enqueue(NewJob::new("q", json!(1)).unique_key("k"))
        .await;
    ctx.storage.discard(first).await.expect("discard");
    let second = ctx
        .enqueue(NewJob::new("q", json!(2)).unique_key("k"))
        .await;
    assert_eq!(ctx.live(second).await.payload, json!(2));
}

/// A delayed job is scheduled at now + delay.
pub async fn enqueue_delayed_job_is_scheduled<S: Storage>(ctx: Ctx<S>) {
    let id = ctx
        .enqueue(NewJob::new("q", json!(1)).delay(secs(90)))
        .await;
    let job = ctx.live(id).await;
    assert_eq!(job.available_at, ctx.now() + TimeDelta::seconds(90));
    assert_eq!(job.state(ctx.now()), JobState::Scheduled);
}

/// `run_at` sets `available_at` exactly, in the past or the future.
pub async fn enqueue_run_at_sets_available_at<S: Storage>(ctx: Ctx<S>) {
    let later = start() + TimeDelta::microseconds(3_600_000_123);
    let earlier = start() - TimeDelta::days(400);
    let a = ctx.enqueue(NewJob::new("q", json!(1)).run_at(later)).await;
    let b = ctx
        .enqueue(NewJob::new("q", json!(2)).run_at(earlier))
        .await;
    assert_eq!(ctx.live(a).await.available_at, later);
    assert_eq!(ctx.live(b).await.available_at, earlier);
    assert_eq!(ctx.live(b).await.state(ctx.now()), JobState::Pending);
}

struct Unserialisable;

impl Serialize for Unserialisable {
    fn serialize<S: Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(S::Error::custom("refuses to serialise"))
    }
}

/// Every validation rule surfaces as `InvalidInput` naming its field, and
/// nothing is written.
pub async fn enqueue_invalid_input_is_typed_and_writes_nothing<S: Storage>(ctx: Ctx<S>) {
    let ok = || NewJob::new("q", json!(1));
    let cases = [
        (NewJob::new("", json!(1)), "queue"),
        (NewJob::new("q".repeat(192), json!(1)), "queue"),
        (NewJob::new("bad\nname", json!(1)), "queue"),
        (NewJob::new(" padded", json!(1)), "queue"),
        (ok().unique_key(""), "unique_key"),
        (ok().unique_key("k".repeat(192)), "unique_key"),
        (ok().unique_key("tab\tkey"), "unique_key"),
        (ok().max_attempts(0), "max_attempts"),
        (ok().max_attempts(u32::MAX), "max_attempts"),
        (NewJob::new("q", Unserialisable), "payload"),
        (NewJob::new("q", json!({"nul": "\u{0}"})), "payload"),
        (ok().delay(std::time::Duration::MAX), "delay"),
        (
            ok().run_at(chrono::DateTime::<chrono::Utc>::MIN_UTC),
            "run_at",
        ),
        (
            ok().run_at(chrono::DateTime::<chrono::Utc>::MAX_UTC),
            "run_at",
        ),
    ];
    for (job, field) in cases {
        assert_invalid(ctx.storage.enqueue(job).await, field);
    }
    assert_eq!(ctx.live_count().await, 0);
}

/// A batch returns one outcome per job in input order; keys repeated inside
/// the batch or already live yield the first job with `existed = true`.
pub async fn enqueue_batch_returns_outcomes_in_input_order<S: Storage>(ctx: Ctx<S>) {
    let live = ctx
        .enqueue(NewJob::new("q", json!("live")).unique_key("old"))
        .await;
    let outcomes = ctx
        .storage
        .enqueue_batch(vec![
            NewJob::new("q", json!(0)),
            NewJob::new("q", json!(1)).unique_key("dup"),
            NewJob::new("q", json!(2)).unique_key("old"),
            NewJob::new("q", json!(3)).unique_key("dup"),
            NewJob::new("other", json!(4)).unique_key("dup"),
            NewJob::new("q", json!(5)).priority(3),
        ])
        .await
        .expect("enqueue_batch");
    assert_eq!(outcomes.len(), 6);
    let existed: Vec<bool> = outcomes.iter().map(|o| o.existed).collect();
    assert_eq!(existed, [false, false, true, true, false, false]);
    assert_eq!(outcomes[2].id, live);
    assert_eq!(outcomes[3].id, outcomes[1].id);
    let new_ids = [0, 1, 4, 5].map(|i| outcomes[i].id);
    for (i, id) in [0, 1, 4, 5].into_iter().zip(new_ids) {
        assert_eq!(
            ctx.live(id).await.payload,
            json!(i),
            "outcome {i} names its own job"
        );
    }
    let mut distinct = new_ids.to_vec();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 4);
    assert_eq!(ctx.live_count().await, 5);
    assert_eq!(
        ctx.live(outcomes[1].id).await.payload,
        json!(1),
        "first of a repeated key wins"
    );
}

/// A large batch (300 jobs, what a bulk producer sends) keeps every field
/// of every job (priority, payload, trace context, attempts, delay or
/// time) and takes ids that ascend in input order, whatever path a
/// storage takes for large batches; a job with a unique key in such a
/// batch still meets the job holding its key. (Group keys need
/// `GroupLimits`; their cases are in `groups`.)
pub async fn enqueue_large_batch_keeps_every_field_and_the_input_order<S: Storage>(ctx: Ctx<S>) {
    let trace = queue_core::TraceContext::new(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        Some("vendor=a1b2"),
    )
    .expect("valid trace context");
    let at = ctx.now() + TimeDelta::seconds(90);
    let job = |i: usize| {
        let mut job = NewJob::new("bulk", json!({"i": i, "text": "é—🎉", "big": i64::MAX}))
            .priority(i32::try_from(i % 5).expect("small") - 2)
            .max_attempts(u32::try_from(i % 7).expect("small") + 1);
        if i.is_multiple_of(4) {
            job = job.trace_context(trace.clone());
        }
        match i % 10 {
            1 => job.delay(secs(30)),
            2 => job.run_at(at),
            _ => job,
        }
    };
    let outcomes = ctx
        .storage
        .enqueue_batch((0..300).map(job).collect())
        .await
        .expect("enqueue_batch");
    assert_eq!(outcomes.len(), 300);
    assert!(outcomes.iter().all(|o| !o.existed));
    assert!(
        outcomes.windows(2).all(|w| w[0].id < w[1].id),
        "ids ascend in input order"
    );
    for (i, outcome) in outcomes.iter().enumerate() {
        let stored = ctx.live(outcome.id).await;
        let expected = job(i).validate().expect("valid");
        assert_eq!(stored.payload, expected.payload, "job {i}");
        assert_eq!(stored.priority, expected.priority, "job {i}");
        assert_eq!(stored.max_attempts, expected.max_attempts, "job {i}");
        assert_eq!(stored.group_key, None, "job {i}");
        assert_eq!(stored.trace_context, expected.trace_context, "job {i}");
        assert_eq!(stored.unique_key, None, "job {i}");
        assert_eq!(stored.attempts, 0, "job {i}");
        assert_eq!(stored.created_at, ctx.now(), "job {i}");
        assert_eq!(
            stored.available_at,
            expected.available_at(ctx.now()),
            "job {i}"
        );
    }
    assert_eq!(ctx.live_count().await, 300);
    // Due jobs claim by priority, then id: the batch's order within a level.
    let claimed = ctx.claim("bulk", 300).await;
    let due: Vec<usize> = (0..300).filter(|i| !matches!(i % 10, 1 | 2)).collect();
    assert_eq!(claimed.len(), due.len());
    let mut expected = due.clone();
    expected.sort_by_key(|i| (std::cmp::Reverse(i % 5), *i));
    let order: Vec<_> = expected.iter().map(|i| outcomes[*i].id).collect();
    assert_eq!(claimed.iter().map(|j| j.id).collect::<Vec<_>>(), order);

    // The same size with one key that is live: that job is the live one,
    // the others new.
    let live = ctx
        .enqueue(NewJob::new("bulk", json!("live")).unique_key("k"))
        .await;
    let mut batch: Vec<NewJob> = (0..300).map(|i| NewJob::new("bulk", json!(i))).collect();
    batch[150] = NewJob::new("bulk", json!("again")).unique_key("k");
    let outcomes = ctx
        .storage
        .enqueue_batch(batch)
        .await
        .expect("enqueue_batch");
    assert_eq!(outcomes[150].id, live);
    assert!(outcomes[150].existed);
    assert_eq!(outcomes.iter().filter(|o| o.existed).count(), 1);
    assert!(
        outcomes
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 150)
            .collect::<Vec<_>>()
            .windows(2)
            .all(|w| w[0].1.id < w[1].1.id),
        "the new jobs' ids ascend in input order"
    );
    assert_eq!(ctx.live_count().await, 300 + 300);
}

/// One invalid job rejects the whole batch and writes nothing.
pub async fn enqueue_batch_with_an_invalid_job_writes_nothing<S: Storage>(ctx: Ctx<S>) {
    let result = ctx
        .storage
        .enqueue_batch(vec![
            NewJob::new("q", json!(1)),
            NewJob::new("q", json!(2)).max_attempts(0),
            NewJob::new("q", json!(3)),
        ])
        .await;
    assert_invalid(result, "max_attempts");
    assert_eq!(ctx.live_count().await, 0);
}

/// An empty batch is fine and returns no outcomes.
pub async fn enqueue_batch_of_nothing_returns_nothing<S: Storage>(ctx: Ctx<S>) {
    let outcomes = ctx
        .storage
        .enqueue_batch(Vec::new())
        .await
        .expect("enqueue_batch");
    assert!(outcomes.is_empty());
}

/// `now()` reads the manual clock, and follows it when it moves.
pub async fn now_follows_the_manual_clock<S: Storage>(ctx: Ctx<S>) {
    assert_eq!(ctx.storage.now().await.expect("now"), start());
    ctx.clock.advance(secs(3600));
    assert_eq!(
        ctx.storage.now().await.expect("now"),
        start() + TimeDelta::hours(1)
    );
}
