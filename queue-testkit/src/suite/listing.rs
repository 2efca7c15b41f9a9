//! What operators read: live jobs by filter, and the throughput series.

use queue_core::{
    FinalStatus, JobFilter, JobId, JobState, NewJob, Retry, Storage, Throughput, UniqueKey,
    minute_of,
};
use serde_json::json;

use super::{Ctx, assert_invalid, lease_of, queue, secs};

/// The ids of one `list_jobs` page.
async fn listed<S: Storage>(ctx: &Ctx<S>, filter: JobFilter) -> Vec<JobId> {
    let page = ctx.storage.list_jobs(&filter).await.expect("list_jobs");
    page.jobs.iter().map(|job| job.id).collect()
}

/// Every filter of `list_jobs` holds, `state` as derived at now.
pub async fn list_jobs_filters_by_queue_state_id_and_key<S: Storage>(ctx: Ctx<S>) {
    let pending = ctx.enqueue(NewJob::new("q1", json!(1))).await;
    let scheduled = ctx
        .enqueue(
            NewJob::new("q1", json!(2))
                .delay(secs(3600))
                .unique_key("k"),
        )
        .await;
    let other_queue = ctx.enqueue(NewJob::new("q2", json!(3))).await;
    let running = ctx.enqueue(NewJob::new("q1", json!(4)).priority(9)).await;
    assert_eq!(ctx.claim_one("q1").await.id, running);

    let by = |f: JobFilter| listed(&ctx, f);
    let q1 = Some(queue("q1"));
    assert_eq!(
        by(JobFilter {
            queue: q1.clone(),
            ..JobFilter::default()
        })
        .await,
        vec![running, scheduled, pending],
        "newest first"
    );
    let in_state = |state| JobFilter {
        state: Some(state),
        ..JobFilter::default()
    };
    assert_eq!(
        by(in_state(JobState::Pending)).await,
        vec![other_queue, pending]
    );
    assert_eq!(by(in_state(JobState::Scheduled)).await, vec![scheduled]);
    assert_eq!(by(in_state(JobState::Running)).await, vec![running]);
    assert_eq!(by(JobFilter::id(other_queue)).await, vec![other_queue]);
    let key = JobFilter {
        unique_key: Some(UniqueKey::new("k").expect("valid key")),
        ..JobFilter::default()
    };
    assert_eq!(by(key).await, vec![scheduled]);
    let nothing = JobFilter {
        queue: Some(queue("q2")),
        state: Some(JobState::Scheduled),
        ..JobFilter::default()
    };
    assert_eq!(by(nothing).await, Vec::<JobId>::new());

    // Past its lease (the suite's is 30 s) the running job is stalled.
    ctx.clock.advance(secs(31));
    assert_eq!(by(in_state(JobState::Stalled)).await, vec![running]);
    assert_eq!(by(in_state(JobState::Running)).await, Vec::<JobId>::new());
}

/// Pages run newest first, cut by `before`; `next` only while more follow.
pub async fn list_jobs_pages_by_keyset_newest_first<S: Storage>(ctx: Ctx<S>) {
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(ctx.enqueue(NewJob::new("q", json!(i))).await);
    }
    let page = |before| JobFilter {
        before,
        limit: 2,
        ..JobFilter::default()
    };
    let first = ctx.storage.list_jobs(&page(None)).await.expect("page 1");
    let first_ids: Vec<JobId> = first.jobs.iter().map(|j| j.id).collect();
    assert_eq!(first_ids, vec![ids[4], ids[3]]);
    assert_eq!(first.next, Some(ids[3]));
    let second = ctx
        .storage
        .list_jobs(&page(first.next))
        .await
        .expect("page 2");
    let second_ids: Vec<JobId> = second.jobs.iter().map(|j| j.id).collect();
    assert_eq!(second_ids, vec![ids[2], ids[1]]);
    let last = ctx
        .storage
        .list_jobs(&page(second.next))
        .await
        .expect("page 3");
    let last_ids: Vec<JobId> = last.jobs.iter().map(|j| j.id).collect();
    assert_eq!((last_ids, last.next), (vec![ids[0]], None));
    assert_eq!(last.jobs[0].payload, json!(0), "whole jobs are returned");
}

