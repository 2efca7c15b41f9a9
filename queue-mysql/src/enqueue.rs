//! Enqueue: multi-row INSERTs per batch, in a transaction of ours or nested
//! (as a savepoint) in the caller's.
//!
//! MySQL returns no ids for the rows of a multi-row INSERT, and
//! `LAST_INSERT_ID()` names only the first. When the server's
//! `innodb_autoinc_lock_mode` is 0 or 1 (MariaDB's default, and MySQL's
//! before 8.0), InnoDB gives the rows of such an INSERT consecutive ids, so
//! they follow from the first and the session's auto-increment step. With
//! lock mode 2 (MySQL 8's default) they need not: each keyless row of a
//! batch is then written with a temporary key that no valid key can equal
//! (it starts with a control character), read back through the unique
//! index with the real keys, and cleared before commit; nobody else ever
//! sees it. Each INSERT carries as many rows as fit in half the server's
//! `max_allowed_packet` (and at most [`MAX_ROWS`]).

use std::collections::HashMap;

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use queue_core::backend::{first_occurrences, validate_batch};
use queue_core::time::{to_time_delta, truncate_to_micros};
use queue_core::{
    EnqueueOutcome, JobId, NewJob, QueueError, Result, Schedule, ValidJob, check_batch_dependencies,
};

use crate::bind::{Param, cached, naive, query};
use crate::error::{Failure, interpret_failure};
use crate::galera::Guard;
use crate::rows::{IdRow, utc};
use crate::{MySqlStorage, sql, workflow};

/// Rows per lookup statement, well under the 65,535 placeholders a
/// prepared statement may have.
const CHUNK: usize = 1_000;

/// Rows per INSERT at most: ten placeholders each, under the 65,535 a
/// prepared statement may have.
const MAX_ROWS: usize = 6_500;

/// The first id of a multi-row INSERT and the auto-increment step.
#[derive(QueryableByName)]
struct FirstIdRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = BigInt)]
    step: i64,
}

/// The server's answer to [`sql::SERVER_INSERT_TRAITS`].
#[derive(QueryableByName)]
struct TraitsRow {
    #[diesel(sql_type = BigInt)]
    lock_mode: i64,
    #[diesel(sql_type = BigInt)]
    max_packet: i64,
    #[diesel(sql_type = BigInt)]
    galera: i64,
}

/// What a batch enqueue relies on of the server (see
/// [`sql::SERVER_INSERT_TRAITS`]); read once per storage.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServerTraits {
    /// A multi-row INSERT's rows get consecutive ids.
    consecutive_ids: bool,
    /// `max_allowed_packet`, in bytes.
    max_packet: usize,
    /// The server is a node of a Galera cluster (`wsrep_on`): the ready
    /// ring empties its slots without `LOCK TABLES` and `TRUNCATE`, and
    /// the storage's own write transactions are guarded (`galera.rs`).
    pub(crate) galera: bool,
}

#[derive(QueryableByName)]
struct KeyRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Text)]
    queue_name: String,
    #[diesel(sql_type = Text)]
    unique_key: String,
}

impl MySqlStorage {
    /// Enqueues `job` on the caller's connection: inside the caller's
    /// diesel-async transaction it becomes a savepoint, so the job exists
    /// only if the caller commits.
    ///
    /// # Errors
    /// As [`queue_core::Storage::enqueue`].
    pub async fn enqueue_in(
        &self,
        conn: &mut AsyncMysqlConnection,
        job: NewJob,
    ) -> Result<EnqueueOutcome> {
        self.enqueue_batch_in(conn, vec![job])
            .await?
            .pop()
            .ok_or_else(|| QueueError::backend("enqueue returned no outcome"))
    }

    /// Enqueues `jobs` on the caller's connection (see [`MySqlStorage::enqueue_in`]).
    ///
    /// # Errors
    /// As [`queue_core::Storage::enqueue_batch`].
    pub async fn enqueue_batch_in(
        &self,
        conn: &mut AsyncMysqlConnection,
        jobs: Vec<NewJob>,
    ) -> Result<Vec<EnqueueOutcome>> {
        let jobs = validate_batch(&jobs)?;
        check_batch_dependencies(&jobs)?;
        self.insert_all(conn, &jobs, Guard::NONE)
            .await
            .map_err(interpret_failure)
    }

