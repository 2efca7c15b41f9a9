//! Group concurrency ([`queue_core::Capability::GroupLimits`]): a job's
//! group key, a queue's group concurrency and one group's own limit,
//! enforced in the claim across every handle, and every way a lease ends
//! giving its group's slot back.

use std::collections::HashMap;

use queue_core::{
    GroupKey, GroupLimit, Job, JobFilter, NewJob, QueueError, QueueLimits, Retry, Storage,
};
use serde_json::json;

use super::{Ctx, LEASE, acks_of, assert_invalid, lease_of, queue, request, secs};

/// A group key the cases know to be valid.
pub fn group(name: &str) -> GroupKey {
    GroupKey::new(name).expect("case uses a valid group key")
}

/// Limits of at most `limit` leases per group at once, and nothing else.
pub fn group_limit(limit: u32) -> QueueLimits {
    QueueLimits {
        group_concurrency: Some(limit),
        ..QueueLimits::default()
    }
}

/// How many of `jobs` belong to group `name`.
fn of_group(jobs: &[Job], name: &str) -> usize {
    (jobs.iter())
        .filter(|job| job.group_key.as_ref().map(GroupKey::as_str) == Some(name))
        .count()
}

impl<S: Storage> Ctx<S> {
    /// Enqueues `n` jobs of group `name` (no group when `None`) into
    /// `queue_name` at `priority`, in one batch.
    pub async fn fill_group(&self, queue_name: &str, name: Option<&str>, n: usize, priority: i32) {
        let jobs = (0..n).map(|i| {
            let job = NewJob::new(queue_name, json!({ "i": i })).priority(priority);
            match name {
                Some(name) => job.group_key(name),
                None => job,
            }
        });
        self.storage
            .enqueue_batch(jobs.collect())
            .await
            .expect("enqueue_batch");
    }

    /// Gives `name` of `queue_name` its own limit, or removes it.
    pub async fn set_group_limit(&self, queue_name: &str, name: &str, limit: Option<u32>) {
        self.storage
            .set_group_limit(&queue(queue_name), &group(name), limit)
            .await
            .expect("set_group_limit");
    }
}

/// A grouped claim takes the claimable jobs in claim order, leaving out
/// only the jobs whose group is full, and hands them back in that order:
/// claims smaller than the queue take its oldest jobs, a group's second
/// job is passed over for the next group's, a job without a group is
/// never held back, and the walk goes on past jobs of full groups.
pub async fn a_grouped_claim_takes_the_oldest_jobs_within_their_slots<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", group_limit(1)).await;
    // In claim order: a1 b1 a2 c1 (none) a3 d1 b2 e1 f1.
    let groups = [
        Some("a"),
        Some("b"),
        Some("a"),
        Some("c"),
        None,
        Some("a"),
        Some("d"),
        Some("b"),
        Some("e"),
        Some("f"),
    ];
    let jobs = groups.iter().enumerate().map(|(i, name)| {
        let job = NewJob::new("q", json!({ "i": i }));
        match name {
            Some(name) => job.group_key(*name),
            None => job,
        }
    });
    let outcomes = (ctx.storage.enqueue_batch(jobs.collect()).await).expect("enqueue_batch");
    let ids: Vec<_> = outcomes.iter().map(|o| o.id).collect();
    let claimed_ids = |jobs: &[Job]| jobs.iter().map(|job| job.id).collect::<Vec<_>>();
    let first = ctx.claim("q", 3).await;
    assert_eq!(
        claimed_ids(&first),
        [ids[0], ids[1], ids[3]],
        "a1, b1, then c1 (a2 waits for a's slot): {first:?}"
    );
    let second = ctx.claim_as("q", 2, "w2").await;
    assert_eq!(
        claimed_ids(&second),
        [ids[4], ids[6]],
        "the job without a group, then d1 (a3 waits): {second:?}"
    );
    let third = ctx.claim_as("q", 10, "w3").await;
    assert_eq!(
        claimed_ids(&third),
        [ids[8], ids[9]],
        "e1 and f1 (b2 waits for b's slot): {third:?}"
    );
    ctx.storage
        .ack(&lease_of(&first[0]), None)
        .await
        .expect("ack a1");
    let fourth = ctx.claim_as("q", 10, "w4").await;
    assert_eq!(
        claimed_ids(&fourth),
        [ids[2]],
        "a's slot given back: a2, its oldest waiting job: {fourth:?}"
    );
}

