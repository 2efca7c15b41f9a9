//! Operator actions on what a filter selects: run now, discard, retry dead
//! letters; bounded per call, and repeated until they report 0.

use queue_core::{
    FinalStatus, HistoryFilter, JobFilter, JobState, NewJob, Retry, Storage, UniqueKey,
};
use serde_json::json;

use super::{Ctx, assert_lease_lost, lease_of, queue, secs};

/// The filter selecting `limit` jobs of queue `q`.
fn in_queue(q: &str, limit: u32) -> JobFilter {
    JobFilter {
        queue: Some(queue(q)),
        limit,
        ..JobFilter::default()
    }
}

/// Run-now makes scheduled jobs (delayed or backing off) pending now,
/// highest ids first, and leaves every other state alone.
pub async fn run_now_makes_scheduled_jobs_pending_and_leaves_others<S: Storage>(ctx: Ctx<S>) {
    let delayed = ctx
        .enqueue(NewJob::new("q", json!(1)).delay(secs(60)))
        .await;
    let later = ctx
        .enqueue(NewJob::new("q", json!(2)).delay(secs(120)))
        .await;
    let pending = ctx.enqueue(NewJob::new("q", json!(3))).await;
    let running = ctx.claim_one("q").await;
    assert_eq!(running.id, pending);
    let failed = ctx.enqueue_and_claim("q", 3).await;
    ctx.storage
        .nack(&lease_of(&failed), json!("e"), Retry::After(secs(600)))
        .await
        .expect("nack");
    let waiting = ctx.enqueue(NewJob::new("q", json!(4))).await;
    ctx.clock.advance(secs(1));

    assert_eq!(
        ctx.storage
            .run_now(&in_queue("q", 2))
            .await
            .expect("run_now"),
        2
    );
    for id in [failed.id, later] {
        let job = ctx.live(id).await;
        assert_eq!(job.state(ctx.now()), JobState::Pending, "{id} runs now");
        assert_eq!(job.available_at, ctx.now());
    }
    assert_eq!(ctx.live(failed.id).await.attempts, 1, "attempts stay");
    assert_eq!(
        ctx.live(delayed).await.state(ctx.now()),
        JobState::Scheduled
    );
    assert_eq!(
        ctx.storage
            .run_now(&in_queue("q", 2))
            .await
            .expect("run_now"),
        1
    );
    assert_eq!(
        ctx.storage
            .run_now(&in_queue("q", 2))
            .await
            .expect("run_now"),
        0
    );

    let still = ctx.live(running.id).await;
    assert_eq!(
        still.lease_until, running.lease_until,
        "a running job keeps its lease"
    );
    let untouched = ctx.live(waiting).await;
    assert!(
        untouched.available_at < ctx.now(),
        "a pending job keeps its time"
    );
    assert_eq!(
        ctx.storage
            .run_now(&JobFilter::id(running.id))
            .await
            .expect("run_now"),
        0
    );
    let claimed: Vec<_> = ctx.claim("q", 10).await.iter().map(|j| j.id).collect();
    assert_eq!(
        claimed.len(),
        4,
        "all but the running job are claimable: {claimed:?}"
    );
}

/// Bulk discard archives what the filter selects, `limit` per call.
pub async fn discard_jobs_archives_what_the_filter_selects_in_batches<S: Storage>(ctx: Ctx<S>) {
    let running = ctx.enqueue_and_claim("q1", 3).await;
    let mut ids = vec![running.id];
    for i in 0..4 {
        ids.push(
            ctx.enqueue(NewJob::new("q1", json!(i)).delay(secs(i * 10)))
                .await,
        );
    }
    let other = ctx.enqueue(NewJob::new("q2", json!({}))).await;

    let mut counts = Vec::new();
    loop {
        let n = ctx
            .storage
            .discard_jobs(&in_queue("q1", 2))
            .await
            .expect("discard_jobs");
        counts.push(n);
        if n == 0 {
            break;
        }
    }
    assert_eq!(counts, vec![2, 2, 1, 0]);
    for id in &ids {
        assert_eq!(ctx.archived(*id).await.status, FinalStatus::Discarded);
    }
    assert_lease_lost(ctx.storage.ack(&lease_of(&running), None).await);
    ctx.live(other).await;
}

/// Bulk retry moves dead letters of the queue back, `limit` per call.
pub async fn retry_dead_letters_moves_dead_letters_in_batches<S: Storage>(ctx: Ctx<S>) {
    let mut dead = Vec::new();
    for q in ["q1", "q1", "q1", "q2"] {
        let job = ctx.enqueue_and_claim(q, 1).await;
        ctx.storage
            .nack(&lease_of(&job), json!("fatal"), Retry::Never)
            .await
            .expect("nack");
        dead.push(job.id);
    }
    let completed = ctx.enqueue_and_claim("q1", 1).await;
    ctx.storage
        .ack(&lease_of(&completed), None)
        .await
        .expect("ack");
    ctx.clock.advance(secs(5));

    let q1 = HistoryFilter {
        queue: Some(queue("q1")),
        limit: 2,
        ..HistoryFilter::default()
    };
    let mut counts = Vec::new();
    for _ in 0..3 {
        counts.push(ctx.storage.retry_dead_letters(&q1).await.expect("retry"));
    }
    assert_eq!(counts, vec![2, 1, 0]);
    for id in &dead[..3] {
        let job = ctx.live(*id).await;
        assert_eq!((job.attempts, job.available_at), (0, ctx.now()));
        assert_eq!(job.last_error, Some(json!("fatal")));
    }
    assert_eq!(ctx.archived(dead[3]).await.status, FinalStatus::DeadLetter);
    assert_eq!(
        ctx.archived(completed.id).await.status,
        FinalStatus::Completed
    );
}

