//! Fair claiming between groups ([`crate::QueueLimits::fair_groups`]) for
//! a storage whose claim runs in Rust over indexed reads: the pick of a
//! fair queue's best jobs in the order [`crate::Storage::dequeue`] states
//! ([`fair_order`](super::fair_order)'s), over whatever reads the storage
//! gives it through [`FairReader`].
//!
//! The pick lists the queue's groups (one probe per group: a skip scan of
//! an index led by the queue and the group key), each group's priority
//! levels (one probe per level), and reads each level's due jobs a page
//! at a time, oldest first. A group's jobs by effective priority are the
//! merge of its levels' heads (within a level, the oldest job has aged
//! the most); the next job is the best group head by effective priority,
//! turn, `available_at`, id, and taking it puts its group's turn behind
//! every other. So a claim reads a row or two per group and level, and
//! the jobs it takes: it grows with the groups waiting, not with any
//! group's backlog.

use std::cmp::Reverse;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{FairTurn, GroupSlots, aged_priority};
use crate::GroupKey;

/// The most rows one read of a level takes (the first read takes one).
const PAGE: usize = 16;

/// A claimable job as a fair pick reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FairRow {
    /// Its id.
    pub id: i64,
    /// Its stored priority (a [`FairPick`] carries the effective one).
    pub priority: i32,
    /// When it became (or becomes) due.
    pub available_at: DateTime<Utc>,
}

/// A job a fair pick takes, in the pick's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FairPick {
    /// Its id.
    pub id: i64,
    /// Its effective priority at the claim's now ([`aged_priority`]), by
    /// which a claim over several queues merges this queue's list with the
    /// others'.
    pub priority: i32,
    /// When it became due.
    pub available_at: DateTime<Utc>,
    /// Its group (`None`: no group key), whose turn the claim advances.
    pub group: Option<GroupKey>,
    /// Its group's [`FairTurn::taken`] once it is taken: 0 when taking it
    /// put the group's turn behind every other (the storage then stores
    /// the queue's claim count at this job as the group's turn), else the
    /// jobs the group has taken towards its weight (its turn stays).
    pub taken: u32,
}

/// The reads of one fair queue a storage gives [`pick_fair`], all in the
/// claim's transaction. "Unleased" means not leased; "claimable" also due
/// at the claim's now, with attempts left, and the queue not paused.
#[async_trait]
pub trait FairReader: Send {
    /// The storage's error.
    type Error: Send;

    /// Each group's stored [`FairTurn`] (`None`: the jobs without a group
    /// key). A group without one has the default turn.
    async fn turns(&mut self) -> Result<Vec<(Option<GroupKey>, FairTurn)>, Self::Error>;

    /// The groups of the queue given a weight ([`crate::GroupWeight`]);
    /// every other has weight 1. A storage that does not declare
    /// [`crate::Capability::GroupWeights`] keeps this default: none.
    async fn weights(&mut self) -> Result<Vec<(GroupKey, u32)>, Self::Error> {
        Ok(Vec::new())
    }

    /// The least group key above `after` (`None`: the first) among the
    /// queue's jobs, unleased ones at least: a group whose jobs are all
    /// leased may be answered, and then has no levels. `None` past the last.
    async fn next_group(
        &mut self,
        after: Option<&GroupKey>,
    ) -> Result<Option<GroupKey>, Self::Error>;

    /// The highest priority below `below` among the unleased jobs of
    /// `group` (`None`: the jobs without a group key).
    async fn next_level(
        &mut self,
        group: Option<&GroupKey>,
        below: i64,
    ) -> Result<Option<i32>, Self::Error>;

    /// Up to `rows` claimable jobs of `group` at `priority`, after the job
    /// at (`available_at`, id) `after` (`None`: from the first), in that
    /// order.
    async fn level_page(
        &mut self,
        group: Option<&GroupKey>,
        priority: i32,
        after: Option<(DateTime<Utc>, i64)>,
        rows: usize,
    ) -> Result<Vec<FairRow>, Self::Error>;
}

