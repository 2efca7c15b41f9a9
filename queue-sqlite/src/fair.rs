//! Fair claiming between groups ([`queue_core::QueueLimits::fair_groups`]):
//! the reads [`queue_core::backend::pick_fair`] makes of a fair queue
//! (its groups by a skip scan of `job_queue_fair`, one probe per group,
//! each group's levels and due jobs by ranges of the same index), and the
//! turns a claim leaves.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use queue_core::backend::{
    FairReader, FairRow, FairTurn, GroupSlots, corrupt, pick_fair, stored_count, stored_instant,
};
use queue_core::{GroupKey, QueueError, QueueName, async_trait};
use sqlx::{Row, SqliteConnection};

use crate::dequeue::{Candidate, candidate_of};
use crate::sql;

/// The `group_key` value of `job_group_turn` for the jobs without a group.
const NO_GROUP: &str = "";

fn decode(error: QueueError) -> sqlx::Error {
    sqlx::Error::Decode(Box::new(error))
}

fn group_of(name: String) -> Result<Option<GroupKey>, sqlx::Error> {
    if name == NO_GROUP {
        return Ok(None);
    }
    GroupKey::new(name).map(Some).map_err(decode)
}

/// One fair queue's reads in the claim's transaction, at `now`.
struct Reads<'c> {
    conn: &'c mut SqliteConnection,
    queue: &'c QueueName,
    now: i64,
}

#[async_trait]
impl FairReader for Reads<'_> {
    type Error = sqlx::Error;

    async fn turns(&mut self) -> Result<Vec<(Option<GroupKey>, FairTurn)>, sqlx::Error> {
        let rows = sqlx::query(sql::FAIR_TURNS)
            .bind(self.queue.as_str())
            .fetch_all(&mut *self.conn)
            .await?;
        rows.iter()
            .map(|row| {
                let at: i64 = row.try_get("turn")?;
                let turn = FairTurn {
                    at: u64::try_from(at).map_err(|_| decode(corrupt("turn", at)))?,
                    taken: stored_count("taken", row.try_get::<i64, _>("taken")?)
                        .map_err(decode)?,
                };
                Ok((group_of(row.try_get("group_key")?)?, turn))
            })
            .collect()
    }

    async fn weights(&mut self) -> Result<Vec<(GroupKey, u32)>, sqlx::Error> {
        let rows = sqlx::query(sql::FAIR_WEIGHTS)
            .bind(self.queue.as_str())
            .fetch_all(&mut *self.conn)
            .await?;
        rows.iter()
            .map(|row| {
                let group =
                    GroupKey::new(row.try_get::<String, _>("group_key")?).map_err(decode)?;
                let weight =
                    stored_count("weight", row.try_get::<i64, _>("weight")?).map_err(decode)?;
                Ok((group, weight))
            })
            .collect()
    }

    async fn next_group(
        &mut self,
        after: Option<&GroupKey>,
    ) -> Result<Option<GroupKey>, sqlx::Error> {
        let next = sqlx::query_scalar::<_, Option<String>>(sql::FAIR_NEXT_GROUP)
            .bind(self.queue.as_str())
            .bind(after.map_or(NO_GROUP, GroupKey::as_str))
            .fetch_one(&mut *self.conn)
            .await?;
        next.map(|name| GroupKey::new(name).map_err(decode))
            .transpose()
    }

    async fn next_level(
        &mut self,
        group: Option<&GroupKey>,
        below: i64,
    ) -> Result<Option<i32>, sqlx::Error> {
        sqlx::query_scalar::<_, i32>(sql::FAIR_GROUP_LEVEL)
            .bind(self.queue.as_str())
            .bind(group.map(GroupKey::as_str))
            .bind(below)
            .fetch_optional(&mut *self.conn)
            .await
    }

    async fn level_page(
        &mut self,
        group: Option<&GroupKey>,
        priority: i32,
        after: Option<(DateTime<Utc>, i64)>,
        rows: usize,
    ) -> Result<Vec<FairRow>, sqlx::Error> {
        let (after_at, after_id) =
            after.map_or((i64::MIN, i64::MIN), |(at, id)| (at.timestamp_micros(), id));
        let read = sqlx::query(sql::FAIR_LEVEL_PICK)
            .bind(self.queue.as_str())
            .bind(group.map(GroupKey::as_str))
            .bind(priority)
            .bind(self.now)
            .bind(after_at)
            .bind(after_id)
            .bind(i64::try_from(rows).unwrap_or(i64::MAX))
            .fetch_all(&mut *self.conn)
            .await?;
        read.iter()
            .map(|row| {
                let (priority, available_at, id) = candidate_of(row)?;
                let available_at = stored_instant("available_at", available_at).map_err(decode)?;
                Ok(FairRow {
                    id,
                    priority,
                    available_at,
                })
            })
            .collect()
    }
}

