//! Cancel by id: the job leaves for history as `cancelled`, and whoever
//! runs it loses its lease and is told.

use std::time::Duration;

use futures_util::StreamExt;
use queue_core::{Capability, FinalStatus, JobId, NewJob, QueueError, Retry, Storage, Wakeup};
use serde_json::json;

use super::{Ctx, assert_lease_lost, lease_of, secs};

/// A pending or scheduled job goes to history as `cancelled`, and its key
/// is free again.
pub async fn cancel_moves_a_waiting_job_to_history_as_cancelled<S: Storage>(ctx: Ctx<S>) {
    let pending = ctx
        .enqueue(NewJob::new("q", json!(1)).unique_key("k"))
        .await;
    let scheduled = ctx
        .enqueue(NewJob::new("q", json!(2)).delay(secs(60)))
        .await;
    for id in [pending, scheduled] {
        ctx.storage.cancel(id).await.expect("cancel");
        let record = ctx.archived(id).await;
        assert_eq!(record.status, FinalStatus::Cancelled);
        assert_eq!(record.finished_at, ctx.now());
        assert!(ctx.storage.get_job(id).await.expect("get_job").is_none());
    }
    ctx.enqueue(NewJob::new("q", json!(3)).unique_key("k"))
        .await;
}

/// A running job's holder can no longer ack, nack, snooze or heartbeat it.
pub async fn cancel_of_a_running_job_makes_its_lease_lost<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 3).await;
    let lease = lease_of(&job);
    ctx.storage.cancel(job.id).await.expect("cancel");
    assert_eq!(ctx.archived(job.id).await.status, FinalStatus::Cancelled);
    assert_lease_lost(ctx.storage.ack(&lease, None).await);
    assert_lease_lost(
        ctx.storage
            .nack(&lease, json!("late"), Retry::After(secs(1)))
            .await,
    );
    assert_lease_lost(ctx.storage.snooze(&lease, secs(1)).await);
    assert!(
        !ctx.storage
            .heartbeat(&lease, secs(30))
            .await
            .expect("heartbeat")
    );
    assert_eq!(ctx.archived(job.id).await.status, FinalStatus::Cancelled);
}

/// An id that is not live, never was or has finished, is not found.
pub async fn cancel_of_a_job_that_is_not_live_is_not_found<S: Storage>(ctx: Ctx<S>) {
    let not_found = |result: queue_core::Result<()>| {
        assert!(
            matches!(result, Err(QueueError::NotFound { .. })),
            "expected NotFound, got {result:?}"
        );
    };
    not_found(ctx.storage.cancel(JobId(987_654)).await);
    let job = ctx.enqueue_and_claim("q", 1).await;
    ctx.storage.ack(&lease_of(&job), None).await.expect("ack");
    not_found(ctx.storage.cancel(job.id).await);
    assert_eq!(ctx.archived(job.id).await.status, FinalStatus::Completed);
}

/// A cancelled job's runner hears of it: a storage that declares wake-ups
/// ([`Capability::Wakeups`]) tells its subscribers the job's id
/// (`Wakeup::Cancelled`); one without tells the runner at its next
/// heartbeat, which must then fail. The case checks whichever applies,
/// never nothing.
pub async fn cancel_wakes_subscribers_with_the_job_id<S: Storage>(ctx: Ctx<S>) {
    let subscription = if ctx.storage.capabilities().supports(Capability::Wakeups) {
        let stream = ctx.storage.subscribe().await.expect("subscribe");
        assert!(
            stream.is_some(),
            "the storage declares wake-ups, but subscribe answered None"
        );
        stream
    } else {
        None
    };
    let job = ctx.enqueue_and_claim("q", 1).await;
    let Some(mut wakeups) = subscription else {
        eprintln!("no wake-ups: the runner learns of the cancel at its heartbeat");
        ctx.storage.cancel(job.id).await.expect("cancel");
        let alive = ctx
            .storage
            .heartbeat(&lease_of(&job), secs(30))
            .await
            .expect("heartbeat");
        assert!(
            !alive,
            "a storage without wake-ups must fail the heartbeat of a cancelled job"
        );
        return;
    };
    ctx.storage.cancel(job.id).await.expect("cancel");
    let heard = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(wakeup) = wakeups.next().await {
            if let Ok(Wakeup::Cancelled(id)) = wakeup {
                return Some(id);
            }
        }
        None
    })
    .await;
    assert_eq!(heard, Ok(Some(job.id)), "no Wakeup::Cancelled within 10 s");
}