/// With a group concurrency of 1, a claim takes one job per group, and
/// jobs without a group are not held back; the group's next job comes
/// once its running one is acked.
pub async fn group_limit_of_one_runs_one_job_per_group<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", group_limit(1)).await;
    ctx.fill_group("q", Some("a"), 3, 0).await;
    ctx.fill_group("q", Some("b"), 2, 0).await;
    ctx.fill_group("q", None, 2, 0).await;
    let first = ctx.claim("q", 10).await;
    assert_eq!(
        (of_group(&first, "a"), of_group(&first, "b"), first.len()),
        (1, 1, 4),
        "one of a, one of b, both jobs without a group: {first:?}"
    );
    assert!(
        ctx.claim_as("q", 10, "w2").await.is_empty(),
        "a and b are full"
    );
    let a = first
        .iter()
        .find(|job| of_group(std::slice::from_ref(job), "a") == 1);
    let a = a.expect("a job of a");
    ctx.storage.ack(&lease_of(a), None).await.expect("ack");
    let next = ctx.claim_as("q", 10, "w2").await;
    assert_eq!(
        (next.len(), of_group(&next, "a")),
        (1, 1),
        "the ack freed a's slot and only a's: {next:?}"
    );
}

/// A group concurrency of N lets each group hold N leases, counted per
/// queue: the same key in another queue is another group.
pub async fn group_limit_of_n_caps_each_group_of_each_queue<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", group_limit(3)).await;
    ctx.configure("r", group_limit(2)).await;
    ctx.fill_group("q", Some("a"), 5, 0).await;
    ctx.fill_group("q", Some("b"), 5, 0).await;
    ctx.fill_group("r", Some("a"), 5, 0).await;
    let mut held = Vec::new();
    for n in 0..4 {
        held.extend(ctx.claim_as("q", 2, &format!("w{n}")).await);
    }
    assert_eq!((of_group(&held, "a"), of_group(&held, "b")), (3, 3));
    assert!(ctx.claim("q", 10).await.is_empty(), "both groups are full");
    let r = (ctx.storage.dequeue(&request(&["q", "r"], 10, "w9")).await).expect("dequeue");
    assert_eq!(
        (r.len(), of_group(&r, "a")),
        (2, 2),
        "group a of r has slots of its own, and q's groups none: {r:?}"
    );
    assert!(r.iter().all(|job| job.queue == queue("r")));
}

/// A group's own limit replaces the queue's group concurrency (higher or
/// lower), limits a group of a queue without one, reads back sorted, and
/// once removed the queue's default applies again.
pub async fn a_group_limit_overrides_the_queue_default<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", group_limit(1)).await;
    ctx.configure("r", QueueLimits::default()).await;
    ctx.set_group_limit("q", "big", Some(3)).await;
    ctx.set_group_limit("r", "slow", Some(1)).await;
    ctx.set_group_limit("q", "a", Some(2)).await;
    ctx.set_group_limit("q", "gone", Some(5)).await;
    ctx.set_group_limit("q", "gone", None).await;
    ctx.set_group_limit("q", "never-set", None).await;
    let limits = ctx.storage.group_limits().await.expect("group_limits");
    let entry = |q: &str, g: &str, limit| GroupLimit {
        queue: queue(q),
        group: group(g),
        limit,
    };
    assert_eq!(
        limits,
        vec![
            entry("q", "a", 2),
            entry("q", "big", 3),
            entry("r", "slow", 1)
        ]
    );
    let configs = ctx.configs().await;
    assert_eq!(configs.len(), 1, "r has no limits to list: {configs:?}");
    assert_eq!(configs[0].limits, group_limit(1), "read back as set");
    ctx.fill_group("q", Some("big"), 5, 0).await;
    ctx.fill_group("q", Some("small"), 5, 0).await;
    ctx.fill_group("r", Some("slow"), 3, 0).await;
    ctx.fill_group("r", Some("free"), 3, 0).await;
    let q = ctx.claim("q", 20).await;
    assert_eq!((of_group(&q, "big"), of_group(&q, "small")), (3, 1));
    let r = ctx.claim("r", 20).await;
    assert_eq!((of_group(&r, "slow"), of_group(&r, "free")), (1, 3));
    ctx.set_group_limit("q", "big", None).await;
    ctx.storage
        .ack_batch(&acks_of(&q))
        .await
        .expect("ack_batch");
    let again = ctx.claim("q", 20).await;
    assert_eq!(
        (of_group(&again, "big"), of_group(&again, "small")),
        (1, 1),
        "without its own limit, big has the queue's: {again:?}"
    );
}

