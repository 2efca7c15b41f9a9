//! Workflows ([`queue_core::Capability::Dependencies`]): a job waits for
//! the jobs it depends on, runs once they have completed, and is cancelled
//! (or runs anyway, if it asked to) when one fails; each finish counts
//! once however the finishes race.

use std::time::Duration;

use futures_util::StreamExt;
use queue_core::{
    Capability, Dependency, DependencyFailure, FinalStatus, Job, JobFilter, JobId, JobState,
    LinkStatus, MAX_DEPENDENCIES, NewJob, QueueError, Retry, Storage, Wakeup,
};
use serde_json::json;

use super::{Ctx, LEASE, assert_invalid, lease_of, queue, secs};

impl<S: Storage> Ctx<S> {
    /// Where job `id` stands now: live in a state, or finished.
    pub async fn link_status(&self, id: JobId) -> LinkStatus {
        if let Some(job) = self.storage.get_job(id).await.expect("get_job") {
            return LinkStatus::Live(job.state(self.now()));
        }
        match self.storage.get_history(id).await.expect("get_history") {
            Some(record) => LinkStatus::Finished(record.status),
            None => LinkStatus::Gone,
        }
    }

    /// Claims every job of `queue_name` claimable now, which must be
    /// `expected` (in ascending order), and acks each: one layer of a graph.
    async fn run_layer(&self, queue_name: &str, expected: &[JobId]) {
        let claimed = self.claim(queue_name, 1_000).await;
        let mut got: Vec<JobId> = claimed.iter().map(|j| j.id).collect();
        got.sort();
        assert_eq!(got, expected, "the layer claimable now");
        for job in &claimed {
            self.storage.ack(&lease_of(job), None).await.expect("ack");
        }
    }

    /// Claims the one job of `queue_name` that must be `id`, and acks it
    /// with `result`.
    async fn run(&self, queue_name: &str, id: JobId, result: serde_json::Value) {
        let job = self.claim_one(queue_name).await;
        assert_eq!(job.id, id, "expected job {id} to be the one claimable");
        self.storage
            .ack(&lease_of(&job), Some(result))
            .await
            .expect("ack");
    }

    /// The ids `queue_name` has claimable now, claimed (as `w1`).
    async fn claimable(&self, queue_name: &str) -> Vec<JobId> {
        let mut ids: Vec<JobId> = self
            .claim(queue_name, 100)
            .await
            .iter()
            .map(|job| job.id)
            .collect();
        ids.sort();
        ids
    }
}

fn job(n: i64) -> NewJob {
    NewJob::new("q", json!({ "n": n }))
}

fn waiting() -> LinkStatus {
    LinkStatus::Live(JobState::Waiting)
}

/// A job naming two live dependencies waits (its own state, counted by
/// stats, skipped by claims and by `next_due`, holding its unique key)
/// until both have completed; the second ack makes it pending at once.
pub async fn a_job_waits_until_every_dependency_completes<S: Storage>(ctx: Ctx<S>) {
    let a = ctx.enqueue(job(1)).await;
    let b = ctx.enqueue(job(2)).await;
    let c = ctx
        .enqueue(
            NewJob::new("after", json!({"n": 3}))
                .unique_key("k")
                .depends_on(a)
                .depends_on(b)
                .depends_on(a),
        )
        .await;
    let live = ctx.live(c).await;
    assert_eq!(live.state(ctx.now()), JobState::Waiting);
    assert_eq!(live.available_at, queue_core::waiting_at());
    let again = ctx
        .storage
        .enqueue(NewJob::new("after", json!({})).unique_key("k"))
        .await
        .expect("enqueue");
    assert_eq!(
        (again.id, again.existed),
        (c, true),
        "a waiting job holds its key"
    );
    let stats = ctx.storage.stats().await.expect("stats");
    let after = stats
        .iter()
        .find(|s| s.queue == queue("after"))
        .expect("stats of after");
    assert_eq!((after.waiting, after.scheduled, after.pending), (1, 0, 0));
    assert!(ctx.claim("after", 10).await.is_empty());
    assert_eq!(
        ctx.storage
            .next_due(&[queue("after")])
            .await
            .expect("next_due"),
        None,
        "a waiting job is not due at any time"
    );

    ctx.clock.advance(secs(1));
    let first = ctx.claim_one("q").await;
    assert_eq!(first.id, a);
    ctx.storage.ack(&lease_of(&first), None).await.expect("ack");
    assert_eq!(ctx.link_status(c).await, waiting(), "b has not finished");
    assert!(ctx.claim("after", 10).await.is_empty());

    ctx.clock.advance(secs(1));
    ctx.run("q", b, json!(null)).await;
    let released = ctx.live(c).await;
    assert_eq!(released.state(ctx.now()), JobState::Pending);
    assert_eq!(
        released.available_at,
        ctx.now(),
        "pending from the last finish on"
    );
    assert_eq!(released.attempts, 0);
    assert_eq!(ctx.claimable("after").await, [c]);
}

