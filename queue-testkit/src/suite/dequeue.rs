//! Dequeue: order, queues, limits, what a claim sets, what it skips.

use chrono::TimeDelta;
use queue_core::{JobId, JobState, NewJob, Retry, Storage};
use serde_json::json;

use super::{Ctx, LEASE, lease_of, queue, request, secs, start, worker};

/// Claims come out priority descending, then `available_at`, then id.
pub async fn dequeue_orders_by_priority_then_available_at_then_id<S: Storage>(ctx: Ctx<S>) {
    let t = |s: i64| start() - TimeDelta::seconds(s);
    let low_old = ctx
        .enqueue(NewJob::new("q", json!(1)).priority(-5).run_at(t(100)))
        .await;
    let mid_new = ctx
        .enqueue(NewJob::new("q", json!(2)).priority(0).run_at(t(10)))
        .await;
    let mid_old = ctx
        .enqueue(NewJob::new("q", json!(3)).priority(0).run_at(t(50)))
        .await;
    let high = ctx
        .enqueue(NewJob::new("q", json!(4)).priority(10).run_at(t(1)))
        .await;
    let mid_same_a = ctx
        .enqueue(NewJob::new("q", json!(5)).priority(0).run_at(t(30)))
        .await;
    let mid_same_b = ctx
        .enqueue(NewJob::new("q", json!(6)).priority(0).run_at(t(30)))
        .await;
    let future = ctx
        .enqueue(NewJob::new("q", json!(7)).priority(99).delay(secs(5)))
        .await;

    let claimed: Vec<_> = ctx.claim("q", 10).await.into_iter().map(|j| j.id).collect();
    assert_eq!(
        claimed,
        [high, mid_old, mid_same_a, mid_same_b, mid_new, low_old]
    );
    assert_eq!(ctx.live(future).await.state(ctx.now()), JobState::Scheduled);
}

/// A limited claim takes the best due jobs across priority levels, past
/// levels (and the ends of levels) holding only jobs not yet due, in one
/// queue and across several; the waiting jobs are claimed once due.
pub async fn dequeue_limit_spans_priority_levels_past_jobs_not_yet_due<S: Storage>(ctx: Ctx<S>) {
    let t = |s: i64| start() - TimeDelta::seconds(s);
    let top_later = ctx
        .enqueue(NewJob::new("q", json!(1)).priority(5).delay(secs(60)))
        .await;
    let three_due = ctx
        .enqueue(NewJob::new("q", json!(2)).priority(3).run_at(t(10)))
        .await;
    let three_later = ctx
        .enqueue(NewJob::new("q", json!(3)).priority(3).delay(secs(30)))
        .await;
    let one_later = ctx
        .enqueue(NewJob::new("q", json!(4)).priority(1).delay(secs(10)))
        .await;
    let one_newer = ctx
        .enqueue(NewJob::new("q", json!(5)).priority(1).run_at(t(5)))
        .await;
    let one_older = ctx
        .enqueue(NewJob::new("q", json!(6)).priority(1).run_at(t(20)))
        .await;
    let zero_due = ctx
        .enqueue(NewJob::new("q", json!(7)).priority(0).run_at(t(30)))
        .await;
    let other_two = ctx
        .enqueue(NewJob::new("r", json!(8)).priority(2).run_at(t(1)))
        .await;

    let ids = |jobs: Vec<queue_core::Job>| jobs.into_iter().map(|j| j.id).collect::<Vec<_>>();
    assert_eq!(ids(ctx.claim("q", 2).await), [three_due, one_older]);
    let several = ctx
        .storage
        .dequeue(&request(&["q", "r"], 2, "w1"))
        .await
        .expect("dequeue");
    assert_eq!(ids(several), [other_two, one_newer]);
    assert_eq!(ids(ctx.claim("q", 1).await), [zero_due]);
    assert!(ctx.claim("q", 10).await.is_empty());
    ctx.clock.advance(secs(30));
    assert_eq!(ids(ctx.claim("q", 10).await), [three_later, one_later]);
    ctx.clock.advance(secs(30));
    assert_eq!(ids(ctx.claim("q", 10).await), [top_later]);
}

/// Only the named queues are claimed from, several at once.
pub async fn dequeue_claims_only_from_named_queues<S: Storage>(ctx: Ctx<S>) {
    let a = ctx.enqueue(NewJob::new("a", json!(1))).await;
    let b = ctx.enqueue(NewJob::new("b", json!(1)).priority(1)).await;
    let c = ctx.enqueue(NewJob::new("c", json!(1))).await;
    let jobs = ctx
        .storage
        .dequeue(&request(&["a", "b", "nothing-here"], 10, "w1"))
        .await
        .expect("dequeue");
    let ids: Vec<_> = jobs.iter().map(|j| j.id).collect();
    assert_eq!(ids, [b, a]);
    assert_eq!(ctx.live(c).await.state(ctx.now()), JobState::Pending);
}