    pub(crate) async fn enqueue_batch_pooled(
        &self,
        jobs: Vec<NewJob>,
    ) -> Result<Vec<EnqueueOutcome>> {
        let jobs = validate_batch(&jobs)?;
        check_batch_dependencies(&jobs)?;
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        self.retrying(false, || async {
            let mut conn = self.connection().await?;
            let guard = self.guard(&mut conn).await?;
            let outcome = self.insert_all(&mut conn, &jobs, guard).await;
            guard.finish(conn, outcome).await
        })
        .await
    }

    /// One transaction: find live keys, insert the rest, read their ids.
    /// A key committed by someone else in between fails the INSERT with a
    /// duplicate; the transaction is then run again, a few times at most.
    /// `guard`: on a Galera node, when the transaction is the storage's
    /// own (`galera.rs`).
    pub(crate) async fn insert_all(
        &self,
        conn: &mut AsyncMysqlConnection,
        jobs: &[ValidJob],
        guard: Guard,
    ) -> Result<Vec<EnqueueOutcome>, Failure> {
        let mut attempt = 0;
        loop {
            let result = conn
                .transaction(async |conn| {
                    guard.open(conn).await?;
                    let outcomes = self.insert_once(conn, jobs).await?;
                    guard.close(conn).await?;
                    Ok(outcomes)
                })
                .await;
            match result {
                Err(Failure::Query(diesel::result::Error::DatabaseError(
                    diesel::result::DatabaseErrorKind::UniqueViolation,
                    _,
                )))
                | Err(Failure::Raced)
                    if attempt < 3 =>
                {
                    attempt += 1
                }
                other => return other,
            }
        }
    }

    /// The server's [`ServerTraits`], asked on first use.
    pub(crate) async fn server_traits(
        &self,
        conn: &mut AsyncMysqlConnection,
    ) -> Result<ServerTraits, Failure> {
        if let Some(traits) = self.server.get() {
            return Ok(*traits);
        }
        let row = cached(sql::SERVER_INSERT_TRAITS, Vec::new())
            .get_result::<TraitsRow>(conn)
            .await?;
        let traits = ServerTraits {
            consecutive_ids: matches!(row.lock_mode, 0 | 1),
            max_packet: usize::try_from(row.max_packet).unwrap_or(1 << 20),
            galera: row.galera == 1,
        };
        Ok(*self.server.get_or_init(|| traits))
    }

    async fn insert_once(
        &self,
        conn: &mut AsyncMysqlConnection,
        jobs: &[ValidJob],
    ) -> Result<Vec<EnqueueOutcome>, Failure> {
        // The live jobs the batch depends on, locked; or its refusal.
        let live_dependencies = workflow::check(conn, jobs).await?;
        let waits: Vec<bool> = jobs
            .iter()
            .map(|job| workflow::waits(job, &live_dependencies))
            .collect();
        let first_of = first_occurrences(jobs);
        let firsts: Vec<usize> = (0..jobs.len()).filter(|i| first_of[*i] == *i).collect();
        let mut outcomes: HashMap<usize, EnqueueOutcome> = HashMap::new();

        // Live jobs holding a key of the batch.
        let keyed: Vec<usize> = firsts
            .iter()
            .copied()
            .filter(|i| jobs[*i].unique_key.is_some())
            .collect();
        let live = lookup(
            conn,
            &keyed
                .iter()
                .map(|i| key_pair(&jobs[*i]))
                .collect::<Vec<_>>(),
        )
        .await?;
        let mut new_rows = Vec::new();
        for index in firsts {
            match live.get(&key_pair(&jobs[index])) {
                Some(id) if jobs[index].unique_key.is_some() => {
                    outcomes.insert(
                        index,
                        EnqueueOutcome {
                            id: JobId(*id),
                            existed: true,
                        },
                    );
                }
                _ => new_rows.push(index),
            }
        }

        let mut now = None;
        if !new_rows.is_empty() {
            let at = self.resolve_now(conn).await?;
            now = Some(at);
            let now = at;
            let server = self.server_traits(conn).await?;
            let slot = self.ready_slot(conn).await?;
            let ids = if server.consecutive_ids {
                insert_consecutive(conn, jobs, &waits, &new_rows, now, server, slot).await?
            } else {
                insert_marked(conn, jobs, &waits, &new_rows, now, server, slot).await?
            };
            insert_ready(conn, jobs, &waits, &new_rows, &ids, now, slot).await?;
            for (index, id) in new_rows.iter().zip(ids) {
                outcomes.insert(
                    *index,
                    EnqueueOutcome {
                        id: JobId(id),
                        existed: false,
                    },
                );
            }
        }

        let outcomes = (0..jobs.len())
            .map(|i| match outcomes.get(&first_of[i]) {
                Some(first) if first_of[i] != i => Ok(EnqueueOutcome {
                    id: first.id,
                    existed: true,
                }),
                Some(outcome) => Ok(*outcome),
                None => Err(Failure::Invariant("a job of the batch got no outcome")),
            })
            .collect::<Result<Vec<_>, Failure>>()?;
        if let Some(now) = now
            && jobs
                .iter()
                .any(|job| !job.dependencies.is_empty() || job.joins.is_some())
        {
            workflow::link(conn, jobs, &outcomes, &live_dependencies, now).await?;
        }
        Ok(outcomes)
    }
}

