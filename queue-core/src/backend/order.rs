//! The order in which claims hand out due jobs.

use std::cmp::Reverse;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// The sort key of the contract's claim order: higher priority first, then
/// earlier `available_at`, then lower id (enqueue order).
///
/// Backends sort what a claim statement returned with it (`RETURNING`
/// carries no order) and merge per-queue scans by it, so every backend and
/// `MemoryStorage` hand out jobs in the same order. `T` is however the
/// backend holds `available_at` (a timestamp, microseconds, …).
///
/// ```
/// use queue_core::backend::claim_order;
///
/// let mut due = vec![(0, 20, 1), (5, 30, 2), (0, 10, 3)]; // (priority, available_at, id)
/// due.sort_by_key(|&(priority, at, id)| claim_order(priority, at, id));
/// assert_eq!(due, vec![(5, 30, 2), (0, 10, 3), (0, 20, 1)]);
/// ```
pub fn claim_order<T: Ord>(priority: i32, available_at: T, id: i64) -> (Reverse<i32>, T, i64) {
    (Reverse(priority), available_at, id)
}

/// A job's effective priority in a claim at `now` on a queue whose
/// [`crate::QueueLimits::priority_aging`] is `period`: `priority + floor((now
/// - available_at) / period)`, saturating at `i32::MAX`; `priority` itself
/// without aging. The period counts to the millisecond (as stored), the
/// wait to the microsecond, and a job not due yet (or `now` before
/// `available_at`) has waited nothing.
///
/// Within one priority level, a claim's order (`available_at`, then id)
/// never puts a job of higher effective priority after one of lower: an
/// aging claim may therefore take each level's first candidates in the
/// level's usual order and merge them by [`aged_claim_order`].
///
/// ```
/// use std::time::Duration;
/// use chrono::{DateTime, TimeDelta};
/// use queue_core::backend::aged_priority;
///
/// let due = DateTime::from_timestamp(1_900_000_000, 0).unwrap();
/// let minute = Some(Duration::from_secs(60));
/// assert_eq!(aged_priority(0, due, due + TimeDelta::seconds(119), minute), 1);
/// assert_eq!(aged_priority(0, due, due + TimeDelta::seconds(120), minute), 2);
/// assert_eq!(aged_priority(0, due, due + TimeDelta::seconds(120), None), 0);
/// assert_eq!(aged_priority(i32::MAX - 1, due, due + TimeDelta::days(9), minute), i32::MAX);
/// ```
pub fn aged_priority(
    priority: i32,
    available_at: DateTime<Utc>,
    now: DateTime<Utc>,
    period: Option<Duration>,
) -> i32 {
    let Some(period) = period else {
        return priority;
    };
    let period_micros = i64::try_from(period.as_millis())
        .unwrap_or(i64::MAX / 1_000)
        .max(1)
        * 1_000;
    let waited = (now - available_at)
        .num_microseconds()
        .unwrap_or(i64::MAX)
        .max(0);
    let aged = i64::from(priority) + waited / period_micros;
    i32::try_from(aged).unwrap_or(i32::MAX)
}

/// The sort key of an aging claim: [`aged_priority`] descending, then
/// `available_at`, then id ([`claim_order`] with the effective priority).
pub fn aged_claim_order(
    priority: i32,
    available_at: DateTime<Utc>,
    id: i64,
    now: DateTime<Utc>,
    period: Option<Duration>,
) -> (Reverse<i32>, DateTime<Utc>, i64) {
    claim_order(
        aged_priority(priority, available_at, now, period),
        available_at,
        id,
    )
}

/// A group's place in a fair queue's rotation
/// ([`crate::QueueLimits::fair_groups`]), as a storage keeps it: `FairTurn
/// { at: 0, taken: 0 }` for a group never served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct FairTurn {
    /// The queue's claim count (the jobs claimed from it while it was
    /// fair) when the group's turn last went behind every other's: the
    /// lower, the sooner the group is served.
    pub at: u64,
    /// The jobs of the group taken since, fewer than its weight
    /// ([`crate::GroupWeight`]; 1 by default, and then always 0).
    pub taken: u32,
}

impl FairTurn {
    /// The turn after a claim took one job of a group of `weight` (at
    /// least 1), the queue's claim count becoming `count`: the group keeps
    /// its place until it has taken `weight` jobs, then goes behind every
    /// other.
    ///
    /// ```
    /// use queue_core::backend::FairTurn;
    ///
    /// let first = FairTurn::default().take(2, 1);
    /// assert_eq!(first, FairTurn { at: 0, taken: 1 });
    /// assert_eq!(first.take(2, 2), FairTurn { at: 2, taken: 0 });
    /// assert_eq!(FairTurn::default().take(1, 5), FairTurn { at: 5, taken: 0 });
    /// ```
    #[must_use]
    pub fn take(self, weight: u32, count: u64) -> FairTurn {
        let taken = self.taken.saturating_add(1);
        if taken >= weight {
            FairTurn {
                at: count,
                taken: 0,
            }
        } else {
            FairTurn { at: self.at, taken }
        }
    }
}