/// A head's place in the pick: effective priority (descending), the
/// group's turn, `available_at`, id.
type FairKey = (Reverse<i32>, u64, DateTime<Utc>, i64);

/// One priority level of one group: due jobs read and not taken yet, each
/// with its effective priority.
struct Level {
    priority: i32,
    rows: VecDeque<(i32, FairRow)>,
    /// The last row read.
    after: Option<(DateTime<Utc>, i64)>,
    /// Every claimable row of the level has been read.
    done: bool,
}

/// One group of a fair queue during the pick.
struct Group {
    key: Option<GroupKey>,
    /// Its turn: stored, or given by this pick.
    turn: FairTurn,
    /// Its weight (at least 1).
    weight: u32,
    levels: Vec<Level>,
}

/// The best `cap` claimable jobs of a fair queue at `now`, in its fair
/// order, within its groups' `slots`; with `period` (the queue's
/// [`crate::QueueLimits::priority_aging`]), by effective priority.
///
/// # Errors
/// What `reader` returns.
pub async fn pick_fair<R: FairReader>(
    reader: &mut R,
    now: DateTime<Utc>,
    cap: usize,
    mut slots: GroupSlots,
    period: Option<Duration>,
) -> Result<Vec<FairPick>, R::Error> {
    if cap == 0 {
        return Ok(Vec::new());
    }
    let mut groups = groups_of(reader, &slots).await?;
    let mut count = groups.iter().map(|g| g.turn.at).max().unwrap_or(0);
    let mut picked = Vec::new();
    while picked.len() < cap {
        let page = (cap - picked.len()).min(PAGE);
        // The best head so far: its key, group and level.
        let mut best: Option<(FairKey, usize, usize)> = None;
        for (g, group) in groups.iter_mut().enumerate() {
            let mut head: Option<(FairKey, usize)> = None;
            for (l, level) in group.levels.iter_mut().enumerate() {
                if level.rows.is_empty() && !level.done {
                    read_level(reader, group.key.as_ref(), level, page, now, period).await?;
                }
                if let Some(&(priority, row)) = level.rows.front() {
                    let key = (Reverse(priority), group.turn.at, row.available_at, row.id);
                    if head.is_none_or(|(h, _)| key < h) {
                        head = Some((key, l));
                    }
                }
            }
            if let Some((key, l)) = head
                && best.as_ref().is_none_or(|(b, _, _)| key < *b)
            {
                best = Some((key, g, l));
            }
        }
        let Some((_, g, l)) = best else { break };
        let group = &mut groups[g];
        let Some((priority, row)) = group.levels[l].rows.pop_front() else {
            break;
        };
        if slots.take(group.key.as_ref()) {
            count += 1;
            group.turn = group.turn.take(group.weight, count);
            picked.push(FairPick {
                id: row.id,
                priority,
                available_at: row.available_at,
                group: group.key.clone(),
                taken: group.turn.taken,
            });
        } else {
            // Full: none of its other jobs can be taken by this claim.
            group.levels.clear();
        }
    }
    Ok(picked)
}

