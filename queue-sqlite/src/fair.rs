//! Fair claiming between groups ([`queue_core::QueueLimits::fair_groups`]):
//! the pick of a fair queue's best jobs in the order
//! [`queue_core::Storage::dequeue`] states, and the turns a claim leaves.
//!
//! The pick lists the queue's groups with waiting jobs (a skip scan of
//! `job_queue_fair`, one probe per group, and the jobs without a group
//! key), each group's priority levels (one probe per level), and reads
//! each level's due jobs a page at a time, oldest first. A group's jobs by
//! effective priority are the merge of its levels' heads (within a level,
//! the oldest job has aged the most); the next job is the best group
//! head by priority, turn, `available_at`, id, and taking it puts its
//! group's turn behind every other ([`queue_core::backend::fair_order`]'s
//! order). So a claim reads a row or two per group and level, and the
//! jobs it takes: it grows with the groups waiting, not with any group's
//! backlog.

use std::cmp::Reverse;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use queue_core::backend::{GroupSlots, aged_priority, stored_instant};
use queue_core::{GroupKey, QueueError, QueueName};
use sqlx::{Row, SqliteConnection};

use crate::dequeue::{Candidate, candidate_of};
use crate::sql;

/// The most rows one read of a level takes (the first read takes one).
const PAGE: usize = 16;

/// The `group_key` value of `job_group_turn` for the jobs without a group.
const NO_GROUP: &str = "";

/// A group head's place in the pick: effective priority (descending), the
/// group's turn, `available_at`, id.
type FairKey = (Reverse<i32>, i64, i64, i64);

/// One priority level of one group: due jobs read and not taken yet, as
/// `(effective priority, available_at, id)`.
struct Level {
    priority: i32,
    rows: VecDeque<Candidate>,
    /// `(available_at, id)` of the last row read.
    after: (i64, i64),
    /// Every due row of the level has been read.
    done: bool,
}

/// One group of a fair queue during the pick.
struct Group {
    key: Option<GroupKey>,
    /// Its turn: stored, or given by this pick.
    turn: i64,
    levels: Vec<Level>,
}

fn decode(error: QueueError) -> sqlx::Error {
    sqlx::Error::Decode(Box::new(error))
}

/// The best `cap` claimable jobs of fair `queue` at `now`, in its fair
/// order, within its groups' `slots`, each with its group; with
/// `period`, by effective priority (which each candidate carries, for
/// the merge across queues).
pub(crate) async fn pick_fair(
    conn: &mut SqliteConnection,
    now: i64,
    queue: &QueueName,
    cap: usize,
    mut slots: GroupSlots,
    period: Option<Duration>,
) -> Result<Vec<(Candidate, Option<GroupKey>)>, sqlx::Error> {
    if cap == 0 {
        return Ok(Vec::new());
    }
    let at = stored_instant("time", now).map_err(decode)?;
    let mut groups = groups_of(conn, queue, &slots).await?;
    let mut next_turn = groups.iter().map(|g| g.turn).max().unwrap_or(0);
    let mut picked = Vec::new();
    while picked.len() < cap {
        let page = (cap - picked.len()).min(PAGE);
        // The best head so far: its key, group and level.
        let mut best: Option<(FairKey, usize, usize)> = None;
        for (g, group) in groups.iter_mut().enumerate() {
            let mut head: Option<(Candidate, usize)> = None;
            for (l, level) in group.levels.iter_mut().enumerate() {
                if level.rows.is_empty() && !level.done {
                    read_level(conn, now, queue, group.key.as_ref(), level, page, |row| {
                        let due = stored_instant("available_at", row.1).map_err(decode)?;
                        Ok((aged_priority(row.0, due, at, period), row.1, row.2))
                    })
                    .await?;
                }
                if let Some(&row) = level.rows.front()
                    && head.is_none_or(|(h, _)| {
                        (Reverse(row.0), row.1, row.2) < (Reverse(h.0), h.1, h.2)
                    })
                {
                    head = Some((row, l));
                }
            }
            let Some(((priority, available_at, id), l)) = head else {
                continue;
            };
            let key = (Reverse(priority), group.turn, available_at, id);
            if best.as_ref().is_none_or(|(b, _, _)| key < *b) {
                best = Some((key, g, l));
            }
        }
        let Some((_, g, l)) = best else { break };
        let group = &mut groups[g];
        let Some(row) = group.levels[l].rows.pop_front() else {
            break;
        };
        next_turn += 1;
        group.turn = next_turn;
        if slots.take(group.key.as_ref()) {
            picked.push((row, group.key.clone()));
        } else {
            // Full: none of its other jobs can be taken by this claim.
            group.levels.clear();
        }
    }
    Ok(picked)
}