/// (queue, key) of a job; keyless jobs get an empty key, which no lookup matches.
fn key_pair(job: &ValidJob) -> (String, String) {
    (
        job.queue.as_str().to_owned(),
        job.unique_key
            .as_ref()
            .map(|k| k.as_str().to_owned())
            .unwrap_or_default(),
    )
}

/// The (queue, key) a written row is looked up by.
fn lookup_key((queue, key): &(String, Option<String>)) -> (String, String) {
    (queue.clone(), key.clone().unwrap_or_default())
}

/// Inserts the jobs `rows` (indexes into `jobs`) with their own keys, in
/// chunks of one INSERT each; each chunk's ids follow from its first
/// (`LAST_INSERT_ID()`) and the session's auto-increment step, which the
/// server guarantees when its lock mode gives consecutive ids. Returns the
/// ids in the order of `rows`.
async fn insert_consecutive(
    conn: &mut AsyncMysqlConnection,
    jobs: &[ValidJob],
    waits: &[bool],
    rows: &[usize],
    now: chrono::NaiveDateTime,
    server: ServerTraits,
    slot: u8,
) -> Result<Vec<i64>, Failure> {
    let keys: Vec<Option<String>> = rows
        .iter()
        .map(|i| jobs[*i].unique_key.as_ref().map(|k| k.as_str().to_owned()))
        .collect();
    let mut payloads: Vec<String> = rows.iter().map(|i| jobs[*i].payload.to_string()).collect();
    let mut ids = Vec::with_capacity(rows.len());
    let mut start = 0;
    for len in chunk_lengths(jobs, rows, &payloads, server.max_packet) {
        let chunk = start..start + len;
        start += len;
        let texts = payloads[chunk.clone()].iter_mut().map(std::mem::take);
        insert(
            conn,
            rows[chunk.clone()]
                .iter()
                .zip(&keys[chunk])
                .zip(texts)
                .map(|((i, k), p)| (&jobs[*i], written_at(&jobs[*i], waits[*i], now), k, p)),
            now,
            slot,
        )
        .await?;
        let first = cached(sql::ENQUEUE_FIRST_ID, Vec::new())
            .get_result::<FirstIdRow>(conn)
            .await?;
        if first.id <= 0 || first.step <= 0 {
            return Err(Failure::Invariant(
                "the server reported no id for an INSERT",
            ));
        }
        ids.extend((0..len as i64).map(|k| first.id + k * first.step));
    }
    Ok(ids)
}