/// The queue's groups with unleased jobs (and the jobs without a group
/// key, as one), but those `slots` says are full, with their turns and
/// their priority levels, highest first.
async fn groups_of<R: FairReader>(
    reader: &mut R,
    slots: &GroupSlots,
) -> Result<Vec<Group>, R::Error> {
    let turns: HashMap<Option<GroupKey>, FairTurn> = reader.turns().await?.into_iter().collect();
    let weights: HashMap<GroupKey, u32> = reader.weights().await?.into_iter().collect();
    let full = slots.full_groups();
    let mut keys: Vec<Option<GroupKey>> = vec![None];
    let mut after: Option<GroupKey> = None;
    while let Some(next) = reader.next_group(after.as_ref()).await? {
        if !full.contains(&&next) {
            keys.push(Some(next.clone()));
        }
        after = Some(next);
    }
    let mut groups = Vec::with_capacity(keys.len());
    for key in keys {
        let mut levels = Vec::new();
        // Above every priority: the first probe finds the highest level.
        let mut bound = i64::from(i32::MAX) + 1;
        while let Some(priority) = reader.next_level(key.as_ref(), bound).await? {
            bound = i64::from(priority);
            levels.push(Level {
                priority,
                rows: VecDeque::new(),
                after: None,
                done: false,
            });
        }
        let turn = turns.get(&key).copied().unwrap_or_default();
        let weight = (key.as_ref())
            .and_then(|key| weights.get(key))
            .map_or(1, |weight| (*weight).max(1));
        groups.push(Group {
            key,
            turn,
            weight,
            levels,
        });
    }
    Ok(groups)
}

/// Reads the next page of `level` of group `key` (one row on its first
/// read, up to `page` after), each row with its effective priority.
async fn read_level<R: FairReader>(
    reader: &mut R,
    key: Option<&GroupKey>,
    level: &mut Level,
    page: usize,
    now: DateTime<Utc>,
    period: Option<Duration>,
) -> Result<(), R::Error> {
    let rows = if level.after.is_none() {
        1
    } else {
        page.max(1)
    };
    let read = reader
        .level_page(key, level.priority, level.after, rows)
        .await?;
    level.done = read.len() < rows;
    for row in read {
        level.after = Some((row.available_at, row.id));
        let effective = aged_priority(row.priority, row.available_at, now, period);
        level.rows.push_back((effective, row));
    }
    Ok(())
}

