//! Dequeue: per queue, the best entries of the ready ring (migration 0006,
//! `ready_ring.rs`) and the due scheduled jobs; the best of all locked by
//! id and leased in one UPDATE, their entries deleted, in one transaction.
//! A claim on a queue with limits locks and applies them first, in the
//! same transaction (`flow.rs`).

use std::cmp::Reverse;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::NaiveDateTime;
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Datetime, Integer, Nullable, Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use queue_core::backend::{GroupSlots, aged_priority, claim_order, merge_by_next};
use queue_core::{DequeueRequest, GroupKey, Job, Result};

use crate::MySqlStorage;
use crate::bind::{Param, cached, id_list};
use crate::error::Failure;
use crate::fair::fair_picks;
use crate::group_slots::QueueSlots;
use crate::lease::later;
use crate::rows::JobRow;
use crate::sql::{
    self, READY_LEVEL, READY_PEEK, READY_PEEK_LEVEL, SCHEDULED_DUE, SCHEDULED_LEVEL,
    SCHEDULED_SOURCE,
};

/// A claimable row and the claim statement's "now".
#[derive(QueryableByName)]
struct Candidate {
    #[diesel(embed)]
    job: JobRow,
    #[diesel(sql_type = Datetime)]
    now_ts: NaiveDateTime,
}

/// A ring entry or a due scheduled job ([`READY_PEEK`], [`SCHEDULED_DUE`]).
#[derive(QueryableByName, Debug, Clone)]
pub(crate) struct Entry {
    /// A slot (0-3), the inbox (4), or job_queue_scheduled (5).
    #[diesel(sql_type = BigInt)]
    src: i64,
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Integer)]
    priority: i32,
    #[diesel(sql_type = Datetime)]
    available_at: NaiveDateTime,
    /// The job's group (NULL: none, or the entry's job is gone).
    #[diesel(sql_type = Nullable<Text>)]
    group_key: Option<String>,
    #[diesel(sql_type = BigInt)]
    claimable: i64,
    #[diesel(sql_type = BigInt)]
    stale: i64,
}

impl Entry {
    fn source(&self) -> u8 {
        u8::try_from(self.src).unwrap_or(SCHEDULED_SOURCE)
    }

    fn order(&self) -> Order {
        claim_order(self.priority, self.available_at, self.id)
    }

    /// Takes a slot of the entry's group in `slots` if one is left (a
    /// job in no group always gets one), and says whether it did.
    fn takes_slot(&self, slots: &mut GroupSlots) -> Result<bool, Failure> {
        let group = (self.group_key.as_deref())
            .map(GroupKey::new)
            .transpose()
            .map_err(|_| Failure::Invariant("a job's group_key is not a valid group key"))?;
        Ok(slots.take(group.as_ref()))
    }
}

/// Per grouped queue of a claim (by name), its groups' slots: read by the
/// limited claim under the queue's lock (`flow.rs`), each group's leases
/// counted when the claim first meets one of its jobs (`group_slots.rs`),
/// taken by the picks.
pub(crate) type Groups = HashMap<String, QueueSlots>;

/// Per queue, the highest priority of its scheduled jobs, where known
/// (`None`: it has none).
pub(crate) type TopLevels = HashMap<String, Option<i32>>;

/// One priority level of a queue's scheduled jobs.
#[derive(QueryableByName)]
pub(crate) struct Level {
    #[diesel(sql_type = Integer)]
    pub(crate) priority: i32,
}

/// The next priority level of a queue's ring entries ([`READY_LEVEL`]).
#[derive(QueryableByName)]
struct NextLevel {
    #[diesel(sql_type = Nullable<Integer>)]
    priority: Option<i32>,
}

/// The claim order's sort key.
type Order = (Reverse<i32>, NaiveDateTime, i64);

