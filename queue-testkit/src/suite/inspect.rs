//! Inspection: stats, single lookups, history and dead-letter listings.

use queue_core::{FinalStatus, HistoryFilter, JobId, NewJob, QueueStats, Retry, Storage};
use serde_json::json;

use super::{Ctx, LEASE, assert_invalid, lease_of, queue, secs};

fn counts(stats: &QueueStats) -> [u64; 5] {
    [
        stats.pending,
        stats.scheduled,
        stats.running,
        stats.stalled,
        stats.exhausted,
    ]
}

/// After a scripted sequence each queue's counts match the derived states.
pub async fn stats_count_each_state_per_queue<S: Storage>(ctx: Ctx<S>) {
    assert!(ctx.storage.stats().await.expect("stats").is_empty());
    // Queue a: one stalled, one running, two pending, one scheduled.
    ctx.enqueue_and_claim("a", 3).await;
    ctx.clock.advance(LEASE);
    ctx.enqueue_and_claim("a", 3).await;
    ctx.enqueue(NewJob::new("a", json!(1))).await;
    ctx.enqueue(NewJob::new("a", json!(2))).await;
    ctx.enqueue(NewJob::new("a", json!(3)).delay(secs(60)))
        .await;
    // Queue b: one retrying (scheduled), one completed (gone).
    let job = ctx.enqueue_and_claim("b", 3).await;
    ctx.storage
        .nack(&lease_of(&job), json!("e"), Retry::After(secs(5)))
        .await
        .expect("nack");
    let done = ctx.enqueue_and_claim("b", 3).await;
    ctx.storage.ack(&lease_of(&done), None).await.expect("ack");

    let stats = ctx.storage.stats().await.expect("stats");
    let names: Vec<_> = stats.iter().map(|s| s.queue.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(counts(&stats[0]), [2, 1, 1, 1, 0]);
    assert_eq!(counts(&stats[1]), [0, 1, 0, 0, 0]);
    assert!(!stats[0].paused && !stats[1].paused);

    ctx.clock.advance(secs(5));
    let stats = ctx.storage.stats().await.expect("stats");
    assert_eq!(counts(&stats[1]), [1, 0, 0, 0, 0], "the retry came due");
}

/// Pending jobs that leave without a claim (discarded, cancelled, discarded
/// in bulk) leave the counts, and a scheduled job run now is counted
/// pending, whatever index or side structure the storage counts from.
pub async fn stats_forget_pending_jobs_that_leave_without_a_claim<S: Storage>(ctx: Ctx<S>) {
    let mut pending = Vec::new();
    for i in 0..5 {
        pending.push(ctx.enqueue(NewJob::new("q", json!(i))).await);
    }
    let later = ctx
        .enqueue(NewJob::new("q", json!("later")).delay(secs(60)))
        .await;
    ctx.enqueue(NewJob::new("other", json!("other"))).await;
    let counts_of = |stats: &[QueueStats], name: &str| {
        stats.iter().find(|s| s.queue.as_str() == name).map(counts)
    };
    let stats = ctx.storage.stats().await.expect("stats");
    assert_eq!(counts_of(&stats, "q"), Some([5, 1, 0, 0, 0]));

    ctx.storage.discard(pending[0]).await.expect("discard");
    ctx.storage.cancel(pending[1]).await.expect("cancel");
    let bulk = queue_core::JobFilter {
        id: Some(pending[2]),
        ..queue_core::JobFilter::default()
    };
    assert_eq!(
        ctx.storage.discard_jobs(&bulk).await.expect("discard_jobs"),
        1
    );
    let stats = ctx.storage.stats().await.expect("stats");
    assert_eq!(
        counts_of(&stats, "q"),
        Some([2, 1, 0, 0, 0]),
        "three pending jobs left without a claim"
    );

    let scheduled = queue_core::JobFilter {
        id: Some(later),
        ..queue_core::JobFilter::default()
    };
    assert_eq!(ctx.storage.run_now(&scheduled).await.expect("run_now"), 1);
    let stats = ctx.storage.stats().await.expect("stats");
    assert_eq!(counts_of(&stats, "q"), Some([3, 0, 0, 0, 0]), "run now");

    for id in [pending[3], pending[4], later] {
        ctx.storage.discard(id).await.expect("discard");
    }
    let stats = ctx.storage.stats().await.expect("stats");
    let names: Vec<_> = stats.iter().map(|s| s.queue.as_str()).collect();
    assert_eq!(names, ["other"], "a queue left with no job is not listed");
}

/// The oldest pending job's age is reported; none when nothing is pending.
pub async fn stats_report_oldest_pending_age<S: Storage>(ctx: Ctx<S>) {
    ctx.enqueue(NewJob::new("q", json!(1))).await;
    ctx.clock.advance(secs(30));
    ctx.enqueue(NewJob::new("q", json!(2))).await;
    ctx.enqueue(NewJob::new("q", json!(3)).delay(secs(1))).await;
    ctx.clock.advance(secs(12));
    let stats = ctx.storage.stats().await.expect("stats");
    assert_eq!(stats[0].oldest_pending_age, Some(secs(42)));
    ctx.claim("q", 10).await;
    let stats = ctx.storage.stats().await.expect("stats");
    assert_eq!(stats[0].oldest_pending_age, None);
}

/// The oldest pending job counts whatever its priority: here it waits
/// behind younger jobs of higher priorities (a backend that looks for the
/// oldest job in the best priority only reports a younger age).
pub async fn stats_report_the_oldest_pending_age_across_priorities<S: Storage>(ctx: Ctx<S>) {
    ctx.enqueue(NewJob::new("q", json!("low")).priority(-5))
        .await;
    ctx.clock.advance(secs(20));
    ctx.enqueue(NewJob::new("q", json!("high")).priority(3))
        .await;
    ctx.clock.advance(secs(5));
    ctx.enqueue(NewJob::new("q", json!("middle")).priority(0))
        .await;
    ctx.enqueue(NewJob::new("q", json!("high again")).priority(3))
        .await;
    ctx.clock.advance(secs(1));
    let stats = ctx.storage.stats().await.expect("stats");
    assert_eq!(stats[0].oldest_pending_age, Some(secs(26)));
    let claimed = ctx.claim("q", 3).await;
    assert_eq!(claimed.len(), 3);
    let stats = ctx.storage.stats().await.expect("stats");
    assert_eq!(
        stats[0].oldest_pending_age,
        Some(secs(26)),
        "the low-priority job still waits"
    );
    ctx.claim("q", 1).await;
    let stats = ctx.storage.stats().await.expect("stats");
    assert_eq!(stats[0].oldest_pending_age, None);
}

/// Each count stops at the cap, which the entry records; the oldest
/// pending age stays exact; a cap of 0 is rejected.
pub async fn stats_capped_counts_each_state_up_to_the_cap<S: Storage>(ctx: Ctx<S>) {
    for n in 0..5 {
        ctx.enqueue(NewJob::new("a", json!(n))).await;
        ctx.clock.advance(secs(1));
    }
    ctx.claim("a", 2).await;
    for n in 0..3 {
        ctx.enqueue(NewJob::new("a", json!(n)).delay(secs(60)))
            .await;
    }
    ctx.enqueue(NewJob::new("b", json!(1))).await;
    // Queue a: 3 pending (the oldest 4 s old), 3 scheduled, 2 running.
    ctx.clock.advance(secs(1));

    let stats = ctx.storage.stats_capped(2).await.expect("stats");
    assert_eq!(counts(&stats[0]), [2, 2, 2, 0, 0], "a, capped at 2");
    assert_eq!(counts(&stats[1]), [1, 0, 0, 0, 0], "b, under the cap");
    assert!(stats.iter().all(|s| s.cap == Some(2)));
    assert!(stats[0].is_capped(queue_core::JobState::Pending));
    assert!(!stats[1].is_capped(queue_core::JobState::Pending));
    assert_eq!(
        stats[0].oldest_pending_age,
        Some(secs(4)),
        "exact, whatever the cap"
    );

    let stats = ctx.storage.stats_capped(3).await.expect("stats");
    assert_eq!(counts(&stats[0]), [3, 3, 2, 0, 0], "a, capped at 3");
    let exact = ctx.storage.stats_capped(1_000).await.expect("stats");
    assert_eq!(counts(&exact[0]), [3, 3, 2, 0, 0]);
    assert!(!exact[0].is_capped(queue_core::JobState::Pending));
    let default = ctx.storage.stats().await.expect("stats");
    assert_eq!(default[0].cap, Some(queue_core::DEFAULT_COUNT_CAP));

    assert_invalid(ctx.storage.stats_capped(0).await, "cap");
}

/// A paused queue is listed even with no jobs, and marked paused.
pub async fn stats_list_paused_queues_without_jobs<S: Storage>(ctx: Ctx<S>) {
    ctx.storage
        .pause_queue(&queue("idle"))
        .await
        .expect("pause");
    ctx.enqueue(NewJob::new("busy", json!(1))).await;
    let stats = ctx.storage.stats().await.expect("stats");
    let summary: Vec<_> = stats
        .iter()
        .map(|s| (s.queue.as_str(), s.paused, s.live()))
        .collect();
    assert_eq!(summary, [("busy", false, 1), ("idle", true, 0)]);
}

/// A job is either live or archived, never both; unknown ids are neither.
pub async fn get_job_and_get_history_see_one_place_each<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 3).await;
    assert!(
        ctx.storage
            .get_history(job.id)
            .await
            .expect("get_history")
            .is_none()
    );
    ctx.storage.ack(&lease_of(&job), None).await.expect("ack");
    assert!(
        ctx.storage
            .get_job(job.id)
            .await
            .expect("get_job")
            .is_none()
    );
    assert!(
        ctx.storage
            .get_history(job.id)
            .await
            .expect("get_history")
            .is_some()
    );
    let unknown = JobId(job.id.get() + 1_000_000);
    assert!(
        ctx.storage
            .get_job(unknown)
            .await
            .expect("get_job")
            .is_none()
    );
    assert!(
        ctx.storage
            .get_history(unknown)
            .await
            .expect("get_history")
            .is_none()
    );
}