/// Up to `limit` of `lists` (each a queue's candidates in its own order:
/// a fair queue's fair order, any other's claim order), taken one at a
/// time from the list whose next candidate comes first by `order` (the
/// claim order, by effective priority): how a claim over several queues
/// merges them, job by job, as [`crate::Storage::dequeue`] states. For
/// lists each sorted by `order`, the first `limit` of them all.
pub fn merge_by_next<T, K: Ord>(
    lists: Vec<Vec<T>>,
    limit: usize,
    order: impl Fn(&T) -> K,
) -> Vec<T> {
    let mut lists: Vec<VecDeque<T>> = lists.into_iter().map(VecDeque::from).collect();
    let mut merged = Vec::new();
    while merged.len() < limit {
        let next = (lists.iter_mut())
            .filter(|list| !list.is_empty())
            .min_by_key(|list| list.front().map(&order))
            .and_then(VecDeque::pop_front);
        match next {
            Some(candidate) => merged.push(candidate),
            None => break,
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use chrono::TimeDelta;
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    use super::*;
    use crate::backend::fair_order;

    /// A job held in memory: id, priority, available_at, group, leased.
    type Stored = (i64, i32, DateTime<Utc>, Option<GroupKey>, bool);

    /// A fair queue held in memory: what each read answers, and how many
    /// reads the pick made.
    struct Jobs {
        rows: Vec<Stored>,
        turns: Vec<(Option<GroupKey>, FairTurn)>,
        weights: Vec<(GroupKey, u32)>,
        now: DateTime<Utc>,
        reads: usize,
    }

    #[async_trait]
    impl FairReader for Jobs {
        type Error = std::convert::Infallible;

        async fn turns(&mut self) -> Result<Vec<(Option<GroupKey>, FairTurn)>, Self::Error> {
            self.reads += 1;
            Ok(self.turns.clone())
        }

        async fn weights(&mut self) -> Result<Vec<(GroupKey, u32)>, Self::Error> {
            self.reads += 1;
            Ok(self.weights.clone())
        }

        async fn next_group(
            &mut self,
            after: Option<&GroupKey>,
        ) -> Result<Option<GroupKey>, Self::Error> {
            self.reads += 1;
            Ok((self.rows.iter())
                .filter_map(|r| r.3.clone())
                .filter(|g| after.is_none_or(|a| g > a))
                .min())
        }

        async fn next_level(
            &mut self,
            group: Option<&GroupKey>,
            below: i64,
        ) -> Result<Option<i32>, Self::Error> {
            self.reads += 1;
            Ok((self.rows.iter())
                .filter(|r| !r.4 && r.3.as_ref() == group && i64::from(r.1) < below)
                .map(|r| r.1)
                .max())
        }

        async fn level_page(
            &mut self,
            group: Option<&GroupKey>,
            priority: i32,
            after: Option<(DateTime<Utc>, i64)>,
            rows: usize,
        ) -> Result<Vec<FairRow>, Self::Error> {
            self.reads += 1;
            let mut page: Vec<FairRow> = (self.rows.iter())
                .filter(|r| !r.4 && r.3.as_ref() == group && r.1 == priority && r.2 <= self.now)
                .filter(|r| after.is_none_or(|a| (r.2, r.0) > a))
                .map(|r| FairRow {
                    id: r.0,
                    priority: r.1,
                    available_at: r.2,
                })
                .collect();
            page.sort_by_key(|r| (r.available_at, r.id));
            page.truncate(rows);
            Ok(page)
        }
    }

    /// Runs a future that never waits (the reads above answer at once).
    fn ready<T>(future: impl Future<Output = T>) -> T {
        let mut future = pin!(future);
        match future
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            Poll::Ready(value) => value,
            Poll::Pending => unreachable!("the in-memory reads never wait"),
        }
    }

    fn key(name: &str) -> GroupKey {
        GroupKey::new(name.to_owned()).expect("a valid group key")
    }

    #[test]
    fn the_pick_is_the_fair_order_of_every_claimable_job() {
        let start = DateTime::from_timestamp(1_900_000_000, 0).expect("a valid instant");
        let now = start + TimeDelta::seconds(600);
        for seed in 0..200 {
            let mut rng = StdRng::seed_from_u64(seed);
            let groups = [None, Some(key("a")), Some(key("b")), Some(key("c"))];
            let rows: Vec<_> = (0..rng.random_range(0..60))
                .map(|id| {
                    (
                        id,
                        rng.random_range(0..3),
                        start + TimeDelta::seconds(rng.random_range(0..700)),
                        groups[rng.random_range(0..groups.len())].clone(),
                        rng.random_bool(0.1),
                    )
                })
                .collect();
            let mut turns = Vec::new();
            let mut weights = Vec::new();
            for group in &groups {
                let weight = if rng.random_bool(0.5) {
                    rng.random_range(1..4)
                } else {
                    1
                };
                if rng.random_bool(0.5) {
                    let turn = FairTurn {
                        at: rng.random_range(0..10),
                        taken: rng.random_range(0..weight),
                    };
                    turns.push((group.clone(), turn));
                }
                if let Some(group) = group
                    && weight > 1
                {
                    weights.push((group.clone(), weight));
                }
            }
            let period_secs = rng.random_range(60..300);
            let period = rng
                .random_bool(0.5)
                .then_some(Duration::from_secs(period_secs));
            let cap = rng.random_range(1..40);
            let mut reader = Jobs {
                rows: rows.clone(),
                turns: turns.clone(),
                weights: weights.clone(),
                now,
                reads: 0,
            };
            let picked = ready(pick_fair(
                &mut reader,
                now,
                cap,
                GroupSlots::default(),
                period,
            ))
            .expect("infallible");

            // The reference: every claimable job in the claim order by
            // effective priority, then fair_order over it.
            let mut due: Vec<_> = (rows.iter())
                .filter(|r| !r.4 && r.2 <= now)
                .map(|r| (aged_priority(r.1, r.2, now, period), r.2, r.0, r.3.clone()))
                .collect();
            due.sort_by_key(|d| (Reverse(d.0), d.1, d.2));
            let jobs: Vec<_> = due.iter().map(|d| (d.0, d.3.clone())).collect();
            let turn = |g: Option<&GroupKey>| {
                (turns.iter())
                    .find(|(t, _)| t.as_ref() == g)
                    .map_or(FairTurn::default(), |(_, t)| *t)
            };
            let weight = |g: Option<&GroupKey>| {
                (weights.iter())
                    .find(|(w, _)| Some(w) == g)
                    .map_or(1, |(_, w)| *w)
            };
            let expected: Vec<i64> = (fair_order(&jobs, turn, weight).into_iter())
                .take(cap)
                .map(|place| due[place].2)
                .collect();
            let got: Vec<i64> = picked.iter().map(|p| p.id).collect();
            assert_eq!(got, expected, "seed {seed}");
            // Each pick's `taken` is its group's turn replayed job by job.
            let mut replay: HashMap<Option<GroupKey>, FairTurn> = turns.iter().cloned().collect();
            let mut count = turns.iter().map(|(_, t)| t.at).max().unwrap_or(0);
            for pick in &picked {
                count += 1;
                let at = replay.entry(pick.group.clone()).or_default();
                *at = at.take(weight(pick.group.as_ref()), count);
                assert_eq!(pick.taken, at.taken, "seed {seed}, job {}", pick.id);
            }
        }
    }

    #[test]
    fn a_backlog_costs_reads_per_group_not_per_job() {
        let now = DateTime::from_timestamp(1_900_000_000, 0).expect("a valid instant");
        let mut rows: Vec<_> = (0..10_000)
            .map(|id| (id, 0, now, Some(key("big")), false))
            .collect();
        rows.push((10_000, 0, now, Some(key("small")), false));
        let mut reader = Jobs {
            rows,
            turns: vec![(Some(key("big")), FairTurn { at: 5, taken: 0 })],
            weights: Vec::new(),
            now,
            reads: 0,
        };
        let picked =
            ready(pick_fair(&mut reader, now, 2, GroupSlots::default(), None)).expect("infallible");
        let ids: Vec<i64> = picked.iter().map(|p| p.id).collect();
        assert_eq!(ids, vec![10_000, 0], "the small group's job first");
        // turns, weights, 3 group probes, a level probe and its end per
        // group (3 groups: none, big, small), a first page per group with
        // jobs and one more page of "big"'s.
        assert!(reader.reads <= 15, "{} reads", reader.reads);
    }

    #[test]
    fn lists_merge_by_their_next_candidate() {
        // A fair list out of claim order beside a sorted one.
        let fair = vec![5, 1, 6];
        let plain = vec![2, 3, 7];
        assert_eq!(
            merge_by_next(vec![fair, plain], 5, |n| *n),
            vec![2, 3, 5, 1, 6]
        );
        assert_eq!(
            merge_by_next(vec![vec![1, 4], vec![2, 3]], 9, |n| *n),
            vec![1, 2, 3, 4]
        );
    }

    #[test]
    fn a_group_that_fills_up_is_left_out() {
        let now = DateTime::from_timestamp(1_900_000_000, 0).expect("a valid instant");
        let rows: Vec<_> = (0..6)
            .map(|id| (id, 0, now, Some(key(if id < 4 { "a" } else { "b" })), false))
            .collect();
        let mut reader = Jobs {
            rows,
            turns: Vec::new(),
            weights: Vec::new(),
            now,
            reads: 0,
        };
        let slots = GroupSlots::new(Some(1), []);
        let picked = ready(pick_fair(&mut reader, now, 6, slots, None)).expect("infallible");
        let ids: Vec<i64> = picked.iter().map(|p| p.id).collect();
        assert_eq!(ids, vec![0, 4], "one job of each group, then both are full");
    }
}