/// How a claim orders each queue's candidates, read under the limited
/// claim's lock: the priority aging periods of its queues that have one
/// (by name; `QueueLimits::priority_aging`), its fair queues
/// (`QueueLimits::fair_groups`), and the claim's now. A candidate of an
/// aging queue is ordered by its effective priority ([`aged_priority`]),
/// any other by its own; a fair queue's candidates come in its fair order
/// (`fair.rs`), merged with the other queues' by the claim order of each
/// list's next.
#[derive(Debug, Default)]
pub(crate) struct Orders {
    periods: HashMap<String, Duration>,
    fair: HashSet<String>,
    now: Option<NaiveDateTime>,
    /// The [`queue_core::backend::FairPick::taken`] of each job a fair
    /// pick of the claim chose, by id: what its group's turn becomes if
    /// the claim takes it.
    taken: std::sync::Mutex<HashMap<i64, u32>>,
}

impl Orders {
    /// The periods of the aging queues and the fair queues among a
    /// claim's, at `now`.
    pub(crate) fn new(
        periods: HashMap<String, Duration>,
        fair: HashSet<String>,
        now: NaiveDateTime,
    ) -> Self {
        Self {
            periods,
            fair,
            now: Some(now),
            taken: std::sync::Mutex::default(),
        }
    }

    /// The [`queue_core::backend::FairPick::taken`] of each job the fair
    /// picks chose, by id.
    pub(crate) fn fair_taken(&self) -> HashMap<i64, u32> {
        self.taken
            .lock()
            .map(|taken| taken.clone())
            .unwrap_or_else(|poisoned| poisoned.into_inner().clone())
    }

    /// Whether the claim names a fair queue.
    fn any_fair(&self) -> bool {
        !self.fair.is_empty()
    }

    fn ages(&self, queue: &str) -> bool {
        self.periods.contains_key(queue)
    }

    /// The claim order of a candidate of `queue`.
    fn order(&self, queue: &str, priority: i32, available_at: NaiveDateTime, id: i64) -> Order {
        let priority = match (self.periods.get(queue), self.now) {
            (Some(period), Some(now)) => aged_priority(
                priority,
                available_at.and_utc(),
                now.and_utc(),
                Some(*period),
            ),
            _ => priority,
        };
        claim_order(priority, available_at, id)
    }

    fn entry_order(&self, queue: &str, entry: &Entry) -> Order {
        self.order(queue, entry.priority, entry.available_at, entry.id)
    }

    /// Fair `queue`'s best `room` jobs in its fair order within its
    /// groups' `slots` (`fair.rs`), each with its claim order by
    /// effective priority, as entries of no ring source.
    async fn fair_list(
        &self,
        conn: &mut AsyncMysqlConnection,
        queue: &str,
        room: usize,
        slots: GroupSlots,
    ) -> Result<Vec<(Order, String, Entry)>, Failure> {
        let now = (self.now).ok_or(Failure::Invariant("a fair claim without its now"))?;
        let period = self.periods.get(queue).copied();
        let picks = fair_picks(conn, queue, now, room, slots, period).await?;
        {
            let mut taken = (self.taken.lock()).unwrap_or_else(std::sync::PoisonError::into_inner);
            taken.extend(picks.iter().map(|pick| (pick.id, pick.taken)));
        }
        Ok(picks
            .into_iter()
            .map(|pick| {
                let available_at = pick.available_at.naive_utc();
                let entry = Entry {
                    src: i64::from(SCHEDULED_SOURCE),
                    id: pick.id,
                    priority: pick.priority,
                    available_at,
                    group_key: pick.group.map(|g| g.as_str().to_owned()),
                    claimable: 1,
                    stale: 0,
                };
                let order = claim_order(pick.priority, available_at, pick.id);
                (order, queue.to_owned(), entry)
            })
            .collect())
    }
}

/// How many times a claim looks at most: again when racing claims locked
/// some of the jobs it picked, or when stale entries it deleted may have
/// hidden claimable ones.
const ROUNDS: usize = 4;

/// The most entries a claim reads from one source in one round.
const MAX_PEEK: usize = 4_096;

