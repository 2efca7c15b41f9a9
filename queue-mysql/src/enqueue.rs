//! Enqueue: one multi-row INSERT per batch, in a transaction of ours or
//! nested (as a savepoint) in the caller's.
//!
//! MySQL returns no ids for the rows of a multi-row INSERT, and
//! `LAST_INSERT_ID()` names only the first: with InnoDB's default
//! interleaved auto-increment on MySQL 8, the others need not follow it.
//! So each keyless row of a batch is written with a temporary key that no
//! valid key can equal (it starts with a control character), read back
//! through the unique index with the real keys, and cleared before commit;
//! nobody else ever sees it. A lone new row uses `LAST_INSERT_ID()`.

use std::collections::HashMap;

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use queue_core::backend::{first_occurrences, validate_batch};
use queue_core::time::{to_time_delta, truncate_to_micros};
use queue_core::{EnqueueOutcome, JobId, NewJob, QueueError, Result, Schedule, ValidJob};

use crate::bind::{Param, naive, query};
use crate::error::{Failure, interpret_failure, retrying};
use crate::rows::{IdRow, utc};
use crate::{MySqlStorage, sql};

/// Rows per INSERT or lookup statement, well under the 65,535 placeholders
/// a prepared statement may have.
const CHUNK: usize = 1_000;

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
        self.insert_all(conn, &jobs)
            .await
            .map_err(interpret_failure)
    }

    pub(crate) async fn enqueue_batch_pooled(
        &self,
        jobs: Vec<NewJob>,
    ) -> Result<Vec<EnqueueOutcome>> {
        let jobs = validate_batch(&jobs)?;
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        retrying(false, || async {
            let mut conn = self.connection().await?;
            self.insert_all(&mut conn, &jobs).await
        })
        .await
    }

    /// One transaction: find live keys, insert the rest, read their ids.
    /// A key committed by someone else in between fails the INSERT with a
    /// duplicate; the transaction is then run again, a few times at most.
    async fn insert_all(
        &self,
        conn: &mut AsyncMysqlConnection,
        jobs: &[ValidJob],
    ) -> Result<Vec<EnqueueOutcome>, Failure> {
        let mut attempt = 0;
        loop {
            let result = conn
                .transaction(async |conn| self.insert_once(conn, jobs).await)
                .await;
            match result {
                Err(Failure::Query(diesel::result::Error::DatabaseError(
                    diesel::result::DatabaseErrorKind::UniqueViolation,
                    _,
                ))) if attempt < 3 => attempt += 1,
                other => return other,
            }
        }
    }

    async fn insert_once(
        &self,
        conn: &mut AsyncMysqlConnection,
        jobs: &[ValidJob],
    ) -> Result<Vec<EnqueueOutcome>, Failure> {
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

        if !new_rows.is_empty() {
            let now = self.resolve_now(conn).await?;
            // A lone new row is found by LAST_INSERT_ID(); several need keys.
            let single = new_rows.len() == 1;
            let nonce: u64 = rand_nonce();
            let written: Vec<(String, Option<String>)> = new_rows
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
            for chunk in new_rows
                .iter()
                .zip(&written)
                .collect::<Vec<_>>()
                .chunks(CHUNK)
            {
                insert(conn, chunk.iter().map(|(i, w)| (&jobs[**i], &w.1)), now).await?;
            }
            let ids: HashMap<(String, String), i64> = if single {
                let id = diesel::sql_query(sql::ENQUEUE_LAST_ID)
                    .get_result::<IdRow>(conn)
                    .await?
                    .id;
                HashMap::from([(lookup_key(&written[0]), id)])
            } else {
                let pairs: Vec<(String, String)> = written.iter().map(lookup_key).collect();
                lookup(conn, &pairs).await?
            };
            let mut markers = Vec::new();
            for (index, written) in new_rows.iter().zip(&written) {
                let id = *ids
                    .get(&lookup_key(written))
                    .ok_or_else(|| Failure::Invariant("an inserted job could not be read back"))?;
                if jobs[*index].unique_key.is_none() && !single {
                    markers.push(id);
                }
                outcomes.insert(
                    *index,
                    EnqueueOutcome {
                        id: JobId(id),
                        existed: false,
                    },
                );
            }
            for chunk in markers.chunks(CHUNK) {
                query(
                    &sql::enqueue_clear_markers(chunk.len()),
                    chunk.iter().map(|id| Param::Int(*id)).collect(),
                )
                .execute(conn)
                .await?;
            }
        }

        (0..jobs.len())
            .map(|i| match outcomes.get(&first_of[i]) {
                Some(first) if first_of[i] != i => Ok(EnqueueOutcome {
                    id: first.id,
                    existed: true,
                }),
                Some(outcome) => Ok(*outcome),
                None => Err(Failure::Invariant("a job of the batch got no outcome")),
            })
            .collect()
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

/// One multi-row INSERT; `key` is the job's key, its temporary key, or none.
async fn insert<'a>(
    conn: &mut AsyncMysqlConnection,
    rows: impl Iterator<Item = (&'a ValidJob, &'a Option<String>)>,
    now: chrono::NaiveDateTime,
) -> Result<(), Failure> {
    let mut params = Vec::new();
    let mut count = 0;
    for (job, key) in rows {
        let available_at = match job.schedule {
            Schedule::Now => now,
            Schedule::After(delay) => naive(truncate_to_micros(utc(now) + to_time_delta(delay))),
            Schedule::At(at) => naive(at),
        };
        params.extend([
            Param::Text(job.queue.as_str().to_owned()),
            Param::Int(i64::from(job.priority)),
            Param::OptText(key.clone()),
            Param::Text(job.payload.to_string()),
            Param::Int(i64::from(job.max_attempts)),
            Param::Time(available_at),
            Param::Time(now),
            Param::Time(now),
        ]);
        count += 1;
    }
    let sql = sql::enqueue_insert(count);
    query(&sql, params).execute(conn).await?;
    Ok(())
}
