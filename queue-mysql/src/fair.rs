//! Fair claiming between groups ([`queue_core::QueueLimits::fair_groups`],
//! migration 0013): the reads [`queue_core::backend::pick_fair`] makes of a
//! fair queue in the limited claim's transaction (ranges of
//! `job_queue_group_leased`: the groups by a skip scan, one probe per
//! group, each group's levels and due jobs), and the turns a claim leaves.
//!
//! A fair queue's claims hold its config row's lock (it is a limited
//! queue), so two of them never pick at once; only a claim that has not
//! yet seen the setting (`LimitedQueues` is read at most once a second)
//! takes its jobs in plain order meanwhile. The pick reads `job_queue`,
//! not the ready ring: it steps over the entries InnoDB's purge has not
//! removed yet of its groups' jobs claimed lately, and the ring entries of
//! the jobs it takes are left for the ring's rotation to delete as stale.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Datetime, Integer, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use queue_core::backend::{FairPick, FairReader, FairRow, FairTurn, GroupSlots, pick_fair};
use queue_core::{GroupKey, Job, QueueName, async_trait};

use crate::bind::{Param, cached, naive, query};
use crate::dequeue::Level;
use crate::error::Failure;
use crate::sql;

/// The `group_key` of `job_group_turn` for the jobs without a group.
const NO_GROUP: &str = "";

/// Before every `available_at` a job can have (DATETIME's least value):
/// the first page's bound.
fn first() -> (NaiveDateTime, i64) {
    let least = chrono::NaiveDate::from_ymd_opt(1000, 1, 1).and_then(|d| d.and_hms_opt(0, 0, 0));
    (least.unwrap_or(NaiveDateTime::MIN), i64::MIN)
}

#[derive(QueryableByName)]
struct TurnRow {
    #[diesel(sql_type = Text)]
    group_key: String,
    #[diesel(sql_type = BigInt)]
    turn: i64,
    #[diesel(sql_type = Integer)]
    taken: i32,
}

#[derive(QueryableByName)]
struct WeightRow {
    #[diesel(sql_type = Text)]
    group_key: String,
    #[diesel(sql_type = Integer)]
    weight: i32,
}

#[derive(QueryableByName)]
struct GroupRow {
    #[diesel(sql_type = Text)]
    group_key: String,
}

#[derive(QueryableByName)]
struct PickRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Integer)]
    priority: i32,
    #[diesel(sql_type = Datetime)]
    available_at: NaiveDateTime,
}

fn stored_turn() -> Failure {
    Failure::Invariant("a stored turn of a fair group is negative")
}

fn group_key(name: String) -> Result<GroupKey, Failure> {
    GroupKey::new(name).map_err(|_| Failure::Invariant("a stored group key is not valid"))
}

/// One fair queue's reads in the claim's transaction, at the claim's now.
struct Reads<'c> {
    conn: &'c mut AsyncMysqlConnection,
    queue: &'c str,
    now: NaiveDateTime,
}

impl Reads<'_> {
    fn name(&self) -> Param {
        Param::Text(self.queue.to_owned())
    }
}