/// Archive jobs in queues a and b with each final status; returns their ids
/// as (queue, status, id) in archive order.
async fn archive_mix<S: Storage>(
    ctx: &Ctx<S>,
    discards: bool,
) -> Vec<(&'static str, FinalStatus, JobId)> {
    let mut out = Vec::new();
    for q in ["a", "b"] {
        let done = ctx.enqueue_and_claim(q, 3).await;
        ctx.storage.ack(&lease_of(&done), None).await.expect("ack");
        out.push((q, FinalStatus::Completed, done.id));
        let dead = ctx.enqueue_and_claim(q, 3).await;
        ctx.storage
            .nack(&lease_of(&dead), json!("x"), Retry::Never)
            .await
            .expect("nack");
        out.push((q, FinalStatus::DeadLetter, dead.id));
        if discards {
            let gone = ctx.enqueue(NewJob::new(q, json!(0))).await;
            ctx.storage.discard(gone).await.expect("discard");
            out.push((q, FinalStatus::Discarded, gone));
        }
    }
    out
}

/// Every filter combination returns exactly the matching rows, newest first.
pub async fn list_history_filters_by_queue_and_status<S: Storage>(ctx: Ctx<S>) {
    let mix = archive_mix(&ctx, false).await;
    check_history_filters(&ctx, &mix).await;
}