/// A batch claim returns at most `limit` distinct jobs.
pub async fn dequeue_returns_at_most_limit_distinct_jobs<S: Storage>(ctx: Ctx<S>) {
    for i in 0..7 {
        ctx.enqueue(NewJob::new("q", json!(i))).await;
    }
    let first = ctx.claim("q", 3).await;
    let second = ctx.claim("q", 3).await;
    let third = ctx.claim("q", 3).await;
    let fourth = ctx.claim("q", 3).await;
    assert_eq!(
        (first.len(), second.len(), third.len(), fourth.len()),
        (3, 3, 1, 0)
    );
    let mut ids: Vec<_> = first
        .iter()
        .chain(&second)
        .chain(&third)
        .map(|j| j.id)
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 7);
}

/// A claim sets the lease, the holder, attempts + 1 and `first_locked_at`.
pub async fn dequeue_sets_lease_worker_attempts_and_first_locked_at<S: Storage>(ctx: Ctx<S>) {
    let id = ctx.enqueue(NewJob::new("q", json!(1))).await;
    ctx.clock.advance(secs(5));
    let claimed = ctx.claim_as("q", 1, "worker-7").await.remove(0);
    let stored = ctx.live(id).await;
    for job in [&claimed, &stored] {
        assert_eq!(job.id, id);
        assert_eq!(job.attempts, 1);
        assert_eq!(job.locked_by, Some(worker("worker-7")));
        assert_eq!(job.lease_until, Some(ctx.now() + TimeDelta::seconds(30)));
        assert_eq!(job.first_locked_at, Some(ctx.now()));
        assert_eq!(job.state(ctx.now()), JobState::Running);
    }
    let lease = claimed.lease().expect("lease");
    assert_eq!((lease.job_id, lease.attempt), (id, 1));
}

/// `first_locked_at` is set on the first claim only.
pub async fn dequeue_keeps_first_locked_at_on_later_claims<S: Storage>(ctx: Ctx<S>) {
    let id = ctx.enqueue(NewJob::new("q", json!(1))).await;
    let first_claim_at = ctx.now();
    ctx.claim_one("q").await;
    ctx.clock.advance(LEASE + secs(1));
    ctx.storage.reclaim_stalled(10).await.expect("reclaim");
    ctx.clock.advance(secs(1));
    let again = ctx.claim_one("q").await;
    assert_eq!(again.id, id);
    assert_eq!(again.attempts, 2);
    assert_eq!(again.first_locked_at, Some(first_claim_at));
    assert_eq!(ctx.live(id).await.first_locked_at, Some(first_claim_at));
}

/// A claim answers each job as the storage holds it after the claim, every
/// field alike: a backend that builds the claimed row itself (rather than
/// reading it back) must agree with its own reads, here for a job that
/// carries a unique key, a priority, an attempt limit and the error of a
/// failed attempt.
pub async fn dequeue_answers_each_job_as_stored<S: Storage>(ctx: Ctx<S>) {
    let id = enqueue_stored_case(&ctx).await;
    fail_once(&ctx).await;
    claimed_as_stored(&ctx, id, 0).await;
}

/// [`dequeue_answers_each_job_as_stored`] for a job snoozed once before
/// its failed attempt: the snooze count is answered as stored too.
pub async fn dequeue_answers_a_snoozed_job_as_stored<S: Storage>(ctx: Ctx<S>) {
    let id = enqueue_stored_case(&ctx).await;
    let first = ctx.claim_one("q").await;
    ctx.storage
        .snooze(&lease_of(&first), secs(1))
        .await
        .expect("snooze");
    ctx.clock.advance(secs(2));
    fail_once(&ctx).await;
    claimed_as_stored(&ctx, id, 1).await;
}

/// The job of the "answers as stored" cases: a payload, a priority, a key
/// and an attempt limit.
async fn enqueue_stored_case<S: Storage>(ctx: &Ctx<S>) -> JobId {
    ctx.enqueue(
        NewJob::new("q", json!({"k": [1, "two"]}))
            .priority(3)
            .unique_key("key-1")
            .max_attempts(4),
    )
    .await
}

/// Claims job `id` again and checks the claim answers it as stored: its
/// second attempt, `snoozes` snoozes, the failed attempt's error.
async fn claimed_as_stored<S: Storage>(ctx: &Ctx<S>, id: JobId, snoozes: u32) {
    let claimed = ctx.claim_as("q", 1, "worker-9").await.remove(0);
    let stored = ctx.live(id).await;
    assert_eq!(claimed, stored);
    assert_eq!((claimed.attempts, claimed.snoozes), (2, snoozes));
    assert_eq!(claimed.last_error, Some(json!({"error": "boom"})));
}