/// The positions of a fair queue's claimable jobs in the order of a fair
/// claim ([`crate::QueueLimits::fair_groups`], stated in
/// [`crate::Storage::dequeue`]). `jobs` are the queue's pending jobs in
/// the claim order (effective priority descending, then `available_at`,
/// then id), each as its effective priority and group (`None`: no group
/// key, one group of its own); `turn` gives a group's [`FairTurn`] (the
/// default for a group never claimed from the queue) and `weight` its
/// weight (1 without one; the jobs without a group key always 1). The
/// order is that of claims of one job each: the next job is the first, in
/// the claim order, of the best priority's jobs of the group whose turn
/// is lowest, and taking it counts towards its group's weight
/// ([`FairTurn::take`]): once the group has taken as many jobs as its weight,
/// its turn goes above every other.
///
/// ```
/// use queue_core::backend::{FairTurn, fair_order};
///
/// // Group "a" was served at turn 7, "b" never; four jobs of "a" were
/// // enqueued before two of "b", all at priority 0.
/// let jobs = [(0, Some("a")), (0, Some("a")), (0, Some("a")), (0, Some("a")),
///             (0, Some("b")), (0, Some("b"))];
/// let turn = |group: Option<&&str>| FairTurn { at: if group == Some(&"a") { 7 } else { 0 }, taken: 0 };
/// assert_eq!(fair_order(&jobs, turn, |_| 1), vec![4, 0, 5, 1, 2, 3]);
/// // With a weight of 2, "a" takes two jobs each time its turn comes.
/// let weight = |group: Option<&&str>| if group == Some(&"a") { 2 } else { 1 };
/// assert_eq!(fair_order(&jobs, turn, weight), vec![4, 0, 1, 5, 2, 3]);
/// ```
pub fn fair_order<G: Ord>(
    jobs: &[(i32, Option<G>)],
    turn: impl Fn(Option<&G>) -> FairTurn,
    weight: impl Fn(Option<&G>) -> u32,
) -> Vec<usize> {
    // Each group's jobs, in the claim order, its turn and its weight.
    let mut groups: std::collections::BTreeMap<
        Option<&G>,
        (std::collections::VecDeque<usize>, FairTurn, u32),
    > = Default::default();
    for (place, (_, group)) in jobs.iter().enumerate() {
        groups
            .entry(group.as_ref())
            .or_insert_with(|| {
                let weight = group.as_ref().map_or(1, |g| weight(Some(g))).max(1);
                (Default::default(), turn(group.as_ref()), weight)
            })
            .0
            .push_back(place);
    }
    let mut count = groups
        .values()
        .map(|(_, turn, _)| turn.at)
        .max()
        .unwrap_or(0);
    let mut order = Vec::with_capacity(jobs.len());
    while let Some((places, group_turn, weight)) = groups
        .values_mut()
        .filter(|(places, _, _)| !places.is_empty())
        .min_by_key(|(places, group_turn, _)| {
            (Reverse(jobs[places[0]].0), group_turn.at, places[0])
        })
    {
        order.extend(places.pop_front());
        count += 1;
        *group_turn = group_turn.take(*weight, count);
    }
    order
}

/// What a storage that does not declare
/// [`crate::Capability::FairGroups`] returns from `configure_queue` with
/// fair groups set: it must not store a setting it would not apply.
///
/// # Errors
/// [`crate::QueueError::NotSupported`] when `limits.fair_groups` is set.
pub fn refuse_fair_groups(limits: &crate::QueueLimits) -> crate::Result<()> {
    if limits.fair_groups {
        Err(crate::QueueError::not_supported(
            crate::Capability::FairGroups,
            "configure_queue",
        ))
    } else {
        Ok(())
    }
}