/// A limit of 0 or above the page size is rejected, for listings and bulk
/// actions alike, and changes nothing.
pub async fn list_jobs_and_bulk_actions_with_invalid_limit_are_rejected<S: Storage>(ctx: Ctx<S>) {
    let id = ctx
        .enqueue(NewJob::new("q", json!(1)).delay(secs(60)))
        .await;
    for limit in [0, queue_core::MAX_PAGE_SIZE + 1] {
        let filter = JobFilter {
            limit,
            ..JobFilter::default()
        };
        assert_invalid(ctx.storage.list_jobs(&filter).await, "limit");
        assert_invalid(ctx.storage.run_now(&filter).await, "limit");
        assert_invalid(ctx.storage.discard_jobs(&filter).await, "limit");
        let history = queue_core::HistoryFilter {
            limit,
            ..Default::default()
        };
        assert_invalid(ctx.storage.retry_dead_letters(&history).await, "limit");
    }
    assert_eq!(ctx.live(id).await.state(ctx.now()), JobState::Scheduled);
}

/// Completed and dead-lettered jobs are counted per queue and minute of
/// their finish, within `(now - window, now]`; discarded ones are not.
pub async fn throughput_counts_completed_and_failed_per_queue_and_minute<S: Storage>(ctx: Ctx<S>) {
    let first_minute = minute_of(ctx.now());
    let job = ctx.enqueue_and_claim("q1", 3).await;
    ctx.storage.ack(&lease_of(&job), None).await.expect("ack");

    ctx.clock.advance(secs(60));
    let second_minute = minute_of(ctx.now());
    let job = ctx.enqueue_and_claim("q1", 3).await;
    ctx.storage.ack(&lease_of(&job), None).await.expect("ack");
    let job = ctx.enqueue_and_claim("q1", 3).await;
    ctx.storage
        .nack(&lease_of(&job), json!("fatal"), Retry::Never)
        .await
        .expect("nack");
    let job = ctx.enqueue_and_claim("q2", 3).await;
    ctx.storage.ack(&lease_of(&job), None).await.expect("ack");
    let discarded = ctx.enqueue(NewJob::new("q1", json!({}))).await;
    ctx.storage.discard(discarded).await.expect("discard");

    let point = |q: &str, minute, completed, failed| Throughput {
        queue: queue(q),
        minute,
        completed,
        failed,
    };
    let hour = ctx
        .storage
        .throughput(secs(3600))
        .await
        .expect("throughput");
    assert_eq!(
        hour,
        vec![
            point("q1", first_minute, 1, 0),
            point("q1", second_minute, 1, 1),
            point("q2", second_minute, 1, 0),
        ]
    );
    // The first job finished exactly one window ago: outside it.
    let minute = ctx.storage.throughput(secs(60)).await.expect("throughput");
    assert_eq!(
        minute,
        vec![
            point("q1", second_minute, 1, 1),
            point("q2", second_minute, 1, 0)
        ]
    );
    assert_eq!(ctx.archived(discarded).await.status, FinalStatus::Discarded);
}

