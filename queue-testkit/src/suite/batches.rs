//! Batches ([`queue_core::batch`]; joining one needs
//! [`queue_core::Capability::Batches`]): a callback runs once, after every
//! job of its batch has finished however it finished, and reads the
//! counts; jobs join while the batch is open and are refused once it is
//! closed; a join racing the last finish either joins or is refused.

use queue_core::{
    BatchCounts, JobId, JobState, LinkStatus, NewJob, QueueError, Retry, Storage, batch,
};
use serde_json::json;

use super::{Ctx, assert_invalid, lease_of};

fn member(n: i64) -> NewJob {
    NewJob::new("q", json!({ "n": n }))
}

fn callback_job() -> NewJob {
    NewJob::new("done", json!({ "callback": true }))
}

impl<S: Storage> Ctx<S> {
    /// Enqueues `jobs` as a batch; their ids and the callback's.
    async fn enqueue_batch_of(&self, jobs: Vec<NewJob>) -> (Vec<JobId>, JobId) {
        let outcomes = self
            .storage
            .enqueue_batch(batch(jobs, callback_job()))
            .await
            .expect("enqueue the batch");
        let mut ids: Vec<JobId> = outcomes.iter().map(|o| o.id).collect();
        let callback = ids.pop().expect("the callback's outcome");
        (ids, callback)
    }

    /// The batch's counts, as its callback's links show them.
    async fn counts(&self, callback: JobId) -> BatchCounts {
        BatchCounts::of(&self.storage.job_links(callback).await.expect("job_links"))
    }
}

fn waiting() -> LinkStatus {
    LinkStatus::Live(JobState::Waiting)
}

/// A batch of four finishing four ways (completed, dead-lettered,
/// discarded, cancelled): its callback waits until the last one, then is
/// pending, once, and its links count each way once.
pub async fn a_batch_callback_runs_once_after_every_job_finishes_with_the_counts<S: Storage>(
    ctx: Ctx<S>,
) {
    let jobs = vec![
        member(0),
        member(1).max_attempts(1),
        member(2).delay(super::secs(600)),
        member(3).delay(super::secs(600)),
    ];
    let (ids, callback) = ctx.enqueue_batch_of(jobs).await;
    assert_eq!(ctx.link_status(callback).await, waiting());
    let held = ctx.claim("q", 2).await;
    assert_eq!(held.len(), 2);
    let done = held.iter().find(|job| job.id == ids[0]).expect("job 0");
    let failing = held.iter().find(|job| job.id == ids[1]).expect("job 1");
    ctx.storage
        .ack(&lease_of(done), Some(json!("ok")))
        .await
        .expect("ack");
    ctx.storage
        .nack(
            &lease_of(failing),
            json!("boom"),
            Retry::After(super::secs(1)),
        )
        .await
        .expect("nack to the dead letters");
    ctx.storage.discard(ids[2]).await.expect("discard");
    assert_eq!(ctx.link_status(callback).await, waiting());
    assert_eq!(
        ctx.counts(callback).await,
        BatchCounts {
            completed: 1,
            dead_lettered: 1,
            discarded: 1,
            unfinished: 1,
            ..BatchCounts::default()
        }
    );
    ctx.storage.cancel(ids[3]).await.expect("cancel");
    assert_eq!(
        ctx.link_status(callback).await,
        LinkStatus::Live(JobState::Pending),
        "the last finish releases the callback"
    );
    let counts = ctx.counts(callback).await;
    assert_eq!(
        counts,
        BatchCounts {
            completed: 1,
            dead_lettered: 1,
            discarded: 1,
            cancelled: 1,
            ..BatchCounts::default()
        }
    );
    assert_eq!(counts.total(), 4);
    let claimed = ctx.claim("done", 10).await;
    assert_eq!(claimed.len(), 1, "one callback: {claimed:?}");
    assert_eq!(claimed[0].id, callback);
}