/// Claims queue `q`'s job, fails it with a retry in a second, and moves
/// the clock past that.
async fn fail_once<S: Storage>(ctx: &Ctx<S>) {
    let job = ctx.claim_one("q").await;
    ctx.storage
        .nack(
            &lease_of(&job),
            json!({"error": "boom"}),
            Retry::After(secs(1)),
        )
        .await
        .expect("nack");
    ctx.clock.advance(secs(2));
}

/// A delayed job is not claimed before its time, and is at its time.
pub async fn dequeue_skips_delayed_jobs_until_due<S: Storage>(ctx: Ctx<S>) {
    let id = ctx
        .enqueue(NewJob::new("q", json!(1)).delay(secs(60)))
        .await;
    assert!(ctx.claim("q", 10).await.is_empty());
    ctx.clock.advance(secs(59));
    assert!(ctx.claim("q", 10).await.is_empty());
    ctx.clock.advance(secs(1));
    assert_eq!(ctx.claim_one("q").await.id, id);
}

/// Running and stalled jobs are not claimed again by dequeue.
pub async fn dequeue_skips_running_and_stalled_jobs<S: Storage>(ctx: Ctx<S>) {
    let id = ctx.enqueue(NewJob::new("q", json!(1))).await;
    ctx.claim_one("q").await;
    assert!(ctx.claim_as("q", 10, "w2").await.is_empty(), "running");
    ctx.clock.advance(LEASE);
    assert_eq!(ctx.live(id).await.state(ctx.now()), JobState::Stalled);
    assert!(
        ctx.claim_as("q", 10, "w2").await.is_empty(),
        "stalled waits for reclaim"
    );
}

/// A paused queue yields nothing while other queues still do.
pub async fn dequeue_skips_paused_queues<S: Storage>(ctx: Ctx<S>) {
    ctx.enqueue(NewJob::new("paused", json!(1)).priority(100))
        .await;
    let open = ctx.enqueue(NewJob::new("open", json!(1))).await;
    ctx.storage
        .pause_queue(&queue("paused"))
        .await
        .expect("pause");
    let jobs = ctx
        .storage
        .dequeue(&request(&["paused", "open"], 10, "w1"))
        .await
        .expect("dequeue");
    assert_eq!(jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [open]);
}

/// Across several queues, a limited claim takes the best jobs of all of
/// them, not the oldest ids or the first queue's.
pub async fn dequeue_across_queues_takes_the_best_jobs_first<S: Storage>(ctx: Ctx<S>) {
    let a_low = ctx.enqueue(NewJob::new("a", json!(1)).priority(0)).await;
    let b_high = ctx.enqueue(NewJob::new("b", json!(2)).priority(5)).await;
    let a_top = ctx.enqueue(NewJob::new("a", json!(3)).priority(9)).await;
    let b_lowest = ctx.enqueue(NewJob::new("b", json!(4)).priority(-1)).await;
    let both = request(&["a", "b"], 2, "w1");
    let first: Vec<_> = ctx
        .storage
        .dequeue(&both)
        .await
        .expect("dequeue")
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(first, [a_top, b_high]);
    let rest: Vec<_> = ctx
        .storage
        .dequeue(&both)
        .await
        .expect("dequeue")
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(rest, [a_low, b_lowest]);
}

/// `next_due` is `None` when no job of the queues waits for a future time.
pub async fn next_due_is_none_without_scheduled_jobs<S: Storage>(ctx: Ctx<S>) {
    assert_eq!(next_due(&ctx, &["q"]).await, None, "empty table");
    ctx.enqueue(NewJob::new("q", json!(1))).await;
    ctx.enqueue(NewJob::new("other", json!(2)).delay(secs(30)))
        .await;
    assert_eq!(
        next_due(&ctx, &["q"]).await,
        None,
        "a due job and another queue's scheduled job do not count"
    );
}

