//! Fair claiming between groups ([`queue_core::Capability::FairGroups`]):
//! on a queue with [`QueueLimits::fair_groups`], claims serve the groups in
//! turn within each priority level, one job each, the group served longest
//! ago first; jobs without a group key are one group.

use queue_core::{Capability, GroupKey, Job, NewJob, QueueError, QueueLimits, Storage};
use serde_json::json;

use super::{Ctx, acks_of, queue, request, secs};
use crate::suite::groups::group_limit;

/// Limits with fair groups, and nothing else.
pub fn fair() -> QueueLimits {
    QueueLimits {
        fair_groups: true,
        ..QueueLimits::default()
    }
}

/// The group of each of `jobs`, in order (`-` for no group).
pub(crate) fn groups(jobs: &[Job]) -> Vec<String> {
    (jobs.iter())
        .map(|job| {
            job.group_key
                .as_ref()
                .map_or("-", GroupKey::as_str)
                .to_owned()
        })
        .collect()
}

impl<S: Storage> Ctx<S> {
    /// Claims one job of `queue_name` at a time, `n` times, and returns
    /// the group of each ([`groups`]).
    pub(crate) async fn claim_groups_one_by_one(&self, queue_name: &str, n: usize) -> Vec<String> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.extend(groups(&self.claim(queue_name, 1).await));
        }
        out
    }
}

/// Claims of one job each serve the groups in turn: every group with a
/// job waiting once, then again, though one group's jobs were all
/// enqueued first; a group whose jobs ran out drops out of the rounds.
pub async fn fair_claims_serve_each_group_in_turn<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", fair()).await;
    ctx.fill_group("q", Some("a"), 4, 0).await;
    ctx.fill_group("q", Some("b"), 2, 0).await;
    ctx.fill_group("q", Some("c"), 2, 0).await;
    assert_eq!(
        ctx.claim_groups_one_by_one("q", 9).await,
        ["a", "b", "c", "a", "b", "c", "a", "a"],
        "no group served twice while another waits; a's backlog last"
    );
}

/// One claim of many takes a job of each group in turn (all turns 0 at
/// first: then the groups in the order of their first jobs), then again,
/// and jobs without a group key as one group.
pub async fn one_fair_claim_takes_a_job_of_each_group_per_round<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", fair()).await;
    ctx.fill_group("q", Some("a"), 3, 0).await;
    ctx.fill_group("q", None, 2, 0).await;
    ctx.fill_group("q", Some("b"), 2, 0).await;
    let claimed = ctx.claim("q", 10).await;
    assert_eq!(groups(&claimed), ["a", "-", "b", "a", "-", "b", "a"]);
    // Turns follow the order the claim returned: a's last job was the
    // last taken, so the groups without work come back before it.
    ctx.fill_group("q", Some("a"), 1, 0).await;
    ctx.fill_group("q", Some("b"), 1, 0).await;
    ctx.fill_group("q", None, 1, 0).await;
    assert_eq!(groups(&ctx.claim("q", 3).await), ["-", "b", "a"]);
}

/// A claim of several jobs takes what claims of one each would: once a
/// group is served, its turn is behind every other's, whatever the ages
/// of the groups' next jobs.
pub async fn one_fair_claim_takes_what_claims_of_one_would<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", fair()).await;
    let mut ids = Vec::new();
    for name in ["a", "b", "b", "a"] {
        ids.push(
            ctx.enqueue(NewJob::new("q", json!(name)).group_key(name))
                .await,
        );
        ctx.clock.advance(secs(1));
    }
    let claimed = ctx.claim("q", 4).await;
    let claimed: Vec<_> = claimed.iter().map(|job| job.id).collect();
    assert_eq!(
        claimed,
        vec![ids[0], ids[1], ids[3], ids[2]],
        "a, b, then a (served before b) though b's second job is older"
    );
}

/// The small tenant behind a large one: a job of a group that had nothing
/// waiting is claimed at the next claim, ahead of the backlog enqueued
/// long before it.
pub async fn a_group_that_arrives_behind_a_backlog_is_served_at_the_next_claim<S: Storage>(
    ctx: Ctx<S>,
) {
    ctx.configure("q", fair()).await;
    ctx.fill_group("q", Some("large"), 50, 0).await;
    assert_eq!(groups(&ctx.claim("q", 5).await), ["large"; 5]);
    ctx.clock.advance(secs(60));
    ctx.fill_group("q", Some("small"), 1, 0).await;
    assert_eq!(
        groups(&ctx.claim("q", 3).await),
        ["small", "large", "large"]
    );
    ctx.fill_group("q", Some("small"), 2, 0).await;
    assert_eq!(
        ctx.claim_groups_one_by_one("q", 4).await,
        ["small", "large", "small", "large"],
        "two groups with work alternate"
    );
}

/// Fairness orders jobs within a priority level: a higher level is served
/// first whatever the turns, and the lower level in turn after it.
pub async fn fair_groups_keep_priority_first<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", fair()).await;
    ctx.fill_group("q", Some("b"), 2, 0).await;
    ctx.fill_group("q", Some("a"), 2, 5).await;
    ctx.fill_group("q", Some("c"), 1, 0).await;
    assert_eq!(
        ctx.claim_groups_one_by_one("q", 5).await,
        ["a", "a", "b", "c", "b"]
    );
}