#[async_trait]
impl FairReader for Reads<'_> {
    type Error = Failure;

    async fn turns(&mut self) -> Result<Vec<(Option<GroupKey>, FairTurn)>, Failure> {
        let rows = cached(sql::FAIR_TURNS, vec![self.name()])
            .load::<TurnRow>(self.conn)
            .await?;
        rows.into_iter()
            .map(|row| {
                let group = (row.group_key != NO_GROUP)
                    .then(|| group_key(row.group_key))
                    .transpose()?;
                let turn = FairTurn {
                    at: u64::try_from(row.turn).map_err(|_| stored_turn())?,
                    taken: u32::try_from(row.taken).map_err(|_| stored_turn())?,
                };
                Ok((group, turn))
            })
            .collect()
    }

    async fn weights(&mut self) -> Result<Vec<(GroupKey, u32)>, Failure> {
        let rows = cached(sql::FAIR_WEIGHTS, vec![self.name()])
            .load::<WeightRow>(self.conn)
            .await?;
        rows.into_iter()
            .map(|row| {
                let weight = u32::try_from(row.weight)
                    .map_err(|_| Failure::Invariant("a stored group weight is negative"))?;
                Ok((group_key(row.group_key)?, weight))
            })
            .collect()
    }

    async fn next_group(&mut self, after: Option<&GroupKey>) -> Result<Option<GroupKey>, Failure> {
        let after = after.map_or(NO_GROUP, GroupKey::as_str).to_owned();
        let rows = cached(sql::FAIR_NEXT_GROUP, vec![self.name(), Param::Text(after)])
            .load::<GroupRow>(self.conn)
            .await?;
        rows.into_iter()
            .next()
            .map(|row| group_key(row.group_key))
            .transpose()
    }

    async fn next_level(
        &mut self,
        group: Option<&GroupKey>,
        below: i64,
    ) -> Result<Option<i32>, Failure> {
        let (statement, mut params) = match group {
            Some(group) => (
                sql::FAIR_GROUP_LEVEL,
                vec![self.name(), Param::Text(group.as_str().to_owned())],
            ),
            None => (sql::FAIR_NO_GROUP_LEVEL, vec![self.name()]),
        };
        params.push(Param::Int(below));
        let rows = cached(statement, params).load::<Level>(self.conn).await?;
        Ok(rows.into_iter().next().map(|level| level.priority))
    }

    async fn level_page(
        &mut self,
        group: Option<&GroupKey>,
        priority: i32,
        after: Option<(DateTime<Utc>, i64)>,
        rows: usize,
    ) -> Result<Vec<FairRow>, Failure> {
        let (after_at, after_id) = after.map_or_else(first, |(at, id)| (naive(at), id));
        let (statement, mut params) = match group {
            Some(group) => (
                sql::FAIR_LEVEL_PICK,
                vec![self.name(), Param::Text(group.as_str().to_owned())],
            ),
            None => (sql::FAIR_NO_GROUP_LEVEL_PICK, vec![self.name()]),
        };
        params.extend([
            Param::Int(i64::from(priority)),
            Param::Time(self.now),
            Param::Time(after_at),
            Param::Time(after_at),
            Param::Int(after_id),
            self.name(),
            Param::Int(i64::try_from(rows).unwrap_or(i64::MAX)),
        ]);
        let read = cached(statement, params).load::<PickRow>(self.conn).await?;
        Ok(read
            .into_iter()
            .map(|row| FairRow {
                id: row.id,
                priority: row.priority,
                available_at: row.available_at.and_utc(),
            })
            .collect())
    }
}

/// The best `cap` claimable jobs of fair `queue` at `now`, in its fair
/// order, within its groups' `slots`; with `period`, by effective
/// priority.
pub(crate) async fn fair_picks(
    conn: &mut AsyncMysqlConnection,
    queue: &str,
    now: NaiveDateTime,
    cap: usize,
    slots: GroupSlots,
    period: Option<Duration>,
) -> Result<Vec<FairPick>, Failure> {
    let mut reads = Reads { conn, queue, now };
    pick_fair(&mut reads, now.and_utc(), cap, slots, period).await
}

/// Advances fair `queue`'s claim count from `count` by the jobs of it in
/// `claimed` (in the order the claim returns them), each job's
/// [`queue_core::backend::FairPick::taken`] in `taken`: a job whose
/// `taken` is 0 sets its group's turn to the count it took, and the last
/// job of each group leaves its `taken`.
pub(crate) async fn advance_turns(
    conn: &mut AsyncMysqlConnection,
    queue: &QueueName,
    count: i64,
    claimed: &[Job],
    taken: &HashMap<i64, u32>,
) -> Result<(), Failure> {
    // Each group's new turn (None: unchanged) and count taken.
    let mut groups: HashMap<&str, (Option<i64>, u32)> = HashMap::new();
    let mut jobs = 0;
    for job in claimed.iter().filter(|job| &job.queue == queue) {
        jobs += 1;
        let group = job.group_key.as_ref().map_or(NO_GROUP, GroupKey::as_str);
        let after = taken.get(&job.id.get()).copied().unwrap_or(0);
        let entry = groups.entry(group).or_insert((None, 0));
        if after == 0 {
            entry.0 = Some(count + jobs);
        }
        entry.1 = after;
    }
    if jobs == 0 {
        return Ok(());
    }
    let name = || Param::Text(queue.as_str().to_owned());
    cached(sql::FAIR_COUNT, vec![Param::Int(count + jobs), name()])
        .execute(&mut *conn)
        .await?;
    // In key order, so that two claims' upserts lock the rows in one order.
    let mut groups: Vec<(&str, (Option<i64>, u32))> = groups.into_iter().collect();
    groups.sort_unstable();
    let mut moved = Vec::new();
    let mut kept = Vec::new();
    for (group, (turn, taken)) in &groups {
        let (group, taken) = (
            Param::Text((*group).to_owned()),
            Param::Int(i64::from(*taken)),
        );
        match turn {
            Some(turn) => moved.push([name(), group, Param::Int(*turn), taken]),
            None => kept.push([name(), group, taken]),
        }
    }
    if !moved.is_empty() {
        let rows = moved.len();
        query(
            &sql::fair_turns(rows),
            moved.into_iter().flatten().collect(),
        )
        .execute(&mut *conn)
        .await?;
    }
    if !kept.is_empty() {
        let rows = kept.len();
        query(&sql::fair_taken(rows), kept.into_iter().flatten().collect())
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}