/// What a storage that does not declare
/// [`crate::Capability::PriorityAging`] returns from `configure_queue`
/// with a priority aging period: it must not store a setting it would not
/// apply.
///
/// # Errors
/// [`crate::QueueError::NotSupported`] when `limits.priority_aging` is set.
pub fn refuse_priority_aging(limits: &crate::QueueLimits) -> crate::Result<()> {
    if limits.priority_aging.is_some() {
        Err(crate::QueueError::not_supported(
            crate::Capability::PriorityAging,
            "configure_queue",
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_900_000_000 + secs, 0).expect("in range")
    }

    #[test]
    fn fair_order_serves_groups_in_turn_within_each_priority() {
        // Priority 5: "a" twice. Priority 0: "a" three times, "b", none
        // twice. "a" was served at turn 9, jobs without a group at 4, "b"
        // never.
        let jobs = [
            (5, Some("a")),
            (5, Some("a")),
            (0, Some("a")),
            (0, Some("a")),
            (0, None),
            (0, Some("a")),
            (0, Some("b")),
            (0, None),
        ];
        let turn = |group: Option<&&str>| FairTurn {
            at: match group {
                Some(&"a") => 9,
                Some(_) => 0,
                None => 4,
            },
            taken: 0,
        };
        assert_eq!(fair_order(&jobs, turn, |_| 1), vec![0, 1, 6, 4, 2, 7, 3, 5]);
        // With every turn equal, the groups first come in the claim order
        // of their jobs; "a", served at priority 5, then waits its turn.
        assert_eq!(
            fair_order(&jobs, |_| FairTurn::default(), |_| 1),
            vec![0, 1, 4, 6, 2, 7, 3, 5]
        );
    }

    #[test]
    fn a_heavier_group_takes_its_weight_each_turn() {
        // "a" (weight 3) has six jobs, "b" (weight 1) and "c" (weight 2)
        // four each, all at priority 0, enqueued a, b, c in turn.
        let mut jobs = Vec::new();
        for _ in 0..6 {
            jobs.extend([(0, Some("a")), (0, Some("b")), (0, Some("c"))]);
        }
        let jobs: Vec<_> = (jobs.into_iter().enumerate())
            .filter(|(place, (_, group))| *group == Some("a") || place / 3 < 4)
            .map(|(_, job)| job)
            .collect();
        let weight = |group: Option<&&str>| match group {
            Some(&"a") => 3,
            Some(&"c") => 2,
            _ => 1,
        };
        let order = fair_order(&jobs, |_| FairTurn::default(), weight);
        let groups: String = (order.iter())
            .map(|&place| jobs[place].1.unwrap_or("-"))
            .collect();
        // Every turn is 0 at first, so the first round meets the groups in
        // the order of their jobs; after it, each round serves b once, c
        // twice and a three times, while they have jobs.
        assert_eq!(groups, "abcacabccaaabb");
        // A group part-way through its weight keeps its place.
        let turn = |group: Option<&&str>| match group {
            Some(&"a") => FairTurn { at: 5, taken: 2 },
            _ => FairTurn { at: 6, taken: 0 },
        };
        let order = fair_order(&jobs, turn, weight);
        assert_eq!(jobs[order[0]].1, Some("a"));
        assert_eq!(jobs[order[1]].1, Some("b"), "a's third job ended its turn");
    }

    #[test]
    fn a_job_rises_one_level_per_whole_period_from_when_it_became_due() {
        let period = Some(Duration::from_secs(10));
        assert_eq!(aged_priority(3, at(0), at(0), period), 3);
        assert_eq!(aged_priority(3, at(0), at(9), period), 3);
        assert_eq!(aged_priority(3, at(0), at(10), period), 4);
        assert_eq!(aged_priority(-5, at(0), at(35), period), -2);
        assert_eq!(aged_priority(3, at(50), at(0), period), 3, "not due yet");
        assert_eq!(aged_priority(3, at(0), at(1_000), None), 3);
        // The period counts to the millisecond, as stored.
        let odd = Some(Duration::from_micros(1_000_999));
        let after = |ms| at(0) + chrono::TimeDelta::milliseconds(ms);
        assert_eq!(aged_priority(0, at(0), after(1_999), odd), 1);
        assert_eq!(
            aged_priority(0, at(0), after(2_000), odd),
            2,
            "1 s, not 1.000999 s"
        );
    }

    #[test]
    fn aging_saturates_and_orders_ties_by_available_at_then_id() {
        let period = Some(Duration::from_secs(1));
        assert_eq!(aged_priority(i32::MAX, at(0), at(100), period), i32::MAX);
        let far = DateTime::<Utc>::MIN_UTC;
        assert_eq!(aged_priority(i32::MIN, far, at(0), period), i32::MAX);
        let mut due = [(0, at(0), 3), (2, at(19), 1), (1, at(10), 2), (0, at(0), 1)];
        due.sort_by_key(|&(p, a, id)| {
            aged_claim_order(p, a, id, at(20), Some(Duration::from_secs(10)))
        });
        // Effective priorities: 2, 2, 2 and 2 (19 s is no whole period).
        assert_eq!(
            due.map(|(_, _, id)| id),
            [1, 3, 2, 1],
            "by available_at, then id"
        );
        assert_eq!(due[0].1, at(0));
        assert_eq!(due[3].0, 2);
    }
}