/// The groups of `queue` with unleased jobs (and the jobs without a group
/// key, as one), but those `slots` says are full, with their turns and
/// their priority levels, highest first.
async fn groups_of(
    conn: &mut SqliteConnection,
    queue: &QueueName,
    slots: &GroupSlots,
) -> Result<Vec<Group>, sqlx::Error> {
    let turns: HashMap<String, i64> = sqlx::query(sql::FAIR_TURNS)
        .bind(queue.as_str())
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|row| Ok((row.try_get("group_key")?, row.try_get("turn")?)))
        .collect::<Result<_, sqlx::Error>>()?;
    let full = slots.full_groups();
    let mut keys: Vec<Option<GroupKey>> = vec![None];
    let mut after = NO_GROUP.to_owned();
    while let Some(next) = sqlx::query_scalar::<_, Option<String>>(sql::FAIR_NEXT_GROUP)
        .bind(queue.as_str())
        .bind(&after)
        .fetch_one(&mut *conn)
        .await?
    {
        let key = GroupKey::new(next.clone()).map_err(decode)?;
        if !full.contains(&&key) {
            keys.push(Some(key));
        }
        after = next;
    }
    let mut groups = Vec::with_capacity(keys.len());
    for key in keys {
        let name = key.as_ref().map(GroupKey::as_str);
        let mut levels = Vec::new();
        let mut bound = i64::from(i32::MAX) + 1;
        while let Some(priority) = sqlx::query_scalar::<_, i32>(sql::FAIR_GROUP_LEVEL)
            .bind(queue.as_str())
            .bind(name)
            .bind(bound)
            .fetch_optional(&mut *conn)
            .await?
        {
            bound = i64::from(priority);
            levels.push(Level {
                priority,
                rows: VecDeque::new(),
                after: (i64::MIN, i64::MIN),
                done: false,
            });
        }
        let turn = turns.get(name.unwrap_or(NO_GROUP)).copied().unwrap_or(0);
        groups.push(Group { key, turn, levels });
    }
    Ok(groups)
}

/// Reads the next page of `level` of group `key` (one row on its first
/// read, up to `page` after), each row as `keyed` makes it.
async fn read_level(
    conn: &mut SqliteConnection,
    now: i64,
    queue: &QueueName,
    key: Option<&GroupKey>,
    level: &mut Level,
    page: usize,
    keyed: impl Fn(Candidate) -> Result<Candidate, sqlx::Error>,
) -> Result<(), sqlx::Error> {
    let rows = if level.after.1 == i64::MIN {
        1
    } else {
        page.max(1)
    };
    let read = sqlx::query(sql::FAIR_LEVEL_PICK)
        .bind(queue.as_str())
        .bind(key.map(GroupKey::as_str))
        .bind(level.priority)
        .bind(now)
        .bind(level.after.0)
        .bind(level.after.1)
        .bind(i64::try_from(rows).unwrap_or(i64::MAX))
        .fetch_all(&mut *conn)
        .await?;
    level.done = read.len() < rows;
    for row in read {
        let stored = candidate_of(&row)?;
        level.after = (stored.1, stored.2);
        level.rows.push_back(keyed(stored)?);
    }
    Ok(())
}

/// Advances the turns of the fair queues' groups for `claimed` (in the
/// order the claim returns them), each job's queue and group found by
/// `fair` (jobs of other queues are not there): each job advances its
/// queue's claim count by one and sets its group's turn to it.
pub(crate) async fn advance_turns(
    conn: &mut SqliteConnection,
    claimed: &[Candidate],
    fair: &HashMap<i64, (QueueName, Option<GroupKey>)>,
) -> Result<(), sqlx::Error> {
    let mut queues: Vec<(&QueueName, Vec<Option<&GroupKey>>)> = Vec::new();
    for &(_, _, id) in claimed {
        let Some((queue, group)) = fair.get(&id) else {
            continue;
        };
        match queues.iter_mut().find(|(q, _)| *q == queue) {
            Some((_, groups)) => groups.push(group.as_ref()),
            None => queues.push((queue, vec![group.as_ref()])),
        }
    }
    for (queue, groups) in queues {
        let taken = i64::try_from(groups.len()).unwrap_or(i64::MAX);
        let count: i64 = sqlx::query_scalar(sql::FAIR_COUNT)
            .bind(queue.as_str())
            .bind(taken)
            .fetch_one(&mut *conn)
            .await?;
        let mut last: Vec<(&str, i64)> = Vec::new();
        for (k, group) in groups.into_iter().enumerate() {
            let name = group.map_or(NO_GROUP, GroupKey::as_str);
            let turn = count - taken + 1 + i64::try_from(k).unwrap_or(i64::MAX);
            match last.iter_mut().find(|(n, _)| *n == name) {
                Some(entry) => entry.1 = turn,
                None => last.push((name, turn)),
            }
        }
        for (name, turn) in last {
            sqlx::query(sql::FAIR_TURN)
                .bind(queue.as_str())
                .bind(name)
                .bind(turn)
                .execute(&mut *conn)
                .await?;
        }
    }
    Ok(())
}