/// A dead letter whose unique key is live again is skipped, not an error.
pub async fn retry_dead_letters_skips_those_whose_key_is_live<S: Storage>(ctx: Ctx<S>) {
    let keyed = ctx
        .enqueue(NewJob::new("q", json!(1)).unique_key("k").max_attempts(1))
        .await;
    let plain = ctx
        .enqueue(NewJob::new("q", json!(2)).max_attempts(1))
        .await;
    for job in ctx.claim("q", 2).await {
        ctx.storage
            .nack(&lease_of(&job), json!("fatal"), Retry::Never)
            .await
            .expect("nack");
    }
    let taken = ctx
        .enqueue(NewJob::new("q", json!(3)).unique_key("k"))
        .await;

    let all = HistoryFilter {
        limit: 10,
        ..HistoryFilter::default()
    };
    assert_eq!(
        ctx.storage.retry_dead_letters(&all).await.expect("retry"),
        1
    );
    assert_eq!(
        ctx.storage.retry_dead_letters(&all).await.expect("retry"),
        0
    );
    ctx.live(plain).await;
    assert_eq!(ctx.archived(keyed).await.status, FinalStatus::DeadLetter);
    assert_eq!(ctx.live(taken).await.payload, json!(3));
}

/// Two dead letters of one unique key: one call moves the newer (highest
/// ids first) and skips the older, whose key it made live, then moves
/// the next dead letter in its place, up to its limit.
pub async fn retry_dead_letters_moves_one_of_two_with_one_key<S: Storage>(ctx: Ctx<S>) {
    let dead = |job: NewJob| async {
        let id = ctx.enqueue(job.max_attempts(1)).await;
        let claimed = ctx.claim("q", 1).await;
        ctx.storage
            .nack(&lease_of(&claimed[0]), json!("fatal"), Retry::Never)
            .await
            .expect("nack");
        id
    };
    let plain = dead(NewJob::new("q", json!(0))).await;
    let older = dead(NewJob::new("q", json!(1)).unique_key("k")).await;
    let newer = dead(NewJob::new("q", json!(2)).unique_key("k")).await;
    let two = HistoryFilter {
        limit: 2,
        ..HistoryFilter::default()
    };
    assert_eq!(
        ctx.storage.retry_dead_letters(&two).await.expect("retry"),
        2,
        "the newer keyed one and the plain one"
    );
    assert_eq!(ctx.live(newer).await.payload, json!(2));
    ctx.live(plain).await;
    assert_eq!(ctx.archived(older).await.status, FinalStatus::DeadLetter);
    assert_eq!(
        ctx.storage.retry_dead_letters(&two).await.expect("retry"),
        0
    );
}

/// Run-now honours every part of its filter: queue, unique key, state and
/// id each narrow what moves, in a storage holding jobs of two queues.
pub async fn run_now_moves_only_what_every_part_of_its_filter_selects<S: Storage>(ctx: Ctx<S>) {
    let delayed = |q: &str, key: &str| NewJob::new(q, json!(key)).unique_key(key).delay(secs(60));
    let a1 = ctx.enqueue(delayed("a", "k1")).await;
    let a2 = ctx.enqueue(delayed("a", "k2")).await;
    let b1 = ctx.enqueue(delayed("b", "k1")).await;
    let run_now = |filter: JobFilter| {
        let storage = &ctx.storage;
        async move { storage.run_now(&filter).await.expect("run_now") }
    };
    let key = |k: &str| Some(UniqueKey::new(k).expect("valid key"));
    let moved = run_now(JobFilter {
        queue: Some(queue("b")),
        unique_key: key("k2"),
        ..JobFilter::default()
    })
    .await;
    assert_eq!(moved, 0, "k2 lives in queue a only");
    let moved = run_now(JobFilter {
        queue: Some(queue("b")),
        state: Some(JobState::Pending),
        ..JobFilter::default()
    })
    .await;
    assert_eq!(moved, 0, "no pending job is scheduled");
    let moved = run_now(JobFilter {
        queue: Some(queue("a")),
        unique_key: key("k1"),
        ..JobFilter::default()
    })
    .await;
    assert_eq!(moved, 1, "a1 only");
    assert_eq!(run_now(JobFilter::id(b1)).await, 1, "b1 by id");
    let now = ctx.now();
    let mut states = Vec::new();
    for id in [a1, a2, b1] {
        states.push(ctx.live(id).await.state(now));
    }
    assert_eq!(
        states,
        [JobState::Pending, JobState::Scheduled, JobState::Pending]
    );
}