/// The best `cap` claimable jobs of fair `queue` at `now`, in its fair
/// order, within its groups' `slots`, each with its group and its
/// [`queue_core::backend::FairPick::taken`]; with
/// `period`, by effective priority (which each candidate carries, for
/// the merge across queues).
pub(crate) async fn fair_candidates(
    conn: &mut SqliteConnection,
    now: i64,
    queue: &QueueName,
    cap: usize,
    slots: GroupSlots,
    period: Option<Duration>,
) -> Result<Vec<(Candidate, Option<GroupKey>, u32)>, sqlx::Error> {
    let at = stored_instant("time", now).map_err(decode)?;
    let mut reads = Reads { conn, queue, now };
    let picked = pick_fair(&mut reads, at, cap, slots, period).await?;
    Ok(picked
        .into_iter()
        .map(|pick| {
            let candidate = (pick.priority, pick.available_at.timestamp_micros(), pick.id);
            (candidate, pick.group, pick.taken)
        })
        .collect())
}

/// Advances the turns of the fair queues' groups for `claimed` (in the
/// order the claim returns them), each job's queue, group and
/// [`queue_core::backend::FairPick::taken`] found by `fair` (jobs of other
/// queues are not there): each job advances its queue's claim count by
/// one; a job whose `taken` is 0 sets its group's turn to that count, and
/// the last job of each group leaves its `taken`.
pub(crate) async fn advance_turns(
    conn: &mut SqliteConnection,
    claimed: &[Candidate],
    fair: &HashMap<i64, (QueueName, Option<GroupKey>, u32)>,
) -> Result<(), sqlx::Error> {
    // Each fair queue's claimed jobs, in order: group and `taken`.
    type Served<'a> = Vec<(Option<&'a GroupKey>, u32)>;
    let mut queues: Vec<(&QueueName, Served<'_>)> = Vec::new();
    for &(_, _, id) in claimed {
        let Some((queue, group, taken)) = fair.get(&id) else {
            continue;
        };
        match queues.iter_mut().find(|(q, _)| *q == queue) {
            Some((_, groups)) => groups.push((group.as_ref(), *taken)),
            None => queues.push((queue, vec![(group.as_ref(), *taken)])),
        }
    }
    for (queue, groups) in queues {
        let jobs = i64::try_from(groups.len()).unwrap_or(i64::MAX);
        let count: i64 = sqlx::query_scalar(sql::FAIR_COUNT)
            .bind(queue.as_str())
            .bind(jobs)
            .fetch_one(&mut *conn)
            .await?;
        // Each group's new turn (None: unchanged) and count taken.
        let mut last: Vec<(&str, Option<i64>, u32)> = Vec::new();
        for (k, (group, taken)) in groups.into_iter().enumerate() {
            let name = group.map_or(NO_GROUP, GroupKey::as_str);
            let at = count - jobs + 1 + i64::try_from(k).unwrap_or(i64::MAX);
            let index = match last.iter().position(|(n, _, _)| *n == name) {
                Some(index) => index,
                None => {
                    last.push((name, None, 0));
                    last.len() - 1
                }
            };
            if taken == 0 {
                last[index].1 = Some(at);
            }
            last[index].2 = taken;
        }
        for (name, turn, taken) in last {
            sqlx::query(sql::FAIR_TURN)
                .bind(queue.as_str())
                .bind(name)
                .bind(turn)
                .bind(i64::from(taken))
                .execute(&mut *conn)
                .await?;
        }
    }
    Ok(())
}