/// Ack, nack (a retry and a dead letter) and release each give the
/// group's slot back to the next claim.
pub async fn ack_nack_and_release_give_a_group_slot_back<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", group_limit(1)).await;
    ctx.storage
        .enqueue_batch(
            (0..5)
                .map(|i| NewJob::new("q", json!(i)).group_key("g"))
                .collect(),
        )
        .await
        .expect("enqueue_batch");
    let job = freed_slot(&ctx, "the start").await;
    ctx.storage.ack(&lease_of(&job), None).await.expect("ack");
    let job = freed_slot(&ctx, "an ack").await;
    (ctx.storage
        .nack(&lease_of(&job), json!("e"), Retry::After(secs(600)))
        .await)
        .expect("nack");
    let job = freed_slot(&ctx, "a nack that retries").await;
    (ctx.storage
        .nack(&lease_of(&job), json!("e"), Retry::Never)
        .await)
        .expect("nack");
    let job = freed_slot(&ctx, "a nack that dead-letters").await;
    assert!(ctx.storage.release(&lease_of(&job)).await.expect("release"));
    freed_slot(&ctx, "a release").await;
}

/// The one job of group-limited queue `q` that a freed slot lets a claim
/// take (`what` freed it), checking the limit holds again after it.
async fn freed_slot<S: Storage>(ctx: &Ctx<S>, what: &str) -> Job {
    let claimed = ctx.claim("q", 10).await;
    assert_eq!(
        claimed.len(),
        1,
        "after {what}, the group's slot is free again"
    );
    assert!(
        ctx.claim("q", 10).await.is_empty(),
        "the limit holds after {what}"
    );
    claimed.into_iter().next().expect("one job")
}

/// Snooze, cancel and discard each give the group's slot back.
pub async fn snooze_cancel_and_discard_give_a_group_slot_back<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", group_limit(1)).await;
    ctx.fill_group("q", Some("g"), 4, 0).await;
    let job = freed_slot(&ctx, "the start").await;
    (ctx.storage.snooze(&lease_of(&job), secs(600)).await).expect("snooze");
    let job = freed_slot(&ctx, "a snooze").await;
    ctx.storage.cancel(job.id).await.expect("cancel");
    let job = freed_slot(&ctx, "a cancel").await;
    ctx.storage.discard(job.id).await.expect("discard");
    freed_slot(&ctx, "a discard").await;
}

/// An expired lease keeps its group's slot until reclaim gives it back,
/// whether the job returns to pending or becomes a dead letter.
pub async fn reclaim_of_an_expired_lease_gives_its_group_slot_back<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", group_limit(1)).await;
    ctx.storage
        .enqueue(NewJob::new("q", json!(0)).group_key("g").max_attempts(1))
        .await
        .expect("enqueue");
    ctx.fill_group("q", Some("g"), 2, -1).await;
    let first = ctx.claim("q", 10).await;
    assert_eq!(first.len(), 1);
    ctx.clock.advance(LEASE + secs(1));
    assert!(
        ctx.claim("q", 10).await.is_empty(),
        "an expired lease still holds its group's slot until reclaim"
    );
    let outcome = ctx.storage.reclaim_stalled(10).await.expect("reclaim");
    assert_eq!(outcome.dead_lettered, 1, "its only attempt was spent");
    let second = ctx.claim("q", 10).await;
    assert_eq!(second.len(), 1, "reclaim of a dead letter frees the slot");
    ctx.clock.advance(LEASE + secs(1));
    let outcome = ctx.storage.reclaim_stalled(10).await.expect("reclaim");
    assert_eq!(outcome.requeued, 1);
    assert_eq!(
        ctx.claim("q", 10).await.len(),
        1,
        "reclaim of a requeued job frees the slot"
    );
}