/// A whole graph in one batch (a root, two children, a join naming both):
/// the ids ascend in input order, and the jobs become claimable layer by
/// layer.
pub async fn a_graph_enqueued_in_one_batch_runs_layer_by_layer<S: Storage>(ctx: Ctx<S>) {
    let outcomes = ctx
        .storage
        .enqueue_batch(vec![
            job(0),
            job(1).depends_on(Dependency::InBatch(0)),
            job(2).depends_on(Dependency::InBatch(0)),
            job(3).depends_on_all([Dependency::InBatch(1), Dependency::InBatch(2)]),
        ])
        .await
        .expect("enqueue_batch");
    let ids: Vec<JobId> = outcomes.iter().map(|o| o.id).collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "ids in input order: {ids:?}"
    );
    let [root, left, right, join] = ids[..] else {
        panic!("four outcomes expected: {outcomes:?}");
    };
    ctx.run_layer("q", &[root]).await;
    ctx.run_layer("q", &[left, right]).await;
    assert_eq!(
        ctx.link_status(join).await,
        LinkStatus::Live(JobState::Pending)
    );
    ctx.run_layer("q", &[join]).await;
    assert!(ctx.claim("q", 100).await.is_empty());
}

/// A graph of 300 jobs in one batch, the size a storage may take a bulk
/// path for (one root, 298 children depending on it, a join depending on
/// every child): ids ascend in input order, only the root is claimable
/// until it is acked, then every child, then the join.
pub async fn a_large_graph_enqueued_in_one_batch_waits_layer_by_layer<S: Storage>(ctx: Ctx<S>) {
    const CHILDREN: usize = 298;
    let n = |i: usize| i64::try_from(i).expect("small");
    let mut jobs = vec![job(0)];
    jobs.extend((1..=CHILDREN).map(|i| job(n(i)).depends_on(Dependency::InBatch(0))));
    jobs.push(job(n(CHILDREN + 1)).depends_on_all((1..=CHILDREN).map(Dependency::InBatch)));
    let outcomes = ctx
        .storage
        .enqueue_batch(jobs)
        .await
        .expect("enqueue_batch");
    let ids: Vec<JobId> = outcomes.iter().map(|o| o.id).collect();
    assert_eq!(ids.len(), CHILDREN + 2);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids in input order");
    for id in &ids[1..] {
        assert_eq!(ctx.link_status(*id).await, waiting(), "job {id} waits");
    }
    ctx.run_layer("q", &ids[..1]).await;
    ctx.run_layer("q", &ids[1..=CHILDREN]).await;
    ctx.run_layer("q", &ids[CHILDREN + 1..]).await;
    assert!(ctx.claim("q", 100).await.is_empty());
}

/// A dead-lettered dependency cancels the jobs waiting on it (last error
/// naming it), and their dependants in turn, in the same call; a job that
/// runs anyway counts it as finished.
pub async fn a_failed_dependency_cancels_its_dependants_unless_they_run_anyway<S: Storage>(
    ctx: Ctx<S>,
) {
    let a = ctx.enqueue(job(0).max_attempts(1)).await;
    let b = ctx.enqueue(job(1).depends_on(a)).await;
    let c = ctx
        .enqueue(
            job(2)
                .depends_on(a)
                .on_dependency_failure(DependencyFailure::Run),
        )
        .await;
    let d = ctx.enqueue(job(3).depends_on(b)).await;
    let e = ctx
        .enqueue(
            job(4)
                .depends_on(b)
                .on_dependency_failure(DependencyFailure::Run),
        )
        .await;
    let claimed = ctx.claim_one("q").await;
    assert_eq!(claimed.id, a);
    ctx.clock.advance(secs(1));
    ctx.storage
        .nack(&lease_of(&claimed), json!("boom"), Retry::Never)
        .await
        .expect("nack");

    let cancelled_b = ctx.archived(b).await;
    assert_eq!(cancelled_b.status, FinalStatus::Cancelled);
    assert_eq!(cancelled_b.finished_at, ctx.now());
    assert_eq!(
        cancelled_b.last_error,
        Some(queue_core::dependency_failed(a, FinalStatus::DeadLetter))
    );
    assert_eq!(
        ctx.archived(d).await.last_error,
        Some(queue_core::dependency_failed(b, FinalStatus::Cancelled)),
        "the cancellation reaches the dependants of the cancelled job"
    );
    assert_eq!(ctx.claimable("q").await, [c, e], "the jobs that run anyway");
}