/// What one round of a claim found: claimable entries (in claim order,
/// within each queue's cap), and the entries to delete.
struct Found {
    picks: Vec<(String, Entry)>,
    stale: Vec<Entry>,
    /// Every entry seen per job id (a job may have two: one in a slot, a
    /// newer one in the inbox).
    sources: HashMap<i64, Vec<u8>>,
}

/// What one queue's read of the ring asks for: `room` picks, past the
/// entries `tried` already, `depth` times as deep as that into each
/// source.
struct Window<'a> {
    queue: &'a str,
    room: usize,
    tried: &'a HashSet<i64>,
    depth: usize,
}

impl MySqlStorage {
    pub(crate) async fn dequeue_pooled(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        let limited = self.claim_is_limited(request).await?;
        let jobs = self
            .retrying(false, || async {
                let mut conn = self.connection().await?;
                let guard = self.guard(&mut conn).await?;
                let outcome = conn
                    .transaction(async |conn| {
                        guard.open(conn).await?;
                        let jobs = if limited {
                            self.dequeue_limited_on(conn, request).await?
                        } else {
                            let mut groups = Groups::new();
                            let (top, orders) = (TopLevels::new(), Orders::default());
                            self.dequeue_on(conn, request, &top, &mut groups, &orders)
                                .await?
                        };
                        guard.close(conn).await?;
                        Ok(jobs)
                    })
                    .await;
                guard.finish(conn, outcome).await
            })
            .await;
        self.rotate_ready_ring();
        jobs
    }

    /// A claim on `conn`, in the caller's transaction: per queue of
    /// `request` (up to its cap), the best entries of each ring slot and of
    /// the inbox ([`READY_PEEK`]: short ranges of small tables, and each
    /// entry's job by primary key) and the due scheduled jobs, level by
    /// level ([`SCHEDULED_LEVEL`], [`SCHEDULED_DUE`]); the best `limit` of
    /// them all are locked and read again by id
    /// ([`sql::dequeue_lock_picked`], skipping rows another claim holds),
    /// leased in one UPDATE, and their entries deleted with the stale ones
    /// met on the way. None of it reads an index of `job_queue` in which
    /// the jobs claimed since InnoDB's purge last ran leave entries,
    /// except the scheduled jobs' own.
    ///
    /// When a racing claim holds some of the picked rows (the lock returns
    /// fewer), a claim of one queue, or of several whose caps fit the
    /// limit, looks again, passing over what it tried, up to [`ROUNDS`]
    /// times. On several queues whose caps add up to more than the limit
    /// it keeps what it locked.
    ///
    /// `top` holds queues whose highest level of scheduled jobs is known
    /// already (`None`: it has none), read by the limited claim's lock
    /// statement: their first probe is skipped. `groups` holds the group
    /// slots of the queues with group limits (empty for others): a pick
    /// takes its group's slot, and a job whose group has none left is
    /// passed over. `orders` holds the aging queues' periods (empty for
    /// others): their candidates are read level by level and ordered by
    /// effective priority; and the fair queues, whose candidates the first
    /// round picks in their fair order (`fair.rs`; their claims are
    /// serialized by their config rows' locks, so only a claim that has
    /// not seen the setting yet races them, and later rounds pass them
    /// over), and whose jobs the claim returns in the order picked.
    pub(crate) async fn dequeue_on(
        &self,
        conn: &mut AsyncMysqlConnection,
        request: &DequeueRequest,
        top: &TopLevels,
        groups: &mut Groups,
        orders: &Orders,
    ) -> Result<Vec<Job>, Failure> {
        let fixed = self.now_override();
        let mut locked: Vec<Candidate> = Vec::new();
        let mut tried: HashSet<i64> = HashSet::new();
        let mut taken: HashMap<String, usize> = HashMap::new();
        let mut leased: Vec<(u8, i64)> = Vec::new();
        // With a fair queue named: every pick's id, in the order picked.
        let mut picked: Vec<i64> = Vec::new();
        for round in 0..ROUNDS {
            let wanted = (request.limit() as usize).saturating_sub(locked.len());
            if wanted == 0 {
                break;
            }
            // Each round reads twice as deep as the last.
            let found = self
                .peek(
                    conn,
                    request,
                    top,
                    &tried,
                    &taken,
                    groups,
                    orders,
                    1 << round,
                )
                .await?;
            // Stale entries go at once: the next round reads past them.
            let stale: Vec<(u8, i64)> = found.stale.iter().map(|e| (e.source(), e.id)).collect();
            delete_entries(conn, stale.clone()).await?;
            let picks: Vec<(String, Entry)> = found.picks.into_iter().take(wanted).collect();
            if orders.any_fair() {
                picked.extend(picks.iter().map(|(_, e)| e.id));
            }
            let short = picks.len() < wanted;
            let mut raced = false;
            if !picks.is_empty() {
                let ids: Vec<i64> = picks.iter().map(|(_, e)| e.id).collect();
                let padded = id_list(&ids);
                let mut params = vec![Param::OptTime(fixed)];
                params.extend(padded.iter().map(|id| Param::Int(*id)));
                params.push(Param::OptTime(fixed));
                let got = cached(sql::dequeue_lock_picked(padded.len()), params)
                    .load::<Candidate>(conn)
                    .await?;
                tried.extend(ids);
                raced = got.len() < picks.len();
                for candidate in got {
                    *taken.entry(candidate.job.queue_name.clone()).or_default() += 1;
                    for source in found.sources.get(&candidate.job.id).into_iter().flatten() {
                        if *source != SCHEDULED_SOURCE {
                            leased.push((*source, candidate.job.id));
                        }
                    }
                    locked.push(candidate);
                }
            }
            // Again when racing claims took some of the picks, or when
            // stale entries may have hidden claimable ones.
            let again = (raced && !request.over_subscribed()) || (short && !stale.is_empty());
            if !again {
                break;
            }
        }
        let mut candidates = locked;
        if orders.any_fair() {
            // In the order picked: rounds after the first add to the end.
            let place: HashMap<i64, usize> =
                picked.iter().enumerate().map(|(i, id)| (*id, i)).collect();
            candidates.sort_by_key(|c| place.get(&c.job.id).copied());
        } else {
            candidates.sort_by_key(|c| {
                orders.order(
                    &c.job.queue_name,
                    c.job.priority,
                    c.job.available_at,
                    c.job.id,
                )
            });
        }
        let result = self.lease(conn, request, candidates).await?;
        delete_entries(conn, leased).await?;
        Ok(result)
    }