/// Inserts the jobs `rows` (indexes into `jobs`) where ids need not be
/// consecutive: keyless rows get a temporary key that no valid key can
/// equal (it starts with a control character), every row is read back
/// through the unique index, and the temporary keys are cleared before
/// commit, so nobody else ever sees them. A lone new row uses
/// `LAST_INSERT_ID()`. Returns the ids in the order of `rows`.
async fn insert_marked(
    conn: &mut AsyncMysqlConnection,
    jobs: &[ValidJob],
    waits: &[bool],
    rows: &[usize],
    now: chrono::NaiveDateTime,
    server: ServerTraits,
    slot: u8,
) -> Result<Vec<i64>, Failure> {
    let single = rows.len() == 1;
    let nonce: u64 = rand_nonce();
    let written: Vec<(String, Option<String>)> = rows
        .iter()
        .map(|i| {
            let key = match &jobs[*i].unique_key {
                Some(key) => Some(key.as_str().to_owned()),
                None if single => None,
                None => Some(format!("\u{1}{nonce:016x}:{i}")),
            };
            (jobs[*i].queue.as_str().to_owned(), key)
        })
        .collect();
    let mut payloads: Vec<String> = rows.iter().map(|i| jobs[*i].payload.to_string()).collect();
    let mut start = 0;
    for len in chunk_lengths(jobs, rows, &payloads, server.max_packet) {
        let chunk = start..start + len;
        start += len;
        let texts = payloads[chunk.clone()].iter_mut().map(std::mem::take);
        insert(
            conn,
            rows[chunk.clone()]
                .iter()
                .zip(&written[chunk])
                .zip(texts)
                .map(|((i, w), p)| (&jobs[*i], written_at(&jobs[*i], waits[*i], now), &w.1, p)),
            now,
            slot,
        )
        .await?;
    }
    let found: HashMap<(String, String), i64> = if single {
        let id = diesel::sql_query(sql::ENQUEUE_LAST_ID)
            .get_result::<IdRow>(conn)
            .await?
            .id;
        HashMap::from([(lookup_key(&written[0]), id)])
    } else {
        let pairs: Vec<(String, String)> = written.iter().map(lookup_key).collect();
        lookup(conn, &pairs).await?
    };
    let mut ids = Vec::with_capacity(rows.len());
    let mut markers = Vec::new();
    for (index, written) in rows.iter().zip(&written) {
        let id = *found
            .get(&lookup_key(written))
            .ok_or(Failure::Invariant("an inserted job could not be read back"))?;
        if jobs[*index].unique_key.is_none() && !single {
            markers.push(id);
        }
        ids.push(id);
    }
    for chunk in markers.chunks(CHUNK) {
        query(
            &sql::enqueue_clear_markers(chunk.len()),
            chunk.iter().map(|id| Param::Int(*id)).collect(),
        )
        .execute(conn)
        .await?;
    }
    Ok(ids)
}

/// Bytes a row adds to a prepared INSERT's execute packet besides its
/// text values: five fixed-size values, the three text lengths, the
/// parameter types and the NULL bitmap, rounded up generously.
const ROW_OVERHEAD: usize = 96;

/// The lengths of the chunks `rows` is inserted in: at most [`MAX_ROWS`]
/// rows each (the placeholder limit), and, past the first row, no more
/// bytes than half the server's packet limit, so the parameters of one
/// INSERT always travel in one packet. (A single row larger than that is
/// sent alone; the server refuses it if it is over the limit itself.)
fn chunk_lengths(
    jobs: &[ValidJob],
    rows: &[usize],
    payloads: &[String],
    max_packet: usize,
) -> Vec<usize> {
    let budget = (max_packet / 2).max(1);
    let mut lengths = Vec::new();
    let (mut len, mut bytes) = (0usize, 0usize);
    for (index, payload) in rows.iter().zip(payloads) {
        let job = &jobs[*index];
        let size = ROW_OVERHEAD
            + job.queue.as_str().len()
            + job.unique_key.as_ref().map_or(24, |k| k.as_str().len())
            + payload.len();
        if len > 0 && (len == MAX_ROWS || bytes + size > budget) {
            lengths.push(len);
            (len, bytes) = (0, 0);
        }
        len += 1;
        bytes += size;
    }
    if len > 0 {
        lengths.push(len);
    }
    lengths
}

/// A random 64-bit value naming one batch's temporary keys.
fn rand_nonce() -> u64 {
    rand::random()
}