/// A discarded, a cancelled and a reclaimed-to-death dependency each fail
/// their dependants; cancelling a waiting job itself reaches its own.
pub async fn discarded_cancelled_and_reclaimed_dependencies_fail_their_dependants<S: Storage>(
    ctx: Ctx<S>,
) {
    let discarded = ctx.enqueue(job(0)).await;
    let cancelled = ctx.enqueue(job(1)).await;
    let stalled = ctx.enqueue(job(2).max_attempts(1)).await;
    let after: Vec<JobId> = {
        let mut ids = Vec::new();
        for dependency in [discarded, cancelled, stalled] {
            ids.push(
                ctx.enqueue(NewJob::new("after", json!({})).depends_on(dependency))
                    .await,
            );
        }
        ids
    };
    let waiter = after[1];
    let behind_waiter = ctx
        .enqueue(NewJob::new("later", json!({})).depends_on(waiter))
        .await;

    ctx.storage.discard(discarded).await.expect("discard");
    assert_eq!(
        ctx.archived(after[0]).await.last_error,
        Some(queue_core::dependency_failed(
            discarded,
            FinalStatus::Discarded
        ))
    );
    ctx.storage
        .cancel(waiter)
        .await
        .expect("cancel of a waiting job");
    assert_eq!(ctx.archived(waiter).await.status, FinalStatus::Cancelled);
    assert_eq!(
        ctx.archived(behind_waiter).await.last_error,
        Some(queue_core::dependency_failed(
            waiter,
            FinalStatus::Cancelled
        ))
    );
    ctx.storage.cancel(cancelled).await.expect("cancel");

    // The holder of `stalled` dies: its lease expires, and with no attempt
    // left the reclaim dead-letters it.
    let held = ctx.claim("q", 10).await;
    assert_eq!(held.iter().map(|j| j.id).collect::<Vec<_>>(), [stalled]);
    ctx.clock.advance(LEASE + secs(1));
    ctx.storage.reclaim_stalled(100).await.expect("reclaim");
    assert_eq!(ctx.archived(stalled).await.status, FinalStatus::DeadLetter);
    assert_eq!(
        ctx.archived(after[2]).await.last_error,
        Some(queue_core::dependency_failed(
            stalled,
            FinalStatus::DeadLetter
        ))
    );
    assert_eq!(ctx.live_count().await, 0);
}

/// Dependencies in history count at enqueue: a completed one is finished
/// (the job is pending at once), a failed one is refused unless the job
/// runs anyway, an unknown id is refused; a refusal writes nothing of the
/// batch, and holds for a job whose unique key is live.
pub async fn dependencies_in_history_count_at_enqueue<S: Storage>(ctx: Ctx<S>) {
    let completed = ctx.finish("q", false).await;
    let dead = ctx.finish("q", true).await;
    let now_pending = ctx.enqueue(job(1).depends_on(completed)).await;
    assert_eq!(
        ctx.link_status(now_pending).await,
        LinkStatus::Live(JobState::Pending)
    );
    let runs = ctx
        .enqueue(
            job(2)
                .depends_on(dead)
                .depends_on(completed)
                .on_dependency_failure(DependencyFailure::Run),
        )
        .await;
    assert_eq!(
        ctx.link_status(runs).await,
        LinkStatus::Live(JobState::Pending)
    );
    let keyed = ctx.enqueue(job(7).unique_key("held")).await;
    let before = ctx.live_count().await;
    for refused in [
        vec![job(3), job(4).depends_on(dead)],
        vec![job(5), job(6).depends_on(JobId(dead.get() + 1_000_000))],
        // The refusal does not depend on whether the job's key is live.
        vec![job(8).unique_key("held").depends_on(dead)],
    ] {
        assert_invalid(ctx.storage.enqueue_batch(refused).await, "depends_on");
        assert_eq!(
            ctx.live_count().await,
            before,
            "nothing of the batch is written"
        );
    }
    assert_eq!(
        ctx.link_status(keyed).await,
        LinkStatus::Live(JobState::Pending)
    );
}