    /// Leases the locked `candidates` (in claim order) in one UPDATE.
    async fn lease(
        &self,
        conn: &mut AsyncMysqlConnection,
        request: &DequeueRequest,
        candidates: Vec<Candidate>,
    ) -> Result<Vec<Job>, Failure> {
        // The latest of the reads' clocks: every candidate was due by then.
        let Some(now) = candidates.iter().map(|c| c.now_ts).max() else {
            return Ok(Vec::new());
        };
        let ids: Vec<i64> = candidates.iter().map(|c| c.job.id).collect();
        let lease_until = later(now, request.lease());

        let padded = id_list(&ids);
        let sql = sql::dequeue_lease(padded.len());
        let mut params = vec![
            Param::Time(lease_until),
            Param::Text(request.worker_id().as_str().to_owned()),
            Param::Time(now),
            Param::Time(now),
        ];
        params.extend(padded.iter().map(|id| Param::Int(*id)));
        let updated = cached(sql, params).execute(conn).await?;
        if updated != ids.len() {
            return Err(Failure::Invariant("a locked claimable row was not updated"));
        }

        // What the UPDATE wrote, applied to the rows read under lock.
        candidates
            .into_iter()
            .map(|c| {
                let mut row = c.job;
                row.attempts += 1;
                row.lease_until = Some(lease_until);
                row.locked_by = Some(request.worker_id().as_str().to_owned());
                row.first_locked_at = row.first_locked_at.or(Some(now));
                row.updated_at = now;
                row.into_job()
                    .map_err(|_| Failure::Invariant("a claimed job could not be read"))
            })
            .collect()
    }