/// Group limits still hold on a fair queue: a full group's jobs are
/// skipped, and the other groups are served in turn.
pub async fn fair_groups_skip_a_full_group<S: Storage>(ctx: Ctx<S>) {
    ctx.configure(
        "q",
        QueueLimits {
            fair_groups: true,
            ..group_limit(1)
        },
    )
    .await;
    ctx.fill_group("q", Some("a"), 3, 0).await;
    ctx.fill_group("q", Some("b"), 3, 0).await;
    let first = ctx.claim("q", 4).await;
    assert_eq!(groups(&first), ["a", "b"], "one each: both groups full");
    (ctx.storage.ack_batch(&acks_of(&first[..1])))
        .await
        .expect("ack a");
    assert_eq!(groups(&ctx.claim("q", 4).await), ["a"], "b is still full");
}

/// Unset, the plain order returns at the next claim; set again, the turns
/// kept from before order the groups.
pub async fn lifting_fair_groups_restores_the_plain_order<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", fair()).await;
    ctx.fill_group("q", Some("a"), 4, 0).await;
    ctx.fill_group("q", Some("b"), 2, 0).await;
    assert_eq!(groups(&ctx.claim("q", 1).await), ["a"]);
    ctx.configure("q", QueueLimits::default()).await;
    assert_eq!(groups(&ctx.claim("q", 2).await), ["a", "a"], "plain order");
    ctx.configure("q", fair()).await;
    assert_eq!(
        groups(&ctx.claim("q", 2).await),
        ["b", "a"],
        "b never served: its turn is older than a's"
    );
}

/// A claim naming a fair and a plain queue takes, job by job, from the
/// queue whose next job (in its own order) comes first in the plain
/// order.
pub async fn fair_queues_merge_with_other_queues_by_their_next_job<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("f", fair()).await;
    let a1 = ctx
        .enqueue(NewJob::new("f", json!("a1")).group_key("a"))
        .await;
    ctx.clock.advance(secs(1));
    let a2 = ctx
        .enqueue(NewJob::new("f", json!("a2")).group_key("a"))
        .await;
    ctx.clock.advance(secs(1));
    let p1 = ctx.enqueue(NewJob::new("p", json!("p1"))).await;
    ctx.clock.advance(secs(1));
    let b1 = ctx
        .enqueue(NewJob::new("f", json!("b1")).group_key("b"))
        .await;
    let claimed = (ctx.storage.dequeue(&request(&["f", "p"], 4, "w1")))
        .await
        .expect("dequeue");
    let ids: Vec<_> = claimed.iter().map(|job| job.id).collect();
    // f's own order: a1, then b1 (b's turn is lower than a's), then a2.
    assert_eq!(ids, vec![a1, p1, b1, a2]);
}

/// Two handles on one database, as two hosts: the setting made through
/// one reads back and orders the claims of the other, and the turns of
/// claims through either order both.
pub async fn fair_turns_bind_claims_through_another_handle<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", fair()).await;
    let second = ctx.second();
    let configs = second.queue_configs().await.expect("queue_configs");
    assert!(configs[0].limits.fair_groups, "{configs:?}");
    ctx.fill_group("q", Some("a"), 3, 0).await;
    ctx.fill_group("q", Some("b"), 2, 0).await;
    assert_eq!(groups(&ctx.claim("q", 1).await), ["a"]);
    let other = (second.dequeue(&request(&["q"], 1, "other")))
        .await
        .expect("dequeue");
    assert_eq!(groups(&other), ["b"], "a's turn, taken through the first");
    assert_eq!(groups(&ctx.claim("q", 1).await), ["a"]);
    let other = (second.dequeue(&request(&["q"], 2, "other")))
        .await
        .expect("dequeue");
    assert_eq!(groups(&other), ["b", "a"]);
}

/// The setting reads back in `queue_configs` and in the limits' display.
pub async fn fair_groups_read_back<S: Storage>(ctx: Ctx<S>) {
    let limits = QueueLimits {
        concurrency: Some(3),
        fair_groups: true,
        ..QueueLimits::default()
    };
    ctx.configure("q", limits).await;
    let configs = ctx.storage.queue_configs().await.expect("queue_configs");
    assert_eq!(configs.len(), 1);
    assert_eq!(configs[0].limits, limits);
    assert_eq!(configs[0].limits.to_string(), "concurrency 3, fair groups");
    ctx.configure("q", QueueLimits::default()).await;
    let configs = ctx.storage.queue_configs().await.expect("queue_configs");
    assert!(configs.iter().all(|c| !c.limits.fair_groups), "{configs:?}");
}

/// What a storage that does not declare [`Capability::FairGroups`] must
/// do, for a backend's own test to call (the suite's cases run only on
/// storages that declare it): a `configure_queue` that sets fair groups is
/// refused with `NotSupported` naming the capability, and nothing is
/// written.
///
/// # Panics
/// When the storage declares the capability, or accepts the setting.
pub async fn fair_groups_are_refused_without_the_capability<S: Storage>(storage: &S) {
    assert!(
        !storage.capabilities().supports(Capability::FairGroups),
        "the storage declares fair groups: run the suite's cases instead"
    );
    let limits = QueueLimits {
        concurrency: Some(2),
        fair_groups: true,
        ..QueueLimits::default()
    };
    match storage.configure_queue(&queue("q"), &limits).await {
        Err(QueueError::NotSupported {
            capability: Some(Capability::FairGroups),
            ..
        }) => {}
        other => panic!("expected NotSupported (fair_groups), got {other:?}"),
    }
    if storage.capabilities().supports(Capability::FlowLimits) {
        let configs = storage.queue_configs().await.expect("queue_configs");
        assert!(configs.is_empty(), "a config row was written: {configs:?}");
    }
}
