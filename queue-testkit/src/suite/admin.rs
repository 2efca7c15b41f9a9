//! Operator actions: discard, retry a dead letter, prune, pause and resume.

use queue_core::{FinalStatus, JobState, NewJob, PruneRequest, QueueError, Retry, Storage};
use serde_json::json;

use super::{Ctx, assert_invalid, assert_lease_lost, lease_of, queue, request, secs};

/// Discard archives a live job as `discarded` with nobody as its processor.
pub async fn discard_archives_a_live_job_as_discarded<S: Storage>(ctx: Ctx<S>) {
    let id = ctx
        .enqueue(NewJob::new("q", json!({"p": 1})).delay(secs(60)))
        .await;
    ctx.clock.advance(secs(1));
    ctx.storage.discard(id).await.expect("discard");
    assert_eq!(ctx.storage.get_job(id).await.expect("get_job"), None);
    let record = ctx.archived(id).await;
    assert_eq!(record.status, FinalStatus::Discarded);
    assert_eq!(record.payload, json!({"p": 1}));
    assert_eq!((record.processed_by, record.started_at), (None, None));
    assert_eq!(record.finished_at, ctx.now());
}

/// Discarding a running job revokes its holder's lease.
pub async fn discard_of_a_running_job_revokes_its_lease<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 3).await;
    ctx.storage.discard(job.id).await.expect("discard");
    assert_lease_lost(ctx.storage.ack(&lease_of(&job), None).await);
    assert_lease_lost(
        ctx.storage
            .nack(&lease_of(&job), json!("e"), Retry::Never)
            .await,
    );
    assert!(
        !ctx.storage
            .heartbeat(&lease_of(&job), secs(5))
            .await
            .expect("heartbeat")
    );
    let record = ctx.archived(job.id).await;
    assert_eq!(record.status, FinalStatus::Discarded);
    assert_eq!(record.started_at, job.first_locked_at);
}

/// Discarding an unknown or finished job is `NotFound`.
pub async fn discard_of_an_unknown_job_is_not_found<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 3).await;
    ctx.storage.ack(&lease_of(&job), None).await.expect("ack");
    let err = ctx.storage.discard(job.id).await.expect_err("finished");
    assert!(matches!(err, QueueError::NotFound { .. }), "{err:?}");
    let record = ctx.archived(job.id).await;
    assert_eq!(record.status, FinalStatus::Completed, "history untouched");
    let never = queue_core::JobId(job.id.get() + 1_000_000);
    let err = ctx
        .storage
        .discard(never)
        .await
        .expect_err("never enqueued");
    assert!(matches!(err, QueueError::NotFound { .. }), "{err:?}");
    assert_eq!(ctx.storage.get_job(never).await.expect("get_job"), None);
    assert_eq!(
        ctx.storage.get_history(never).await.expect("get_history"),
        None,
        "no history row made up"
    );
}

/// Retrying a dead letter puts it back, same id, pending, attempts 0.
pub async fn retry_dead_letter_requeues_it_under_its_id<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 1).await;
    ctx.storage
        .nack(&lease_of(&job), json!("fatal"), Retry::After(secs(1)))
        .await
        .expect("nack");
    ctx.clock.advance(secs(60));
    ctx.storage.retry_dead_letter(job.id).await.expect("retry");
    assert_eq!(
        ctx.storage.get_history(job.id).await.expect("get_history"),
        None
    );
    let live = ctx.live(job.id).await;
    assert_eq!(live.attempts, 0);
    assert_eq!(live.available_at, ctx.now());
    assert_eq!(live.state(ctx.now()), JobState::Pending);
    assert_eq!(
        live.last_error,
        Some(json!("fatal")),
        "the cause stays visible"
    );
    assert_eq!(live.first_locked_at, None);
    let again = ctx.claim_one("q").await;
    assert_eq!((again.id, again.attempts), (job.id, 1));
    ctx.storage.ack(&lease_of(&again), None).await.expect("ack");
    assert_eq!(ctx.archived(job.id).await.status, FinalStatus::Completed);
}

/// Only dead letters can be retried.
pub async fn retry_of_what_is_not_a_dead_letter_is_not_found<S: Storage>(ctx: Ctx<S>) {
    let done = ctx.enqueue_and_claim("q", 3).await;
    ctx.storage.ack(&lease_of(&done), None).await.expect("ack");
    let live = ctx.enqueue(NewJob::new("q", json!(1))).await;
    for id in [done.id, live, queue_core::JobId(live.get() + 1_000_000)] {
        let err = ctx
            .storage
            .retry_dead_letter(id)
            .await
            .expect_err("not a dead letter");
        assert!(matches!(err, QueueError::NotFound { .. }), "{id}: {err:?}");
    }
    assert_eq!(ctx.archived(done.id).await.status, FinalStatus::Completed);
}

/// A dead letter whose unique key is live again cannot be retried.
pub async fn retry_dead_letter_whose_key_is_live_is_a_conflict<S: Storage>(ctx: Ctx<S>) {
    ctx.enqueue(NewJob::new("q", json!(1)).unique_key("k").max_attempts(1))
        .await;
    let job = ctx.claim_one("q").await;
    ctx.storage
        .nack(&lease_of(&job), json!("x"), Retry::Never)
        .await
        .expect("nack");
    let replacement = ctx
        .enqueue(NewJob::new("q", json!(2)).unique_key("k"))
        .await;
    let err = ctx
        .storage
        .retry_dead_letter(job.id)
        .await
        .expect_err("key taken");
    assert!(matches!(err, QueueError::Conflict { .. }), "{err:?}");
    assert_eq!(ctx.archived(job.id).await.status, FinalStatus::DeadLetter);
    assert_eq!(ctx.live(replacement).await.payload, json!(2));
}