/// [`list_history_filters_by_queue_and_status`] with discarded jobs among
/// the history.
pub async fn list_history_filters_discarded_jobs<S: Storage>(ctx: Ctx<S>) {
    let mix = archive_mix(&ctx, true).await;
    check_history_filters(&ctx, &mix).await;
}

/// Every filter of a queue (any, `a`, `b`) and a status (any or each)
/// lists exactly the records of `mix` it selects, newest first, on one page.
async fn check_history_filters<S: Storage>(
    ctx: &Ctx<S>,
    mix: &[(&'static str, FinalStatus, JobId)],
) {
    let queues = [None, Some("a"), Some("b")];
    let statuses = [
        None,
        Some(FinalStatus::Completed),
        Some(FinalStatus::DeadLetter),
        Some(FinalStatus::Discarded),
    ];
    for q in queues {
        for status in statuses {
            let filter = HistoryFilter {
                queue: q.map(queue),
                status,
                ..HistoryFilter::default()
            };
            let page = ctx.history_page(&filter).await;
            let mut expected: Vec<JobId> = mix
                .iter()
                .filter(|(mq, ms, _)| q.is_none_or(|q| q == *mq) && status.is_none_or(|s| s == *ms))
                .map(|(_, _, id)| *id)
                .collect();
            expected.sort_by(|a, b| b.cmp(a));
            let got: Vec<JobId> = page.records.iter().map(|r| r.id).collect();
            assert_eq!(got, expected, "queue {q:?} status {status:?}");
            assert_eq!(page.next, None);
        }
    }
}

/// Pages follow each other by `before`; `next` is set exactly when more remain.
pub async fn list_history_pages_by_keyset<S: Storage>(ctx: Ctx<S>) {
    let mut ids = Vec::new();
    for _ in 0..5 {
        let job = ctx.enqueue_and_claim("q", 1).await;
        ctx.storage.ack(&lease_of(&job), None).await.expect("ack");
        ids.push(job.id);
    }
    ids.reverse();
    let mut filter = HistoryFilter {
        limit: 2,
        ..HistoryFilter::default()
    };
    let mut pages = Vec::new();
    loop {
        let page = ctx.history_page(&filter).await;
        pages.push(page.records.iter().map(|r| r.id).collect::<Vec<_>>());
        match page.next {
            Some(next) => filter.before = Some(next),
            None => break,
        }
    }
    assert_eq!(
        pages,
        [ids[0..2].to_vec(), ids[2..4].to_vec(), ids[4..5].to_vec()]
    );
    filter.before = Some(ids[1]);
    filter.limit = 3;
    let page = ctx.history_page(&filter).await;
    assert_eq!(
        page.records.iter().map(|r| r.id).collect::<Vec<_>>(),
        ids[2..5]
    );
    assert_eq!(page.next, None, "exactly the last rows: no further page");
}

/// The dead-letter listing holds dead letters only.
pub async fn list_dead_letters_lists_only_dead_letters<S: Storage>(ctx: Ctx<S>) {
    let mix = archive_mix(&ctx, false).await;
    let page = ctx
        .storage
        .list_dead_letters(&HistoryFilter {
            queue: Some(queue("b")),
            ..HistoryFilter::default()
        })
        .await
        .expect("list_dead_letters");
    let expected: Vec<JobId> = mix
        .iter()
        .filter(|(q, s, _)| *q == "b" && *s == FinalStatus::DeadLetter)
        .map(|(_, _, id)| *id)
        .collect();
    assert_eq!(
        page.records.iter().map(|r| r.id).collect::<Vec<_>>(),
        expected
    );
    assert!(
        page.records
            .iter()
            .all(|r| r.status == FinalStatus::DeadLetter && r.last_error == Some(json!("x")))
    );
}

/// A page size of 0 or above `MAX_PAGE_SIZE` is `InvalidInput` naming `limit`.
pub async fn list_history_with_invalid_limit_is_rejected<S: Storage>(ctx: Ctx<S>) {
    for limit in [0, queue_core::MAX_PAGE_SIZE + 1] {
        let filter = HistoryFilter {
            limit,
            ..HistoryFilter::default()
        };
        assert_invalid(ctx.storage.list_history(&filter).await, "limit");
    }
}

/// History lists newest id first, whatever order the jobs finished in, and
/// pages by id.
pub async fn list_history_orders_by_id_not_finish_time<S: Storage>(ctx: Ctx<S>) {
    let ids: Vec<JobId> = [
        ctx.enqueue(NewJob::new("q", json!(0))).await,
        ctx.enqueue(NewJob::new("q", json!(1))).await,
        ctx.enqueue(NewJob::new("q", json!(2))).await,
    ]
    .to_vec();
    let jobs = ctx.claim("q", 3).await;
    assert_eq!(jobs.len(), 3);
    // Finish the newest first and the oldest last.
    for job in jobs.iter().rev() {
        ctx.clock.advance(secs(1));
        ctx.storage.ack(&lease_of(job), None).await.expect("ack");
    }
    let listed: Vec<JobId> = ctx.all_history().await.iter().map(|r| r.id).collect();
    assert_eq!(listed, [ids[2], ids[1], ids[0]]);
    let filter = HistoryFilter {
        limit: 1,
        before: Some(ids[2]),
        ..HistoryFilter::default()
    };
    let page = ctx.history_page(&filter).await;
    let got: Vec<JobId> = page.records.iter().map(|r| r.id).collect();
    assert_eq!(got, [ids[1]], "the page before the newest id");
    assert_eq!(page.next, Some(ids[1]));
}

/// A job retrying after a nack is pending from the moment it came due, not
/// from its creation or its first claim.
pub async fn stats_age_a_retrying_job_from_when_it_came_due<S: Storage>(ctx: Ctx<S>) {
    let job = ctx.enqueue_and_claim("q", 3).await;
    ctx.clock.advance(secs(100));
    ctx.storage
        .nack(&lease_of(&job), json!("x"), Retry::After(secs(10)))
        .await
        .expect("nack");
    ctx.clock.advance(secs(15));
    let stats = ctx.storage.stats().await.expect("stats");
    assert_eq!(counts(&stats[0]), [1, 0, 0, 0, 0]);
    assert_eq!(stats[0].oldest_pending_age, Some(secs(5)));
}