/// Jobs join an open batch, also in a batch of their own with a job that
/// does not join; the callback waits for them too. Once the batch has
/// closed (its callback released), a join is refused as a conflict and
/// nothing of its call is written; so is a join of an unknown callback.
/// A batch without jobs, or whose callback's payload is invalid, is a
/// batch like any other enqueue: pending at once, or refused with nothing
/// written.
pub async fn jobs_join_an_open_batch_and_a_closed_batch_refuses_them<S: Storage>(ctx: Ctx<S>) {
    let (ids, callback) = ctx.enqueue_batch_of(vec![member(0)]).await;
    let joined = ctx.enqueue(member(1).joins(callback)).await;
    let more = ctx
        .storage
        .enqueue_batch(vec![member(2).joins(callback), member(3)])
        .await
        .expect("a join in a batch");
    assert_eq!(ctx.counts(callback).await.unfinished, 3);
    for id in [ids[0], joined, more[0].id] {
        let job = ctx.claim_one("q").await;
        assert_eq!(job.id, id, "claims take the batch's jobs in order");
        assert_eq!(ctx.link_status(callback).await, waiting());
        ctx.storage.ack(&lease_of(&job), None).await.expect("ack");
    }
    // Job 3 did not join: the callback is released without it.
    let left = ctx.claim_one("q").await;
    assert_eq!(left.id, more[1].id);
    assert_eq!(
        ctx.link_status(callback).await,
        LinkStatus::Live(JobState::Pending)
    );
    assert_eq!(ctx.counts(callback).await.completed, 3);
    let before = ctx.live_count().await;
    for (what, jobs) in [
        ("a closed batch", vec![member(4), member(5).joins(callback)]),
        (
            "an unknown callback",
            vec![member(6).joins(JobId(callback.get() + 1_000_000))],
        ),
    ] {
        match ctx.storage.enqueue_batch(jobs).await {
            Err(QueueError::Conflict { .. }) => {}
            other => panic!("{what}: expected a conflict, got {other:?}"),
        }
        assert_eq!(ctx.live_count().await, before, "{what}: nothing written");
    }
    let empty = ctx
        .storage
        .enqueue_batch(batch(Vec::new(), callback_job()))
        .await
        .expect("an empty batch");
    assert_eq!(
        ctx.link_status(empty[0].id).await,
        LinkStatus::Live(JobState::Pending)
    );
    // A callback whose payload no backend can store (a NUL character).
    let invalid = batch(
        vec![member(7)],
        NewJob::new("done", json!({ "note": "\u{0}" })),
    );
    assert_invalid(ctx.storage.enqueue_batch(invalid).await, "payload");
    assert_eq!(ctx.live_count().await, before + 1);
}

/// A job joining through one handle while the batch's last job is acked
/// through another, round after round: either the join commits first and
/// the callback waits for the new job, or the batch closed first and the
/// join is refused, nothing written; never a callback released while a
/// joined job is unfinished, nor one left waiting for nothing.
pub async fn a_join_racing_the_last_finish_joins_or_is_refused<S: Storage>(ctx: Ctx<S>) {
    for round in 0..12 {
        let (_, callback) = ctx.enqueue_batch_of(vec![member(round)]).await;
        let held = ctx.claim_one("q").await;
        let (acked, joined) = futures_util::future::join(
            ctx.storage.ack(&lease_of(&held), None),
            ctx.second()
                .enqueue(NewJob::new("late", json!({ "round": round })).joins(callback)),
        )
        .await;
        acked.expect("ack");
        match joined {
            Ok(outcome) => {
                assert_eq!(ctx.link_status(callback).await, waiting(), "round {round}");
                let late = ctx.claim_one("late").await;
                assert_eq!(late.id, outcome.id);
                ctx.storage.ack(&lease_of(&late), None).await.expect("ack");
            }
            Err(QueueError::Conflict { .. }) => {
                assert!(ctx.claim("late", 1).await.is_empty(), "round {round}");
            }
            Err(other) => panic!("round {round}: {other:?}"),
        }
        assert_eq!(
            ctx.link_status(callback).await,
            LinkStatus::Live(JobState::Pending),
            "round {round}"
        );
        let ran = ctx.claim("done", 10).await;
        assert_eq!(ran.len(), 1, "round {round}: one callback");
        ctx.storage
            .ack(&lease_of(&ran[0]), None)
            .await
            .expect("ack");
    }
}

/// For a backend without [`queue_core::Capability::Batches`]: a job
/// joining a batch is refused with `NotSupported`, nothing written.
pub async fn joins_are_refused_without_the_capability<S: Storage>(storage: &S) {
    use queue_core::Capability;
    assert!(
        !storage.capabilities().supports(Capability::Batches),
        "the storage declares batches: run the suite's cases instead"
    );
    let joining = vec![NewJob::new("q", json!(0)), member(1).joins(JobId(1))];
    match storage.enqueue_batch(joining).await {
        Err(QueueError::NotSupported {
            capability: Some(Capability::Batches),
            ..
        }) => {}
        other => panic!("expected NotSupported (batches), got {other:?}"),
    }
    let stats = storage.stats().await.expect("stats");
    assert!(stats.iter().all(|s| s.pending == 0), "{stats:?}");
}
