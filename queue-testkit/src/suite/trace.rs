//! Trace context: the enqueuer's W3C traceparent and tracestate travel with
//! the job through every place a job is read.

use queue_core::{JobFilter, JobId, NewJob, Retry, Storage, TraceContext};
use serde_json::json;

use super::{Ctx, lease_of, secs};

/// The context a job carries in these cases.
fn context(span: &str, state: Option<&str>) -> TraceContext {
    TraceContext::new(
        format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{span}-01"),
        state,
    )
    .expect("valid trace context")
}

/// The trace context set on a job reads back equal (or `None` when unset)
/// from `get_job`, `list_jobs`, `dequeue`, `get_history`, `list_history`,
/// after a retry and after `retry_dead_letter`, whether it was enqueued
/// alone or in a batch.
pub async fn trace_context_round_trips_through_enqueue_claim_and_history<S: Storage>(ctx: Ctx<S>) {
    let with_state = context("00f067aa0ba902b7", Some("vendor=a1b2,other=x y"));
    let bare = context("b7ad6b7169203331", None);
    let alone = ctx
        .enqueue(NewJob::new("t", json!(1)).trace_context(with_state.clone()))
        .await;
    let batch = ctx
        .storage
        .enqueue_batch(vec![
            NewJob::new("t", json!(2)).trace_context(bare.clone()),
            NewJob::new("t", json!(3)),
        ])
        .await
        .expect("enqueue_batch");
    let (in_batch, untraced) = (batch[0].id, batch[1].id);
    let expected = |id: JobId| {
        if id == alone {
            Some(with_state.clone())
        } else if id == in_batch {
            Some(bare.clone())
        } else {
            None
        }
    };

    for id in [alone, in_batch, untraced] {
        assert_eq!(
            ctx.live(id).await.trace_context,
            expected(id),
            "get_job {id}"
        );
    }
    let listed = ctx
        .storage
        .list_jobs(&JobFilter::default())
        .await
        .expect("list_jobs");
    assert_eq!(listed.jobs.len(), 3);
    for job in &listed.jobs {
        assert_eq!(job.trace_context, expected(job.id), "list_jobs {}", job.id);
    }

    let claimed = ctx.claim("t", 3).await;
    assert_eq!(claimed.len(), 3);
    for job in &claimed {
        assert_eq!(job.trace_context, expected(job.id), "dequeue {}", job.id);
    }
    for job in &claimed {
        if job.id == alone {
            ctx.storage
                .nack(&lease_of(job), json!("again"), Retry::After(secs(0)))
                .await
                .expect("nack");
        } else if job.id == in_batch {
            ctx.storage
                .nack(&lease_of(job), json!("dead"), Retry::Never)
                .await
                .expect("nack");
        } else {
            ctx.storage.ack(&lease_of(job), None).await.expect("ack");
        }
    }

    // A retried job keeps it, and so does its next claim.
    assert_eq!(ctx.live(alone).await.trace_context, expected(alone));
    let again = ctx.claim_one("t").await;
    assert_eq!(again.id, alone);
    assert_eq!(
        again.trace_context,
        expected(alone),
        "dequeue after a retry"
    );
    ctx.storage
        .ack(&lease_of(&again), Some(json!("done")))
        .await
        .expect("ack");

    for id in [alone, in_batch, untraced] {
        assert_eq!(
            ctx.archived(id).await.trace_context,
            expected(id),
            "get_history {id}"
        );
    }
    for record in ctx.all_history().await {
        assert_eq!(
            record.trace_context,
            expected(record.id),
            "list_history {}",
            record.id
        );
    }

    // A dead letter sent back keeps it too.
    ctx.storage
        .retry_dead_letter(in_batch)
        .await
        .expect("retry_dead_letter");
    assert_eq!(ctx.live(in_batch).await.trace_context, expected(in_batch));
    let revived = ctx.claim_one("t").await;
    assert_eq!(
        revived.trace_context,
        expected(in_batch),
        "dequeue after retry_dead_letter"
    );
}