/// Prune deletes rows finished before now - retention, and only those.
pub async fn prune_deletes_only_history_older_than_retention<S: Storage>(ctx: Ctx<S>) {
    let old = ctx.finish("q", false).await;
    ctx.clock.advance(secs(100));
    let edge = ctx.finish("q", false).await;
    ctx.clock.advance(secs(50));
    let young = ctx.finish("q", true).await;
    ctx.clock.advance(secs(50));
    let request = PruneRequest {
        older_than: secs(100),
        status: None,
        limit: 100,
    };
    assert_eq!(ctx.storage.prune_history(&request).await.expect("prune"), 1);
    assert!(ctx.storage.get_history(old).await.expect("get").is_none());
    assert!(
        ctx.storage.get_history(edge).await.expect("get").is_some(),
        "exactly at the cutoff stays"
    );
    assert!(ctx.storage.get_history(young).await.expect("get").is_some());
    assert_invalid(
        ctx.storage
            .prune_history(&PruneRequest {
                limit: 0,
                ..request
            })
            .await,
        "limit",
    );
}

/// Prune honours the status filter and deletes at most `limit`, oldest first.
pub async fn prune_respects_status_and_limit<S: Storage>(ctx: Ctx<S>) {
    let mut completed = Vec::new();
    let mut dead = Vec::new();
    for i in 0..6 {
        let id = ctx.finish("q", i % 2 == 1).await;
        if i % 2 == 1 {
            dead.push(id)
        } else {
            completed.push(id)
        }
        ctx.clock.advance(secs(1));
    }
    ctx.clock.advance(secs(3600));
    let only_dead = PruneRequest {
        older_than: secs(60),
        status: Some(FinalStatus::DeadLetter),
        limit: 2,
    };
    assert_eq!(
        ctx.storage.prune_history(&only_dead).await.expect("prune"),
        2
    );
    assert!(
        ctx.storage
            .get_history(dead[0])
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        ctx.storage
            .get_history(dead[1])
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        ctx.storage
            .get_history(dead[2])
            .await
            .expect("get")
            .is_some()
    );
    for id in &completed {
        assert!(ctx.storage.get_history(*id).await.expect("get").is_some());
    }
    let all = PruneRequest {
        status: None,
        limit: 100,
        ..only_dead
    };
    assert_eq!(ctx.storage.prune_history(&all).await.expect("prune"), 4);
    assert!(ctx.all_history().await.is_empty());
}

/// A paused queue yields nothing; its jobs keep their state and can still
/// be enqueued, acked and nacked; after resume they are claimed.
pub async fn pause_stops_claims_and_keeps_jobs_intact<S: Storage>(ctx: Ctx<S>) {
    let running = ctx.enqueue_and_claim("q", 3).await;
    let failing = ctx.enqueue_and_claim("q", 3).await;
    let waiting = ctx.enqueue(NewJob::new("q", json!("w"))).await;
    ctx.storage.pause_queue(&queue("q")).await.expect("pause");
    let added = ctx
        .enqueue(NewJob::new("q", json!("added while paused")))
        .await;
    assert!(ctx.claim("q", 10).await.is_empty());
    ctx.clock.advance(secs(10));
    assert!(ctx.claim("q", 10).await.is_empty());
    ctx.storage
        .ack(&lease_of(&running), None)
        .await
        .expect("ack while paused");
    ctx.storage
        .nack(&lease_of(&failing), json!("e"), Retry::After(secs(0)))
        .await
        .expect("nack while paused");
    let before = ctx.live(waiting).await;
    assert_eq!(before.attempts, 0);
    ctx.storage.resume_queue(&queue("q")).await.expect("resume");
    let ids: Vec<_> = ctx.claim("q", 10).await.into_iter().map(|j| j.id).collect();
    assert_eq!(ids.len(), 3);
    for id in [failing.id, waiting, added] {
        assert!(ids.contains(&id), "{id} claimed after resume");
    }
    assert!(
        ctx.storage
            .get_history(running.id)
            .await
            .expect("get")
            .is_some()
    );
}

/// Pausing twice is pausing once; resuming an unpaused queue does nothing.
pub async fn pause_and_resume_are_idempotent<S: Storage>(ctx: Ctx<S>) {
    ctx.enqueue(NewJob::new("q", json!(1))).await;
    ctx.storage
        .resume_queue(&queue("q"))
        .await
        .expect("resume unpaused");
    ctx.storage.pause_queue(&queue("q")).await.expect("pause");
    ctx.storage
        .pause_queue(&queue("q"))
        .await
        .expect("pause again");
    assert!(
        ctx.storage
            .dequeue(&request(&["q"], 1, "w1"))
            .await
            .expect("dequeue")
            .is_empty()
    );
    let stats = ctx.storage.stats().await.expect("stats");
    assert!(stats[0].paused);
    ctx.storage.resume_queue(&queue("q")).await.expect("resume");
    ctx.storage
        .resume_queue(&queue("q"))
        .await
        .expect("resume again");
    assert_eq!(ctx.claim("q", 1).await.len(), 1);
}