/// A claim skips the jobs of a full group, however many and however
/// good, and takes the next eligible job: one claim of several jobs, and
/// claims of one job at a time, still get the other groups' jobs and
/// those without a group. (300 jobs of the group come first: more than a
/// backend reads in one page, so a claim that stops at its first page, or
/// reads the same page again, fails here.)
pub async fn a_full_group_does_not_stall_the_others<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", group_limit(1)).await;
    ctx.fill_group("q", None, 1, 9).await;
    ctx.fill_group("q", Some("busy"), 300, 5).await;
    ctx.fill_group("q", Some("other"), 3, 0).await;
    ctx.fill_group("q", None, 1, -5).await;
    let at_once = ctx.claim("q", 4).await;
    let ungrouped = at_once.iter().filter(|job| job.group_key.is_none()).count();
    assert_eq!(
        (
            of_group(&at_once, "busy"),
            of_group(&at_once, "other"),
            ungrouped
        ),
        (1, 1, 2),
        "one claim: the best of each group and both jobs without one: {at_once:?}"
    );
    ctx.storage
        .ack_batch(&acks_of(&at_once))
        .await
        .expect("ack_batch");
    let mut taken = Vec::new();
    for n in 0..2 {
        let one = ctx.claim_as("q", 1, &format!("w{n}")).await;
        assert_eq!(one.len(), 1, "claim {n} found nothing behind a full group");
        taken.extend(one);
    }
    assert_eq!(
        (of_group(&taken, "busy"), of_group(&taken, "other")),
        (1, 1),
        "one job at a time: busy's best, then other's: {taken:?}"
    );
    assert!(ctx.claim("q", 10).await.is_empty(), "both groups are full");
}

/// Two handles on one database, as two hosts: leases taken through one
/// count against the group's limit in claims through the other, and
/// claims racing through both never hold more than the limit.
pub async fn group_limit_holds_across_handles<S: Storage>(ctx: Ctx<S>) {
    const LIMIT: usize = 2;
    ctx.configure("q", group_limit(LIMIT as u32)).await;
    ctx.fill_group("q", Some("a"), 30, 0).await;
    ctx.fill_group("q", Some("b"), 30, 0).await;
    let first = (ctx.storage.dequeue(&request(&["q"], 10, "x")).await).expect("claim");
    assert_eq!(first.len(), 2 * LIMIT);
    let second = (ctx.second().dequeue(&request(&["q"], 10, "y")).await).expect("claim");
    assert!(
        second.is_empty(),
        "the other handle claimed past the groups' limits: {second:?}"
    );
    ctx.storage
        .ack_batch(&acks_of(&first))
        .await
        .expect("ack_batch");
    for round in 0..5 {
        let claimed = ctx.racing_claims("q", 8, 3, round).await;
        let mut per_group: HashMap<String, usize> = HashMap::new();
        for job in &claimed {
            let key = job.group_key.as_ref().map(|g| g.as_str().to_owned());
            *per_group.entry(key.unwrap_or_default()).or_default() += 1;
        }
        assert_eq!(
            per_group,
            HashMap::from([("a".to_owned(), LIMIT), ("b".to_owned(), LIMIT)]),
            "round {round}: the racing claims held these per group"
        );
        ctx.second()
            .ack_batch(&acks_of(&claimed))
            .await
            .expect("ack_batch");
    }
}

/// The group key reads back wherever the job is shown: `get_job`, the
/// claim, `list_jobs`, history, and a dead letter sent back keeps it.
pub async fn group_key_round_trips_through_claim_listing_and_history<S: Storage>(ctx: Ctx<S>) {
    let id = ctx
        .enqueue(NewJob::new("q", json!(1)).group_key("tenant 7 ünï"))
        .await;
    let plain = ctx.enqueue(NewJob::new("q", json!(2))).await;
    assert_eq!(ctx.live(id).await.group_key, Some(group("tenant 7 ünï")));
    assert_eq!(ctx.live(plain).await.group_key, None);
    let filter = JobFilter {
        queue: Some(queue("q")),
        ..JobFilter::default()
    };
    let page = ctx.storage.list_jobs(&filter).await.expect("list_jobs");
    let listed: Vec<_> = page.jobs.iter().map(|j| j.group_key.clone()).collect();
    assert_eq!(listed, vec![None, Some(group("tenant 7 ünï"))]);
    let claimed = ctx.claim("q", 10).await;
    let job = claimed.iter().find(|j| j.id == id).expect("claimed");
    assert_eq!(job.group_key, Some(group("tenant 7 ünï")));
    (ctx.storage
        .nack(&lease_of(job), json!("e"), Retry::Never)
        .await)
        .expect("nack");
    assert_eq!(
        ctx.archived(id).await.group_key,
        Some(group("tenant 7 ünï"))
    );
    ctx.storage.retry_dead_letter(id).await.expect("retry");
    assert_eq!(ctx.live(id).await.group_key, Some(group("tenant 7 ünï")));
}