/// What cannot form a graph is refused, nothing written: a dependency on
/// the job itself or on a later job of the batch (the only ways to make a
/// cycle), and more than [`MAX_DEPENDENCIES`] in one call.
pub async fn dependencies_that_cannot_form_a_graph_are_refused<S: Storage>(ctx: Ctx<S>) {
    let live = ctx.enqueue(job(0)).await;
    for refused in [
        vec![job(1).depends_on(Dependency::InBatch(0))],
        vec![
            job(1).depends_on(Dependency::InBatch(1)),
            job(2).depends_on(Dependency::InBatch(0)),
        ],
        vec![job(1).depends_on_all((0..=MAX_DEPENDENCIES as i64).map(|i| JobId(live.get() + i)))],
    ] {
        assert_invalid(ctx.storage.enqueue_batch(refused).await, "depends_on");
    }
    assert_eq!(ctx.live_count().await, 1);
}

/// `job_links` lists a job's dependencies with where each stands and the
/// result a completed one was acked with, and its dependants, through
/// either handle; an id that never existed is not found.
pub async fn job_links_list_dependencies_with_their_results_and_dependants<S: Storage>(
    ctx: Ctx<S>,
) {
    let a = ctx.enqueue(job(1)).await;
    let b = ctx.enqueue(job(2).delay(secs(60))).await;
    let c = ctx.enqueue(job(3).depends_on(b).depends_on(a)).await;
    ctx.run("q", a, json!({"rows": 42})).await;
    let links = ctx.second().job_links(c).await.expect("job_links");
    let got: Vec<_> = links
        .dependencies
        .iter()
        .map(|l| (l.id, l.status, l.result.clone()))
        .collect();
    assert_eq!(
        got,
        [
            (
                a,
                LinkStatus::Finished(FinalStatus::Completed),
                Some(json!({"rows": 42}))
            ),
            (b, LinkStatus::Live(JobState::Scheduled), None),
        ]
    );
    assert_eq!(links.dependencies[0].queue, Some(queue("q")));
    assert!(links.dependants.is_empty());
    for dependency in [a, b] {
        let theirs = ctx.storage.job_links(dependency).await.expect("job_links");
        let dependants: Vec<_> = theirs.dependants.iter().map(|l| (l.id, l.status)).collect();
        assert_eq!(dependants, [(c, waiting())]);
    }
    match ctx.storage.job_links(JobId(c.get() + 1_000_000)).await {
        Err(QueueError::NotFound { .. }) => {}
        other => panic!("expected NotFound, got {other:?}"),
    }
}

/// The last two dependencies completed at once through two handles, round
/// after round: the waiting job is released exactly once each time.
pub async fn racing_completions_of_the_last_two_dependencies_release_once<S: Storage>(ctx: Ctx<S>) {
    for round in 0..8 {
        let a = ctx.enqueue(job(round * 2)).await;
        let b = ctx.enqueue(job(round * 2 + 1)).await;
        let c = ctx
            .enqueue(NewJob::new("after", json!({})).depends_on_all([a, b]))
            .await;
        let held: Vec<Job> = ctx.claim("q", 2).await;
        assert_eq!(held.len(), 2);
        let (first, second) = (lease_of(&held[0]), lease_of(&held[1]));
        let (one, two) = futures_util::future::join(
            ctx.storage.ack(&first, None),
            ctx.second().ack(&second, None),
        )
        .await;
        one.expect("ack through the first handle");
        two.expect("ack through the second handle");
        assert_eq!(ctx.claimable("after").await, [c], "round {round}");
        let stats = ctx.storage.stats().await.expect("stats");
        assert!(
            stats.iter().all(|s| s.waiting == 0),
            "round {round}: {stats:?}"
        );
    }
}

/// A dependant enqueued through one handle while its dependency is acked
/// through another, round after round: whichever commits first, the
/// dependant never stays waiting for a job that has already completed.
pub async fn a_dependant_enqueued_while_its_dependency_is_acked_is_not_left_waiting<S: Storage>(
    ctx: Ctx<S>,
) {
    for round in 0..12 {
        let a = ctx.enqueue(job(round)).await;
        let held = ctx.claim_one("q").await;
        assert_eq!(held.id, a);
        let lease = lease_of(&held);
        let (acked, enqueued) = futures_util::future::join(
            ctx.storage.ack(&lease, None),
            ctx.second()
                .enqueue(NewJob::new("after", json!({ "round": round })).depends_on(a)),
        )
        .await;
        acked.expect("ack");
        let c = enqueued.expect("enqueue of the dependant").id;
        assert_eq!(
            ctx.link_status(c).await,
            LinkStatus::Live(JobState::Pending),
            "round {round}: the dependant of a completed job waits"
        );
        assert_eq!(ctx.claimable("after").await, [c], "round {round}");
    }
}

