//! The ready ring (migration 0006): where claims find the jobs written
//! due, in four slot tables emptied in turn by `TRUNCATE`, so that a claim
//! never steps over more than the entries of the last few rotations,
//! whatever holds InnoDB's purge back.
//!
//! On a Galera node (`ServerTraits::galera`) a slot is emptied by
//! `DELETE` instead: there `TRUNCATE` is DDL, run in total order isolation
//! across the cluster, and `LOCK TABLES` holds on one node only, so a
//! rotation holding one while waiting for the other stalled the node's
//! commits behind certification. The deleted entries then wait for purge
//! as any other.
//!
//! How enqueues pick a slot and how a rotation empties one:
//! docs/design-notes.md, "queue-mysql: the ready ring".

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Integer};
use diesel_async::pooled_connection::deadpool::Object;
use diesel_async::{AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};
use queue_core::backend::Turn;

use crate::MySqlStorage;
use crate::bind::{Param, cached, query};
use crate::error::Failure;
use crate::sql::{self, SLOTS};

/// How long a slot stays current at least.
pub(crate) const ROTATE_EVERY: Duration = Duration::from_millis(250);

/// How many jobs inserted since a slot became current rotate it once it is
/// [`ROTATE_EVERY`] old.
const ROTATE_AT_JOBS: i64 = 500;

/// How long a slot that took fewer stays current at most.
const ROTATE_IDLE: Duration = Duration::from_secs(5);

/// How long an enqueue trusts the current slot it read.
const SLOT_FRESH: Duration = Duration::from_millis(250);

/// The most entries a rotation moves out of the slot it empties.
const MOVE_AT_MOST: i64 = 10_000;

/// Entries per statement when a rotation on Galera moves and deletes them.
const MOVE_CHUNK: i64 = 1_000;

/// What a handle remembers of the ring.
#[derive(Debug)]
pub(crate) struct RingState {
    /// This handle's turns to try a rotation.
    turn: Turn,
    /// The current slot as last read, and when (`turn`'s clock; 0: never).
    slot: AtomicU8,
    slot_read_ms: AtomicU64,
    /// Whether the server is MariaDB, asked by the first rotation.
    mariadb: OnceLock<bool>,
}

impl Default for RingState {
    fn default() -> Self {
        Self {
            turn: Turn::new(ROTATE_EVERY),
            slot: AtomicU8::new(0),
            slot_read_ms: AtomicU64::new(0),
            mariadb: OnceLock::new(),
        }
    }
}

impl RingState {
    /// The current slot as read less than [`SLOT_FRESH`] ago, if it was.
    fn fresh_slot(&self) -> Option<u8> {
        let read = AtomicU64::load(&self.slot_read_ms, Ordering::Relaxed);
        let fresh = u64::try_from(SLOT_FRESH.as_millis()).unwrap_or(u64::MAX);
        (read != 0 && self.turn.now_ms().saturating_sub(read) < fresh)
            .then(|| AtomicU8::load(&self.slot, Ordering::Relaxed))
    }

    fn remember_slot(&self, slot: u8) {
        self.slot.store(slot, Ordering::Relaxed);
        self.slot_read_ms
            .store(self.turn.now_ms(), Ordering::Relaxed);
    }
}

#[derive(QueryableByName)]
struct SlotRow {
    #[diesel(sql_type = Integer)]
    slot: i32,
}

#[derive(QueryableByName)]
struct StateRow {
    #[diesel(sql_type = Integer)]
    slot: i32,
    #[diesel(sql_type = BigInt)]
    rotated_id: i64,
    #[diesel(sql_type = BigInt)]
    age_ms: i64,
    #[diesel(sql_type = BigInt)]
    max_id: i64,
}

#[derive(QueryableByName)]
struct LockedRow {
    #[diesel(sql_type = diesel::sql_types::Nullable<BigInt>)]
    locked: Option<i64>,
}

#[derive(QueryableByName)]
struct CountRow {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

#[derive(QueryableByName)]
struct MariaDbRow {
    #[diesel(sql_type = BigInt)]
    mariadb: i64,
}

impl MySqlStorage {
    /// The slot an enqueue writes its entries into: the current one as
    /// read at most [`SLOT_FRESH`] ago on any of this handle's connections.
    pub(crate) async fn ready_slot(&self, conn: &mut AsyncMysqlConnection) -> Result<u8, Failure> {
        if let Some(slot) = self.ring.fresh_slot() {
            return Ok(slot);
        }
        let row = cached(sql::RING_SLOT, Vec::new())
            .get_result::<SlotRow>(conn)
            .await?;
        let slot = u8::try_from(row.slot)
            .ok()
            .filter(|s| *s < SLOTS)
            .ok_or(Failure::Invariant("the ready ring names no slot"))?;
        self.ring.remember_slot(slot);
        Ok(slot)
    }

