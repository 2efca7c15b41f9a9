//! Weights between a fair queue's groups
//! ([`queue_core::Capability::GroupWeights`]): a group of weight `w` takes
//! `w` jobs in a row each time its turn comes, counted across claims and
//! handles.

use std::collections::HashMap;

use queue_core::{GroupWeight, MAX_GROUP_WEIGHT, QueueError, Storage};

use super::fairness::{fair, groups};
use super::groups::group;
use super::{Ctx, assert_invalid, queue, request};

impl<S: Storage> Ctx<S> {
    /// Gives `name` of `queue_name` its own weight, or removes it.
    pub async fn set_group_weight(&self, queue_name: &str, name: &str, weight: Option<u32>) {
        self.storage
            .set_group_weight(&queue(queue_name), &group(name), weight)
            .await
            .expect("set_group_weight");
    }
}

/// A group of weight 3 takes three jobs each time its turn comes, a group
/// without a weight one; a claim of two and claims of one count towards
/// the same weight.
pub async fn a_weighted_group_takes_its_weight_each_turn<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", fair()).await;
    ctx.set_group_weight("q", "a", Some(3)).await;
    ctx.fill_group("q", Some("a"), 6, 0).await;
    ctx.fill_group("q", Some("b"), 4, 0).await;
    assert_eq!(groups(&ctx.claim("q", 2).await), ["a", "a"]);
    assert_eq!(
        ctx.claim_groups_one_by_one("q", 8).await,
        ["a", "b", "a", "a", "a", "b", "b", "b"],
        "a's third job ends its turn; then three of a for one of b"
    );
}

/// Removing a weight gives the group weight 1 from its next job on;
/// setting it again gives the group its weight at its next turn.
pub async fn a_changed_weight_applies_from_the_next_job<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", fair()).await;
    ctx.set_group_weight("q", "a", Some(2)).await;
    ctx.fill_group("q", Some("a"), 6, 0).await;
    ctx.fill_group("q", Some("b"), 4, 0).await;
    assert_eq!(groups(&ctx.claim("q", 3).await), ["a", "a", "b"]);
    ctx.set_group_weight("q", "a", None).await;
    assert_eq!(
        groups(&ctx.claim("q", 4).await),
        ["a", "b", "a", "b"],
        "weight 1 again: the groups alternate"
    );
    ctx.set_group_weight("q", "a", Some(2)).await;
    assert_eq!(groups(&ctx.claim("q", 3).await), ["a", "a", "b"]);
}

/// Two handles on one database, as two hosts: a weight set through one
/// orders the claims of the other, and the jobs a group takes towards its
/// weight count through either.
pub async fn group_weights_bind_claims_through_another_handle<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", fair()).await;
    ctx.set_group_weight("q", "a", Some(2)).await;
    let second = ctx.second();
    assert_eq!(
        second.group_weights().await.expect("group_weights"),
        vec![GroupWeight {
            queue: queue("q"),
            group: group("a"),
            weight: 2,
        }]
    );
    ctx.fill_group("q", Some("a"), 4, 0).await;
    ctx.fill_group("q", Some("b"), 2, 0).await;
    assert_eq!(groups(&ctx.claim("q", 1).await), ["a"]);
    let other = (second.dequeue(&request(&["q"], 1, "other")))
        .await
        .expect("dequeue");
    assert_eq!(
        groups(&other),
        ["a"],
        "a's second job, counted across handles"
    );
    assert_eq!(groups(&ctx.claim("q", 1).await), ["b"]);
    let other = (second.dequeue(&request(&["q"], 3, "other")))
        .await
        .expect("dequeue");
    assert_eq!(groups(&other), ["a", "a", "b"]);
}

/// Weights read back sorted by queue, then group; removing one that is
/// not set does nothing. Bad input is refused with a typed error naming
/// it and writes nothing: a weight of 0 or above the most, a weight for a
/// queue without a config row.
pub async fn group_weights_read_back_and_refuse_bad_input<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", fair()).await;
    ctx.configure("r", fair()).await;
    ctx.set_group_weight("r", "z", Some(MAX_GROUP_WEIGHT)).await;
    ctx.set_group_weight("q", "b", Some(2)).await;
    ctx.set_group_weight("q", "a", Some(5)).await;
    ctx.set_group_weight("q", "a", Some(3)).await;
    ctx.set_group_weight("q", "gone", Some(4)).await;
    ctx.set_group_weight("q", "gone", None).await;
    ctx.set_group_weight("q", "never-set", None).await;
    let entry = |q: &str, g: &str, weight| GroupWeight {
        queue: queue(q),
        group: group(g),
        weight,
    };
    let expected = vec![
        entry("q", "a", 3),
        entry("q", "b", 2),
        entry("r", "z", MAX_GROUP_WEIGHT),
    ];
    assert_eq!(
        ctx.storage.group_weights().await.expect("group_weights"),
        expected
    );
    for weight in [0, MAX_GROUP_WEIGHT + 1] {
        assert_invalid(
            ctx.storage
                .set_group_weight(&queue("q"), &group("a"), Some(weight))
                .await,
            "weight",
        );
    }
    match ctx
        .storage
        .set_group_weight(&queue("nowhere"), &group("a"), Some(2))
        .await
    {
        Err(QueueError::NotFound { what }) => assert!(what.contains("nowhere"), "{what}"),
        other => panic!("expected NotFound for a queue without a config row, got {other:?}"),
    }
    assert_eq!(
        ctx.storage.group_weights().await.expect("group_weights"),
        expected,
        "nothing written"
    );
}

/// Racing claims of one job each through two handles, as busy hosts: the
/// claims of a fair queue run one at a time, each after the turns the one
/// before it left, so over whole rounds each group takes exactly its
/// weight's share (a claim that read the turns from before the lock it
/// waited for would hand out another share).
pub async fn racing_claims_give_each_group_its_weight<S: Storage>(ctx: Ctx<S>) {
    ctx.configure("q", fair()).await;
    ctx.set_group_weight("q", "a", Some(2)).await;
    ctx.fill_group("q", Some("a"), 40, 0).await;
    ctx.fill_group("q", Some("b"), 20, 0).await;
    ctx.fill_group("q", Some("c"), 20, 0).await;
    // Ten rounds of four claims of one job, polled together on this task
    // through both handles in turn: every round takes a round of the
    // rotation (a twice, b and c once), whatever order the claims run in.
    let mut per_group: HashMap<String, usize> = HashMap::new();
    for round in 0..10 {
        let claimed = ctx.racing_claims("q", 4, 1, round).await;
        assert_eq!(claimed.len(), 4, "round {round}: {claimed:?}");
        for group in groups(&claimed) {
            *per_group.entry(group).or_default() += 1;
        }
        let expected = HashMap::from([
            ("a".to_owned(), 2 * (round + 1)),
            ("b".to_owned(), round + 1),
            ("c".to_owned(), round + 1),
        ]);
        assert_eq!(per_group, expected, "after round {round}");
    }
}