    /// The claimable entries of each queue of `request` not in `tried`, up
    /// to the queue's cap less what this claim `taken` there, from the
    /// ring ([`MySqlStorage::window`], reading `depth` times that far into
    /// each source; on an aging queue, into each priority level of each
    /// source) and the scheduled jobs ([`SCHEDULED_DUE`]), merged in claim
    /// order (by effective priority on an aging queue), one per job; and
    /// the stale entries seen. A grouped queue's picks take their groups'
    /// slots in `groups`, and its window is read deeper while the jobs of
    /// full groups fill it (up to [`MAX_PEEK`] entries per source: more
    /// jobs of full groups than that before the others leave the claim
    /// short until they run).
    #[allow(
        clippy::too_many_arguments,
        reason = "one claim's state, passed by reference"
    )]
    async fn peek(
        &self,
        conn: &mut AsyncMysqlConnection,
        request: &DequeueRequest,
        top: &TopLevels,
        tried: &HashSet<i64>,
        taken: &HashMap<String, usize>,
        groups: &mut Groups,
        orders: &Orders,
        depth: usize,
    ) -> Result<Found, Failure> {
        let mut found = Found {
            picks: Vec::new(),
            stale: Vec::new(),
            sources: HashMap::new(),
        };
        // Each queue's picks in its own order, with their claim order.
        let mut lists: Vec<Vec<(Order, String, Entry)>> = Vec::new();
        for (queue, cap) in request.queues().iter().zip(request.queue_limits()) {
            let queue = queue.as_str();
            let room = (*cap as usize).saturating_sub(taken.get(queue).copied().unwrap_or(0));
            if room == 0 {
                continue;
            }
            if orders.fair.contains(queue) {
                // The first round only (see `dequeue_on`).
                if depth == 1 {
                    let slots = (groups.get(queue))
                        .map(|g| g.slots().clone())
                        .unwrap_or_default();
                    lists.push(orders.fair_list(conn, queue, room, slots).await?);
                }
                continue;
            }
            let mut picks = Vec::new();
            let window = Window {
                queue,
                room,
                tried,
                depth,
            };
            let mut slots = groups.get_mut(queue);
            let ages = orders.ages(queue);
            let (mut entries, limit) = if ages {
                self.levels(conn, &window, slots.as_deref_mut()).await?
            } else {
                self.window(conn, &window, slots.as_deref_mut(), None)
                    .await?
            };
            // A grouped queue's due scheduled jobs as deep as its ring
            // window, from every level: jobs of full groups may fill a
            // level's range, and a lower level's job of a free group then
            // belongs to the claim (found by the model test, seed
            // 3237998083: the claim stopped at a level whose jobs it could
            // not take).
            let grouped = slots.is_some();
            let scheduled_room = if grouped { limit.max(room) } else { room };
            entries.extend(
                self.scheduled(conn, queue, scheduled_room, top, ages || grouped)
                    .await?,
            );
            entries.sort_by_key(|e| orders.entry_order(queue, e));
            if let Some(slots) = slots.as_deref_mut() {
                slots.count(conn, met_groups(&entries)).await?;
            }
            let mut seen = HashSet::new();
            let mut kept = 0;
            for entry in entries {
                found
                    .sources
                    .entry(entry.id)
                    .or_default()
                    .push(entry.source());
                if entry.stale == 1 {
                    found.stale.push(entry);
                    continue;
                }
                if entry.claimable != 1 || tried.contains(&entry.id) || !seen.insert(entry.id) {
                    continue;
                }
                if kept < room {
                    if let Some(slots) = slots.as_deref_mut()
                        && !entry.takes_slot(slots.slots_mut())?
                    {
                        continue;
                    }
                    kept += 1;
                    picks.push((orders.entry_order(queue, &entry), queue.to_owned(), entry));
                }
            }
            lists.push(picks);
        }
        found.picks = merge_by_next(lists, usize::MAX, |(order, _, _)| *order)
            .into_iter()
            .map(|(_, queue, entry)| (queue, entry))
            .collect();
        Ok(found)
    }

    /// One queue's ring entries as deep as `window` asks, within priority
    /// `level` if given ([`READY_PEEK_LEVEL`]; else [`READY_PEEK`]), read
    /// deeper while stale, tried or repeated entries fill a source's
    /// window and it does not decide the picks ([`window_decides`]), up
    /// to [`MAX_PEEK`]: the entries, and how deep each source was read.
    /// A grouped queue's picks take its groups' `slots` (on a copy), each
    /// group counted when first met.
    async fn window(
        &self,
        conn: &mut AsyncMysqlConnection,
        window: &Window<'_>,
        mut slots: Option<&mut QueueSlots>,
        level: Option<i32>,
    ) -> Result<(Vec<Entry>, usize), Failure> {
        let name = || Param::Text(window.queue.to_owned());
        // Entries already tried come back: read past them.
        let mut limit = ((window.room + window.tried.len()) * window.depth).min(MAX_PEEK);
        loop {
            let mut params = vec![Param::OptTime(self.now_override())];
            for _ in 0..=sql::INBOX_SOURCE {
                params.push(name());
                params.extend(level.map(|l| Param::Int(i64::from(l))));
                params.push(Param::Int(i64::try_from(limit).unwrap_or(i64::MAX)));
            }
            params.push(name());
            let statement = if level.is_some() {
                READY_PEEK_LEVEL
            } else {
                READY_PEEK
            };
            let entries = cached(statement, params).load::<Entry>(conn).await?;
            if let Some(slots) = slots.as_deref_mut() {
                slots.count(conn, met_groups(&entries)).await?;
            }
            let counted = slots.as_deref().map(QueueSlots::slots);
            // Read deeper before picking, or a worse job (of this queue's
            // other sources or of another queue) would be taken instead.
            if limit < MAX_PEEK
                && !window_decides(&entries, limit, window.room, window.tried, counted)?
            {
                limit = (limit * 2).min(MAX_PEEK);
                continue;
            }
            return Ok((entries, limit));
        }
    }

    /// An aging queue's ring entries: each priority level's window
    /// ([`MySqlStorage::window`]), levels found highest first by one
    /// [`READY_LEVEL`] probe each. Within a level the claim order is also
    /// the order by effective priority, so the best `room` jobs of the
    /// queue are among each level's first `room`. Two statements per level
    /// present in the ring: the cost grows with the number of levels, not
    /// with the backlog.
    async fn levels(
        &self,
        conn: &mut AsyncMysqlConnection,
        window: &Window<'_>,
        mut slots: Option<&mut QueueSlots>,
    ) -> Result<(Vec<Entry>, usize), Failure> {
        let mut entries = Vec::new();
        let mut deepest = 0;
        // Above every priority: the first probe finds the highest level.
        let mut bound = i64::from(i32::MAX) + 1;
        loop {
            let mut params = Vec::new();
            for _ in 0..=sql::INBOX_SOURCE {
                params.extend([Param::Text(window.queue.to_owned()), Param::Int(bound)]);
            }
            let next = cached(READY_LEVEL, params)
                .get_result::<NextLevel>(conn)
                .await?;
            let Some(level) = next.priority else {
                return Ok((entries, deepest));
            };
            let (found, limit) =
                (self.window(conn, window, slots.as_deref_mut(), Some(level))).await?;
            entries.extend(found);
            deepest = deepest.max(limit);
            bound = i64::from(level);
        }
    }

    /// A queue's due scheduled jobs, level by level (highest first), up to
    /// `room`: one probe for the next level and one range per level. With
    /// `every_level` (an aging queue, or a grouped one, whose full groups'
    /// jobs do not count), up to `room` of each level, every level read.
    async fn scheduled(
        &self,
        conn: &mut AsyncMysqlConnection,
        queue: &str,
        room: usize,
        top: &TopLevels,
        every_level: bool,
    ) -> Result<Vec<Entry>, Failure> {
        let fixed = self.now_override();
        let name = || Param::Text(queue.to_owned());
        let mut entries = Vec::new();
        // Above every priority: the first step finds the highest level.
        let mut bound = i64::from(i32::MAX) + 1;
        // The limited claim's lock statement read the first level.
        let mut known = top.get(queue).copied();
        while every_level || entries.len() < room {
            let level = match known.take() {
                Some(level) => level,
                None => cached(SCHEDULED_LEVEL, vec![name(), Param::Int(bound)])
                    .load::<Level>(conn)
                    .await?
                    .into_iter()
                    .next()
                    .map(|l| l.priority),
            };
            let Some(level) = level else {
                break;
            };
            bound = i64::from(level);
            let want = if every_level {
                room
            } else {
                room - entries.len()
            };
            let params = vec![
                name(),
                Param::Int(i64::from(level)),
                Param::OptTime(fixed),
                name(),
                Param::Int(i64::try_from(want).unwrap_or(i64::MAX)),
            ];
            entries.extend(cached(SCHEDULED_DUE, params).load::<Entry>(conn).await?);
        }
        Ok(entries)
    }
}