    /// After a claim: rotates the ring in the background when this
    /// handle's turn has come. A failed rotation (the schema not migrated
    /// yet, the server gone) is logged and tried again a period later.
    pub(crate) fn rotate_ready_ring(&self) {
        if !self.ring.turn.take() {
            return;
        }
        let storage = self.clone();
        tokio::spawn(async move {
            match storage.rotate_once(false).await {
                Ok(rotated) => tracing::trace!(?rotated, "ready ring rotation"),
                Err(error) => tracing::debug!(?error, "ready ring rotation failed"),
            }
        });
    }

    /// Rotates the ready ring now if it can, whether or not its current
    /// slot is old enough (claims try in the background, when it is): the
    /// slot made current, or `None` when another rotation runs, a
    /// transaction holds the slots, or every slot to empty holds a backlog.
    ///
    /// # Errors
    /// As any query.
    pub async fn rotate_ready_ring_now(&self) -> queue_core::Result<Option<u8>> {
        self.rotate_once(true)
            .await
            .map_err(crate::error::interpret_failure)
    }

    /// One rotation try (`force`: whatever the current slot's age): the
    /// slot made current, or `None`.
    async fn rotate_once(&self, force: bool) -> Result<Option<u8>, Failure> {
        let mut conn = self.connection().await?;
        let locked = cached(sql::RING_LOCK, Vec::new())
            .get_result::<LockedRow>(&mut conn)
            .await?;
        if locked.locked != Some(1) {
            return Ok(None);
        }
        let outcome = self.rotate_locked(&mut conn, force).await;
        let unlocked = conn.batch_execute(sql::RING_UNLOCK).await;
        if unlocked.is_err() {
            // A connection that may still hold the named lock or tables
            // locked goes, not back to the pool.
            drop(Object::take(conn));
        }
        outcome
    }

    async fn rotate_locked(
        &self,
        conn: &mut Object<AsyncMysqlConnection>,
        force: bool,
    ) -> Result<Option<u8>, Failure> {
        let state = cached(sql::RING_STATE, Vec::new())
            .get_result::<StateRow>(&mut **conn)
            .await?;
        let current = u8::try_from(state.slot)
            .ok()
            .filter(|s| *s < SLOTS)
            .ok_or(Failure::Invariant("the ready ring names no slot"))?;
        self.ring.remember_slot(current);
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let inserted = state.max_id.saturating_sub(state.rotated_id);
        let due = state.age_ms >= ms(ROTATE_EVERY)
            && (inserted >= ROTATE_AT_JOBS || state.age_ms >= ms(ROTATE_IDLE));
        if !due && !force {
            return Ok(None);
        }
        let galera = self.server_traits(conn).await?.galera;
        let mariadb = self.server_is_mariadb(conn).await?;
        // Entries move into the slot made current before this one.
        let into = (current + SLOTS - 1) % SLOTS;
        for step in 1..SLOTS - 1 {
            let empty = (current + step) % SLOTS;
            if self.empty_slot(conn, empty, into, mariadb, galera).await? {
                query(
                    sql::RING_ROTATED,
                    vec![Param::Int(i64::from(empty)), Param::Int(state.max_id)],
                )
                .execute(&mut **conn)
                .await?;
                self.ring.remember_slot(empty);
                return Ok(Some(empty));
            }
        }
        Ok(None)
    }

    async fn server_is_mariadb(
        &self,
        conn: &mut Object<AsyncMysqlConnection>,
    ) -> Result<bool, Failure> {
        if let Some(known) = self.ring.mariadb.get() {
            return Ok(*known);
        }
        let row = diesel::sql_query(sql::SERVER_IS_MARIADB)
            .get_result::<MariaDbRow>(&mut **conn)
            .await?;
        Ok(*self.ring.mariadb.get_or_init(|| row.mariadb == 1))
    }

    /// Empties `slot`, moving what is left of it into `into`: whether it
    /// did (not when either is held by a transaction, on MariaDB, or when
    /// the slot holds more than [`MOVE_AT_MOST`] entries). On Galera
    /// without table locks ([`MySqlStorage::move_and_delete`]).
    async fn empty_slot(
        &self,
        conn: &mut Object<AsyncMysqlConnection>,
        slot: u8,
        into: u8,
        mariadb: bool,
        galera: bool,
    ) -> Result<bool, Failure> {
        // Stale entries go first, without locks: a stale entry stays stale
        // (a job made due again gets a new entry in the inbox).
        let stale: Vec<i64> = query(&sql::ring_stale(slot), vec![Param::Int(MOVE_AT_MOST)])
            .load::<IdRow>(&mut **conn)
            .await?
            .into_iter()
            .map(|row| row.id)
            .collect();
        for chunk in stale.chunks(1_000) {
            query(
                &sql::ready_delete(slot, chunk.len()),
                chunk.iter().map(|id| Param::Int(*id)).collect(),
            )
            .execute(&mut **conn)
            .await?;
        }
        if galera {
            return self.move_and_delete(conn, slot, into).await;
        }

        if !mariadb {
            conn.batch_execute(
                "SET @queue_lock_wait = @@SESSION.lock_wait_timeout; \
                 SET SESSION lock_wait_timeout = 1",
            )
            .await?;
        }
        // The slot alone first: it is usually empty, and the slot its
        // entries would move to is usually still held by enqueues that
        // read the current slot before the last rotation.
        let mut outcome = self.locked(conn, slot, None, mariadb).await;
        if matches!(outcome, Ok(Some(n)) if n > 0) {
            outcome = self.locked(conn, slot, Some(into), mariadb).await;
        }
        if !mariadb {
            conn.batch_execute("SET SESSION lock_wait_timeout = @queue_lock_wait")
                .await?;
        }
        Ok(outcome? == Some(0))
    }