/// A released job keeps a later time it was enqueued for; a dependency
/// dead-lettered, retried and completed counts once for a job that runs
/// anyway, which still waits for its other dependency.
pub async fn a_released_job_keeps_its_time_and_each_dependency_counts_once<S: Storage>(
    ctx: Ctx<S>,
) {
    let a = ctx.enqueue(job(0).max_attempts(1)).await;
    let b = ctx.enqueue(job(1).delay(secs(600))).await;
    let enqueued_at = ctx.now();
    let c = ctx
        .enqueue(
            NewJob::new("after", json!({}))
                .delay(secs(120))
                .depends_on_all([a, b])
                .on_dependency_failure(DependencyFailure::Run),
        )
        .await;
    let held = ctx.claim_one("q").await;
    ctx.storage
        .nack(&lease_of(&held), json!("x"), Retry::Never)
        .await
        .expect("nack");
    assert_eq!(ctx.link_status(c).await, waiting(), "b is still to finish");
    if ctx
        .storage
        .capabilities()
        .supports(Capability::RetryDeadLetter)
    {
        ctx.storage
            .retry_dead_letter(a)
            .await
            .expect("retry_dead_letter");
        ctx.run("q", a, json!(null)).await;
        assert_eq!(
            ctx.link_status(c).await,
            waiting(),
            "a's second finish is not counted again"
        );
    }
    ctx.clock.advance(secs(600));
    ctx.run("q", b, json!(null)).await;
    let released = ctx.live(c).await;
    assert_eq!(
        released.available_at,
        ctx.now(),
        "its own time (enqueue + 120 s) has passed: due now"
    );
    let late = ctx.enqueue(job(9)).await;
    let d = ctx
        .enqueue(
            NewJob::new("after", json!({}))
                .run_at(enqueued_at + secs(3600))
                .depends_on(late),
        )
        .await;
    ctx.run("q", late, json!(null)).await;
    let released = ctx.live(d).await;
    assert_eq!(released.state(ctx.now()), JobState::Scheduled);
    assert_eq!(released.available_at, enqueued_at + secs(3600));
}

/// Waiting jobs are listed under their state, not as scheduled, and "run
/// now" leaves them waiting.
pub async fn waiting_jobs_are_listed_and_run_now_leaves_them<S: Storage>(ctx: Ctx<S>) {
    let a = ctx.enqueue(job(0).delay(secs(60))).await;
    let c = ctx.enqueue(job(1).depends_on(a)).await;
    let listed = |state| JobFilter {
        state: Some(state),
        limit: 100,
        ..Default::default()
    };
    let ids = |page: queue_core::JobPage| page.jobs.iter().map(|j| j.id).collect::<Vec<_>>();
    let waiting_page = ctx.storage.list_jobs(&listed(JobState::Waiting)).await;
    assert_eq!(ids(waiting_page.expect("list_jobs")), [c]);
    let scheduled_page = ctx.storage.list_jobs(&listed(JobState::Scheduled)).await;
    assert_eq!(ids(scheduled_page.expect("list_jobs")), [a]);
    let moved = ctx
        .storage
        .run_now(&JobFilter {
            limit: 100,
            ..Default::default()
        })
        .await
        .expect("run_now");
    assert_eq!(moved, 1, "only the scheduled job");
    assert_eq!(ctx.link_status(c).await, waiting());
}

/// A job released by an ack wakes the subscribers of its queue, as an
/// enqueue does.
pub async fn a_released_job_wakes_subscribers<S: Storage>(ctx: Ctx<S>) {
    let a = ctx.enqueue(job(0)).await;
    ctx.enqueue(NewJob::new("after", json!({})).depends_on(a))
        .await;
    let held = ctx.claim_one("q").await;
    let mut wakeups = ctx
        .storage
        .subscribe()
        .await
        .expect("subscribe")
        .expect("the storage declares wake-ups");
    ctx.storage.ack(&lease_of(&held), None).await.expect("ack");
    let heard = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(wakeup) = wakeups.next().await {
            if let Ok(Wakeup::Queue(name)) = wakeup
                && name == queue("after")
            {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(heard, Ok(true), "no wake-up for queue after within 10 s");
}