/// The groups of the claimable `entries`: those whose leases a grouped
/// claim counts before it picks among them.
fn met_groups(entries: &[Entry]) -> impl Iterator<Item = &str> {
    (entries.iter())
        .filter(|e| e.claimable == 1 && e.stale == 0)
        .filter_map(|e| e.group_key.as_deref())
}

/// Deletes ring entries by (source, job id), per source in source order
/// and by id, so that two claims take the rows of one round in one order.
async fn delete_entries(
    conn: &mut AsyncMysqlConnection,
    mut entries: Vec<(u8, i64)>,
) -> Result<(), Failure> {
    entries.sort_unstable();
    entries.dedup();
    for group in entries.chunk_by(|a, b| a.0 == b.0) {
        let source = group[0].0;
        let ids: Vec<i64> = group.iter().map(|(_, id)| *id).collect();
        for chunk in ids.chunks(1_000) {
            let padded = id_list(chunk);
            cached(
                sql::ready_delete(source, padded.len()),
                padded.iter().map(|id| Param::Int(*id)).collect(),
            )
            .execute(conn)
            .await?;
        }
    }
    Ok(())
}

/// Whether `entries`, one [`READY_PEEK`] window of `limit` entries per
/// source, decide a queue's best `room` picks: what a source holds past a
/// full window comes after that window's last entry in claim order, so the
/// picks (claimable, not tried already, and, with `slots`, taking the
/// slots of their groups in claim order, on a copy) are the best only if
/// there are `room` of them and none comes after the earliest such last
/// entry. A window of stale entries in one slot otherwise hid that slot's
/// better jobs behind a worse one of the inbox.
fn window_decides(
    entries: &[Entry],
    limit: usize,
    room: usize,
    tried: &HashSet<i64>,
    slots: Option<&GroupSlots>,
) -> Result<bool, Failure> {
    let frontier = (0..=sql::INBOX_SOURCE)
        .filter_map(|source| {
            let window = entries.iter().filter(|e| e.source() == source);
            (window.clone().count() >= limit)
                .then(|| window.map(Entry::order).max())
                .flatten()
        })
        .min();
    let Some(frontier) = frontier else {
        // Every source was read to its end.
        return Ok(true);
    };
    let mut usable: Vec<&Entry> = (entries.iter())
        .filter(|e| e.claimable == 1 && e.stale == 0 && !tried.contains(&e.id))
        .collect();
    usable.sort_by_key(|e| e.order());
    let mut slots = slots.cloned();
    let mut seen = HashSet::new();
    let mut last = None;
    let mut count = 0;
    for entry in usable {
        if count == room {
            break;
        }
        if !seen.insert(entry.id) {
            continue;
        }
        if let Some(slots) = slots.as_mut()
            && !entry.takes_slot(slots)?
        {
            continue;
        }
        count += 1;
        last = Some(entry.order());
    }
    Ok(count == room && last.is_some_and(|last| last <= frontier))
}