/// `next_due` is the time until the earliest scheduled job of the named
/// queues, whatever its priority; leased, due and other queues' jobs do
/// not count.
pub async fn next_due_is_the_time_until_the_earliest_scheduled_job<S: Storage>(ctx: Ctx<S>) {
    ctx.enqueue(NewJob::new("a", json!(1)).priority(5).delay(secs(40)))
        .await;
    ctx.enqueue(NewJob::new("a", json!(2)).priority(-3).delay(secs(25)))
        .await;
    ctx.enqueue(NewJob::new("a", json!(3)).priority(0).delay(secs(60)))
        .await;
    ctx.enqueue(NewJob::new("b", json!(4)).priority(9).delay(secs(20)))
        .await;
    ctx.enqueue(NewJob::new("c", json!(5)).delay(secs(1))).await;
    ctx.enqueue(NewJob::new("a", json!(6)).priority(99)).await;
    assert_eq!(next_due(&ctx, &["a"]).await, Some(secs(25)));
    assert_eq!(next_due(&ctx, &["a", "b"]).await, Some(secs(20)));

    // Ten seconds on, then claimed: a claimed job no longer counts.
    ctx.clock.advance(secs(10));
    assert_eq!(next_due(&ctx, &["a"]).await, Some(secs(15)));
    ctx.clock.advance(secs(15));
    assert_eq!(
        next_due(&ctx, &["a"]).await,
        Some(secs(15)),
        "the 25 s job is due now and no longer counts: the 40 s one is next"
    );
    let claimed = ctx.claim("a", 10).await;
    assert_eq!(claimed.len(), 2, "the immediate job and the one due now");
    ctx.clock.advance(secs(15));
    let held = ctx.claim("a", 1).await;
    assert_eq!(held.len(), 1, "the 40 s job, now due");
    assert_eq!(next_due(&ctx, &["a"]).await, Some(secs(20)));
}

/// A paused queue's scheduled jobs count for `next_due`: a worker that
/// sleeps until then finds the queue resumed or still paused, and polls
/// no sooner.
pub async fn next_due_counts_the_jobs_of_paused_queues<S: Storage>(ctx: Ctx<S>) {
    ctx.enqueue(NewJob::new("b", json!(4)).priority(9).delay(secs(20)))
        .await;
    ctx.storage.pause_queue(&queue("b")).await.expect("pause");
    assert_eq!(next_due(&ctx, &["b"]).await, Some(secs(20)), "paused");
}

async fn next_due<S: Storage>(ctx: &Ctx<S>, queues: &[&str]) -> Option<std::time::Duration> {
    let queues: Vec<_> = queues.iter().map(|q| queue(q)).collect();
    ctx.storage.next_due(&queues).await.expect("next_due")
}

/// A claim with per-queue limits takes at most that many jobs from each
/// queue, the best ones, and returns them in dequeue order across queues.
pub async fn dequeue_takes_at_most_each_queues_limit<S: Storage>(ctx: Ctx<S>) {
    let mut ids = std::collections::HashMap::new();
    for (name, base) in [("a", 0), ("b", 10), ("c", 20)] {
        for i in 0..5 {
            let id = ctx
                .enqueue(NewJob::new(name, json!(i)).priority(base + i))
                .await;
            ids.insert((name, base + i), id);
        }
    }
    let request = queue_core::DequeueRequest::with_queue_limits(
        vec![(queue("c"), 2), (queue("a"), 1), (queue("b"), 3)],
        LEASE,
        worker("w1"),
    )
    .expect("valid request");
    assert_eq!(request.limit(), 6);
    let claimed: Vec<_> = ctx
        .storage
        .dequeue(&request)
        .await
        .expect("dequeue")
        .into_iter()
        .map(|j| j.id)
        .collect();
    let want: Vec<_> = [
        ("c", 24),
        ("c", 23),
        ("b", 14),
        ("b", 13),
        ("b", 12),
        ("a", 4),
    ]
    .iter()
    .map(|k| ids[k])
    .collect();
    assert_eq!(claimed, want);

    // Caps larger than what waits: everything left, best first.
    let request = queue_core::DequeueRequest::with_queue_limits(
        vec![(queue("a"), 50), (queue("c"), 1)],
        LEASE,
        worker("w1"),
    )
    .expect("valid request");
    let claimed = ctx.storage.dequeue(&request).await.expect("dequeue");
    let got: Vec<_> = claimed
        .iter()
        .map(|j| (j.queue.as_str().to_owned(), j.priority))
        .collect();
    assert_eq!(
        got,
        [
            ("c".into(), 22),
            ("a".into(), 3),
            ("a".into(), 2),
            ("a".into(), 1),
            ("a".into(), 0)
        ]
    );
}

/// `next_due` counts a job waiting in backoff after a nack: it is unheld
/// and due later, like any scheduled job.
pub async fn next_due_counts_a_job_in_backoff_after_a_nack<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 3).await;
    assert_eq!(
        next_due(&ctx, &["q"]).await,
        None,
        "a held job does not count"
    );
    ctx.storage
        .nack(
            &super::lease_of(&job),
            json!("later"),
            queue_core::Retry::After(secs(45)),
        )
        .await
        .expect("nack");
    assert_eq!(next_due(&ctx, &["q"]).await, Some(secs(45)));
    ctx.clock.advance(secs(20));
    assert_eq!(next_due(&ctx, &["q"]).await, Some(secs(25)));
}
