//! A grouped queue's slots during one limited claim: its groups' own
//! limits, read under the lock on the queue's config row, and the leases
//! each group holds.
//!
//! A fair queue's claim walks every group, so it counts every group's
//! leases at once ([`sql::GROUP_HELD`], an entry per job of the queue).
//! Any other grouped claim counts only the groups it meets among its
//! candidates, when it first meets them ([`sql::group_held_of`], a short
//! range per group): a claim of 16 jobs from a queue of 20,000 jobs in
//! 1,000 groups reads a few dozen index entries instead of 20,000. Every
//! count runs after the lock, so each sees every claim committed before the
//! lock was granted, and no claim of the queue can commit one in between.

use std::collections::HashSet;

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use queue_core::backend::GroupSlots;
use queue_core::{GroupKey, QueueName};

use crate::bind::{Param, cached};
use crate::error::Failure;
use crate::flow::GroupLimitRow;
use crate::sql;

/// Statements of [`sql::group_held_of`] name at most this many groups.
const GROUPS_PER_COUNT: usize = 256;

/// A group and the leases its jobs hold ([`sql::GROUP_HELD`],
/// [`sql::group_held_of`]).
#[derive(QueryableByName)]
struct HeldRow {
    #[diesel(sql_type = Text)]
    group_key: String,
    #[diesel(sql_type = BigInt)]
    held: i64,
}

/// One grouped queue's slots in a claim (see the module docs).
pub(crate) struct QueueSlots {
    queue: String,
    slots: GroupSlots,
    /// The groups whose leases `slots` holds; `None`: every group's.
    counted: Option<HashSet<String>>,
}

impl QueueSlots {
    /// Reads the slots of grouped queue `queue` in the claim's transaction,
    /// after its config row's lock: each group's own limit (when the lock
    /// statement saw one: `overridden`), else `default`; with
    /// `every_group`, every group's leases now, else none until
    /// [`QueueSlots::count`].
    pub(crate) async fn read(
        conn: &mut AsyncMysqlConnection,
        queue: &QueueName,
        default: Option<u32>,
        overridden: bool,
        every_group: bool,
    ) -> Result<Self, Failure> {
        let name = || vec![Param::Text(queue.as_str().to_owned())];
        let overrides = if overridden {
            cached(sql::GROUP_OVERRIDES, name())
                .load::<GroupLimitRow>(conn)
                .await?
        } else {
            Vec::new()
        };
        let overrides = overrides
            .into_iter()
            .map(|row| {
                let limit = u32::try_from(row.concurrency_limit).map_err(|_| invalid())?;
                Ok((group(row.group_key)?, limit))
            })
            .collect::<Result<Vec<_>, Failure>>()?;
        let mut this = Self {
            queue: queue.as_str().to_owned(),
            slots: GroupSlots::new(default, overrides),
            counted: Some(HashSet::new()),
        };
        if every_group {
            let rows = cached(sql::GROUP_HELD, name())
                .load::<HeldRow>(conn)
                .await?;
            this.hold(rows)?;
            this.counted = None;
        }
        Ok(this)
    }

    /// The slots, with every group counted that [`QueueSlots::count`] was
    /// given.
    pub(crate) fn slots(&self) -> &GroupSlots {
        &self.slots
    }

    /// The slots, for picks to take.
    pub(crate) fn slots_mut(&mut self) -> &mut GroupSlots {
        &mut self.slots
    }

    /// Counts the leases of those of `groups` not counted yet, in one
    /// statement per [`GROUPS_PER_COUNT`] of them.
    pub(crate) async fn count<'a>(
        &mut self,
        conn: &mut AsyncMysqlConnection,
        groups: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), Failure> {
        let Some(counted) = self.counted.as_mut() else {
            return Ok(());
        };
        let mut new: Vec<String> = Vec::new();
        for group in groups {
            if counted.insert(group.to_owned()) {
                new.push(group.to_owned());
            }
        }
        for chunk in new.chunks(GROUPS_PER_COUNT) {
            // Padded with its last group to a few statement shapes, like
            // id lists: a group named twice is counted once.
            let width = chunk.len().next_power_of_two();
            let mut params = vec![Param::Text(self.queue.clone())];
            params.extend((0..width).map(|i| Param::Text(chunk[i.min(chunk.len() - 1)].clone())));
            let rows = cached(sql::group_held_of(width), params)
                .load::<HeldRow>(conn)
                .await?;
            self.hold(rows)?;
        }
        Ok(())
    }

    fn hold(&mut self, rows: Vec<HeldRow>) -> Result<(), Failure> {
        for row in rows {
            let held = u64::try_from(row.held).unwrap_or(0);
            self.slots.hold(group(row.group_key)?, held);
        }
        Ok(())
    }
}

fn group(key: String) -> Result<GroupKey, Failure> {
    GroupKey::new(key).map_err(|_| invalid())
}

fn invalid() -> Failure {
    Failure::Invariant("a stored group key or limit is not valid")
}