/// Ids of live jobs by (queue, key), through the unique index.
async fn lookup(
    conn: &mut AsyncMysqlConnection,
    pairs: &[(String, String)],
) -> Result<HashMap<(String, String), i64>, Failure> {
    let mut found = HashMap::new();
    for chunk in pairs.chunks(CHUNK) {
        if chunk.is_empty() {
            continue;
        }
        let sql = sql::enqueue_find_keys(chunk.len());
        let params = chunk
            .iter()
            .flat_map(|(q, k)| [Param::Text(q.clone()), Param::Text(k.clone())])
            .collect();
        for row in query(&sql, params).load::<KeyRow>(conn).await? {
            found.insert((row.queue_name, row.unique_key), row.id);
        }
    }
    Ok(found)
}

/// The `available_at` a job is written with at `now`: [`sql::WAITING_AT`]
/// when it `waits` for a dependency, else [`available_at`].
fn written_at(job: &ValidJob, waits: bool, now: chrono::NaiveDateTime) -> chrono::NaiveDateTime {
    if waits {
        naive(queue_core::waiting_at())
    } else {
        available_at(job, now)
    }
}

/// When a job written at `now` becomes claimable, once it waits for
/// nothing.
pub(crate) fn available_at(job: &ValidJob, now: chrono::NaiveDateTime) -> chrono::NaiveDateTime {
    match job.schedule {
        Schedule::Now => now,
        Schedule::After(delay) => naive(truncate_to_micros(utc(now) + to_time_delta(delay))),
        Schedule::At(at) => naive(at),
    }
}

/// One multi-row INSERT; `at` is the job's [`written_at`], `key` its key,
/// its temporary key, or none; `payload` its payload as JSON text; `slot` the ring slot its
/// entry goes to if it is due ([`insert_ready`]).
async fn insert<'a>(
    conn: &mut AsyncMysqlConnection,
    rows: impl Iterator<
        Item = (
            &'a ValidJob,
            chrono::NaiveDateTime,
            &'a Option<String>,
            String,
        ),
    >,
    now: chrono::NaiveDateTime,
    slot: u8,
) -> Result<(), Failure> {
    let mut params = Vec::new();
    let mut count = 0;
    for (job, at, key, payload) in rows {
        params.extend([
            Param::Text(job.queue.as_str().to_owned()),
            Param::Int(i64::from(job.priority)),
            Param::OptText(key.clone()),
            Param::Text(payload),
            Param::Int(i64::from(job.max_attempts)),
            Param::Time(at),
            Param::Time(now),
            Param::Time(now),
            Param::OptText(job.trace_context.as_ref().map(|ctx| ctx.to_stored())),
            Param::OptText(job.group_key.as_ref().map(|g| g.as_str().to_owned())),
        ]);
        count += 1;
    }
    let sql = sql::enqueue_insert(count, slot);
    query(&sql, params).execute(conn).await?;
    Ok(())
}

/// The ready-ring entries of the inserted jobs `rows` (with their `ids`)
/// that are due when written, into `slot`, in the enqueue's transaction
/// (migration 0006): claims find them there.
async fn insert_ready(
    conn: &mut AsyncMysqlConnection,
    jobs: &[ValidJob],
    waits: &[bool],
    rows: &[usize],
    ids: &[i64],
    now: chrono::NaiveDateTime,
    slot: u8,
) -> Result<(), Failure> {
    let due: Vec<(&ValidJob, i64, chrono::NaiveDateTime)> = rows
        .iter()
        .zip(ids)
        .map(|(i, id)| (&jobs[*i], *id, written_at(&jobs[*i], waits[*i], now)))
        .filter(|(_, _, at)| *at <= now)
        .collect();
    for chunk in due.chunks(MAX_ROWS) {
        let params = chunk
            .iter()
            .flat_map(|(job, id, at)| {
                [
                    Param::Int(*id),
                    Param::Text(job.queue.as_str().to_owned()),
                    Param::Int(i64::from(job.priority)),
                    Param::Time(*at),
                ]
            })
            .collect();
        query(&sql::ready_insert(slot, chunk.len()), params)
            .execute(conn)
            .await?;
    }
    Ok(())
}