    /// Locks `slot` (and `into`, if given) for the session, and then
    /// empties the slot if it is empty, or (with `into`) moves its entries
    /// there first: how many entries it held when it emptied it (0 when it
    /// was empty), how many it found when it may not (no `into`), or
    /// `None` when the tables were held or the slot holds a backlog.
    async fn locked(
        &self,
        conn: &mut Object<AsyncMysqlConnection>,
        slot: u8,
        into: Option<u8>,
        mariadb: bool,
    ) -> Result<Option<i64>, Failure> {
        let locked = conn
            .batch_execute(&sql::ring_lock_tables(slot, into, mariadb))
            .await;
        let outcome = match locked {
            Ok(()) => self.move_and_truncate(conn, slot, into).await,
            Err(diesel::result::Error::DatabaseError(_, info))
                if info.message().contains("Lock wait timeout") =>
            {
                Ok(None)
            }
            Err(other) => Err(other.into()),
        };
        let unlocked = conn.batch_execute(sql::RING_TABLES_UNLOCK).await;
        let outcome = outcome?;
        unlocked?;
        Ok(outcome)
    }

    /// Under the tables' locks: truncates `slot` if it is empty, or, with
    /// `into`, moves its entries there first unless it holds more than
    /// [`MOVE_AT_MOST`]. What it found (as [`MySqlStorage::locked`]): 0
    /// after truncating an empty slot, the count otherwise, `None` for a
    /// backlog.
    async fn move_and_truncate(
        &self,
        conn: &mut Object<AsyncMysqlConnection>,
        slot: u8,
        into: Option<u8>,
    ) -> Result<Option<i64>, Failure> {
        let count = query(&sql::ring_count(slot), vec![Param::Int(MOVE_AT_MOST + 1)])
            .get_result::<CountRow>(&mut **conn)
            .await?;
        if count.n > MOVE_AT_MOST {
            return Ok(None);
        }
        match into {
            None if count.n > 0 => return Ok(Some(count.n)),
            Some(into) if count.n > 0 => {
                conn.batch_execute(&sql::ring_move(slot, into)).await?;
            }
            _ => {}
        }
        conn.batch_execute(&sql::ring_truncate(slot)).await?;
        Ok(Some(0))
    }

    /// On Galera, in place of the table locks and `TRUNCATE`: copies the
    /// slot's entries into `into` and deletes them from the slot, by id, a
    /// chunk at a time, each statement on its own (Galera retries an
    /// autocommit statement that loses certification). Only entries
    /// already copied are deleted, so an entry committed into the slot
    /// meanwhile (an enqueue that read the current slot long before) stays
    /// where claims find it; the slot is made current with it. An entry
    /// whose job a claim leased meanwhile may be copied after the claim
    /// deleted it: it is then stale in `into`, and claims skip it. Whether
    /// it emptied the slot: not when it holds more than [`MOVE_AT_MOST`].
    async fn move_and_delete(
        &self,
        conn: &mut Object<AsyncMysqlConnection>,
        slot: u8,
        into: u8,
    ) -> Result<bool, Failure> {
        let count = query(&sql::ring_count(slot), vec![Param::Int(MOVE_AT_MOST + 1)])
            .get_result::<CountRow>(&mut **conn)
            .await?;
        if count.n > MOVE_AT_MOST {
            return Ok(false);
        }
        let mut after = i64::MIN;
        // Bounded: entries written into the slot while it is emptied (a
        // rotation on another node with an older view) are left there.
        for _ in 0..=MOVE_AT_MOST / MOVE_CHUNK {
            let ids: Vec<i64> = query(
                &sql::ring_entries_after(slot),
                vec![Param::Int(after), Param::Int(MOVE_CHUNK)],
            )
            .load::<IdRow>(&mut **conn)
            .await?
            .into_iter()
            .map(|row| row.id)
            .collect();
            let Some(last) = ids.last() else { break };
            after = *last;
            let params = || ids.iter().map(|id| Param::Int(*id)).collect::<Vec<_>>();
            query(&sql::ring_move_ids(slot, into, ids.len()), params())
                .execute(&mut **conn)
                .await?;
            query(&sql::ready_delete(slot, ids.len()), params())
                .execute(&mut **conn)
                .await?;
        }
        Ok(true)
    }
}