/// Bad input is refused with a typed error naming it, and writes
/// nothing: a group key too long or empty (alone or in a batch), a group
/// concurrency or a group's limit of 0, a limit for a queue that has no
/// config row.
pub async fn group_limits_with_invalid_input_write_nothing<S: Storage>(ctx: Ctx<S>) {
    let long = "g".repeat(queue_core::MAX_GROUP_KEY_BYTES + 1);
    assert_invalid(
        ctx.storage
            .enqueue(NewJob::new("q", json!(1)).group_key(long.clone()))
            .await,
        "group_key",
    );
    let batch = vec![
        NewJob::new("q", json!(1)).group_key("fine"),
        NewJob::new("q", json!(2)).group_key(""),
    ];
    assert_invalid(ctx.storage.enqueue_batch(batch).await, "group_key");
    assert_eq!(ctx.live_count().await, 0, "nothing was enqueued");
    ctx.configure("q", group_limit(2)).await;
    assert_invalid(
        ctx.storage
            .configure_queue(&queue("q"), &group_limit(0))
            .await,
        "group_concurrency",
    );
    assert_eq!(ctx.configs().await[0].limits, group_limit(2), "unchanged");
    assert_invalid(
        ctx.storage
            .set_group_limit(&queue("q"), &group("a"), Some(0))
            .await,
        "limit",
    );
    match ctx
        .storage
        .set_group_limit(&queue("nowhere"), &group("a"), Some(1))
        .await
    {
        Err(QueueError::NotFound { what }) => assert!(what.contains("nowhere"), "{what}"),
        other => panic!("expected NotFound for a queue without a config row, got {other:?}"),
    }
    assert_eq!(
        ctx.storage.group_limits().await.expect("group_limits"),
        vec![]
    );
    let configs = ctx.configs().await;
    assert_eq!(configs.len(), 1, "no config row was made: {configs:?}");
}

/// What a storage that does not declare
/// [`queue_core::Capability::GroupLimits`] must do, for a backend's own
/// test to call (the suite's cases run only on storages that declare it):
/// a job with a group key (alone, in a batch, in a periodic fire), a group
/// concurrency, `set_group_limit` and `group_limits` are each refused with
/// `NotSupported` naming the capability, and nothing is written.
///
/// # Panics
/// When the storage declares the capability, or accepts any of these.
pub async fn group_limits_are_refused_without_the_capability<S: Storage>(storage: &S) {
    use queue_core::Capability;
    assert!(
        !storage.capabilities().supports(Capability::GroupLimits),
        "the storage declares group limits: run the suite's cases instead"
    );
    let refused = |what: &str, result: queue_core::Result<()>| match result {
        Err(QueueError::NotSupported {
            capability: Some(Capability::GroupLimits),
            ..
        }) => {}
        other => panic!("{what}: expected NotSupported (group_limits), got {other:?}"),
    };
    let grouped = NewJob::new("q", json!(1)).group_key("g");
    refused("enqueue", storage.enqueue(grouped.clone()).await.map(drop));
    let batch = vec![NewJob::new("q", json!(0)), grouped.clone()];
    refused(
        "enqueue_batch",
        storage.enqueue_batch(batch).await.map(drop),
    );
    if storage.capabilities().supports(Capability::Periodic) {
        let fire = queue_core::PeriodicFire {
            schedule: queue_core::ScheduleName::new("s").expect("valid name"),
            fire_at: storage.now().await.expect("now"),
            next_fire_at: None,
            job: grouped,
        };
        refused(
            "enqueue_periodic",
            storage.enqueue_periodic(&fire).await.map(drop),
        );
        let schedules = storage.schedules().await.expect("schedules");
        assert!(schedules.is_empty(), "the fire was recorded: {schedules:?}");
    }
    let stats = storage.stats().await.expect("stats");
    assert!(stats.is_empty(), "a job was written: {stats:?}");
    if storage.capabilities().supports(Capability::FlowLimits) {
        refused(
            "configure_queue",
            storage.configure_queue(&queue("q"), &group_limit(1)).await,
        );
        let configs = storage.queue_configs().await.expect("queue_configs");
        assert!(configs.is_empty(), "limits were written: {configs:?}");
    }
    refused(
        "set_group_limit",
        storage
            .set_group_limit(&queue("q"), &group("g"), Some(1))
            .await,
    );
    refused("group_limits", storage.group_limits().await.map(drop));
}