/// The series is what history holds, in the whole minutes inside the window
/// as in the two its ends cut: a job finished before the window's start is
/// left out even in the same minute as the start, and a retried dead letter
/// and pruned jobs leave the series.
pub async fn throughput_follows_history_across_minutes<S: Storage>(ctx: Ctx<S>) {
    let start = ctx.now();
    let mut finished = Vec::new();
    let mut dead = None;
    for k in 0..5 {
        let job = ctx.enqueue_and_claim("q", 3).await;
        ctx.storage.ack(&lease_of(&job), None).await.expect("ack");
        if k == 2 {
            let job = ctx.enqueue_and_claim("q", 1).await;
            ctx.storage
                .nack(&lease_of(&job), json!("fatal"), Retry::Never)
                .await
                .expect("nack");
            dead = Some(job.id);
        }
        finished.push(minute_of(ctx.now()));
        ctx.clock.advance(secs(60));
    }
    ctx.clock.advance(secs(30));
    // Now start + 330 s; one job finished at start + 60 k for k in 0..5.
    let series = |points: &[(usize, u64, u64)]| -> Vec<Throughput> {
        let mut out: Vec<Throughput> = Vec::new();
        for &(k, completed, failed) in points {
            match out.last_mut() {
                Some(last) if last.minute == finished[k] => {
                    last.completed += completed;
                    last.failed += failed;
                }
                _ => out.push(Throughput {
                    queue: queue("q"),
                    minute: finished[k],
                    completed,
                    failed,
                }),
            }
        }
        out
    };
    let hour = ctx
        .storage
        .throughput(secs(3600))
        .await
        .expect("throughput");
    assert_eq!(
        hour,
        series(&[(0, 1, 0), (1, 1, 0), (2, 1, 1), (3, 1, 0), (4, 1, 0)])
    );
    // From start + 130 s: the jobs of start + 180 s and + 240 s.
    let cut = ctx.storage.throughput(secs(200)).await.expect("throughput");
    assert_eq!(cut, series(&[(3, 1, 0), (4, 1, 0)]), "window start {start}");

    ctx.storage
        .retry_dead_letter(dead.expect("a dead letter"))
        .await
        .expect("retry");
    let hour = ctx
        .storage
        .throughput(secs(3600))
        .await
        .expect("throughput");
    assert_eq!(
        hour,
        series(&[(0, 1, 0), (1, 1, 0), (2, 1, 0), (3, 1, 0), (4, 1, 0)]),
        "the retried dead letter left history"
    );

    let pruned = ctx
        .storage
        .prune_history(&queue_core::PruneRequest {
            older_than: secs(200),
            status: None,
            limit: 100,
        })
        .await
        .expect("prune");
    assert_eq!(pruned, 3);
    // (Another queue: the retried dead letter waits first in "q".)
    let job = ctx.enqueue_and_claim("r", 3).await;
    ctx.storage.ack(&lease_of(&job), None).await.expect("ack");
    let hour = ctx
        .storage
        .throughput(secs(3600))
        .await
        .expect("throughput");
    let mut expected = series(&[(3, 1, 0), (4, 1, 0)]);
    expected.push(Throughput {
        queue: queue("r"),
        minute: minute_of(ctx.now()),
        completed: 1,
        failed: 0,
    });
    assert_eq!(
        hour, expected,
        "pruned jobs left the series, new ones join it"
    );
}

/// A window under a minute or over 7 days is rejected.
pub async fn throughput_with_invalid_window_is_rejected<S: Storage>(ctx: Ctx<S>) {
    assert_invalid(ctx.storage.throughput(secs(59)).await, "window");
    assert_invalid(ctx.storage.throughput(secs(8 * 24 * 3600)).await, "window");
}

/// `next` is set exactly when more jobs match: not after a last page that
/// happens to be full.
pub async fn list_jobs_sets_next_only_when_more_jobs_match<S: Storage>(ctx: Ctx<S>) {
    ctx.fill("q", 4).await;
    let page = |before: Option<JobId>, limit: u32| {
        let filter = JobFilter {
            before,
            limit,
            ..JobFilter::default()
        };
        let storage = &ctx.storage;
        async move { storage.list_jobs(&filter).await.expect("list_jobs") }
    };
    let first = page(None, 2).await;
    assert_eq!(first.jobs.len(), 2);
    let next = first.next.expect("two more jobs match");
    assert_eq!(next, first.jobs[1].id);
    let second = page(Some(next), 2).await;
    assert_eq!(second.jobs.len(), 2);
    assert_eq!(second.next, None, "a full last page has no next");
    let all = page(None, 4).await;
    assert_eq!((all.jobs.len(), all.next), (4, None));
}
