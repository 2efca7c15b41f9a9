//! Workflows on MySQL and MariaDB (migration 0015; the contract is
//! `Storage::enqueue_batch`'s): recording a job's dependencies at enqueue,
//! and what finishing a job does to the jobs waiting on it, in the
//! transaction of the statement that moves it to history.
//!
//! Neither server lets a trigger on `job_queue` update `job_queue`, so the
//! count is ours: every path that archives live rows ([`crate::complete`]'s
//! `delete_live`) hands the ones that have dependants or wait to
//! [`finish`]. The enqueue locks every live dependency `FOR UPDATE` and
//! counts itself in its `dependants_linked`, so an ack racing it waits for
//! its commit (or, through another Galera node, conflicts with it) and
//! then sees its edges; a job at 0 skips the count.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::NaiveDateTime;
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Datetime, Integer, Nullable, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use queue_core::backend::{FinishedLink, LiveLink, corrupt, job_link};
use queue_core::{
    Dependency, DependencyFailure, EnqueueOutcome, FinalStatus, JobId, JobLinks, QueueError,
    Result, ValidJob, batch_closed, dependency_failed, failed_dependency, unknown_dependency,
};

use crate::bind::{Param, cached, id_list, query};
use crate::complete::delete_live;
use crate::enqueue::available_at;
use crate::error::{Failure, interpret_failure};
use crate::rows::{IdRow, utc};
use crate::sql;

/// Ids per statement: well under the 65,535 placeholders of a statement.
const CHUNK: usize = 1_000;

/// Rows per multi-row INSERT of edges or waiting jobs.
const INSERT_ROWS: usize = 2_000;

#[derive(QueryableByName)]
struct HistoryStatusRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Text)]
    status_final: String,
}

#[derive(QueryableByName)]
struct EdgeRow {
    #[diesel(sql_type = BigInt)]
    job_id: i64,
    #[diesel(sql_type = BigInt)]
    depends_on: i64,
}

#[derive(QueryableByName)]
struct WaitingRow {
    #[diesel(sql_type = BigInt)]
    job_id: i64,
    #[diesel(sql_type = Integer)]
    remaining: i32,
    #[diesel(sql_type = Text)]
    on_failure: String,
}

#[derive(QueryableByName)]
struct FoundRow {
    #[diesel(sql_type = BigInt)]
    found: i64,
}

#[derive(QueryableByName)]
struct LinkRow {
    #[diesel(sql_type = BigInt)]
    side: i64,
    #[diesel(sql_type = BigInt)]
    other: i64,
    #[diesel(sql_type = Nullable<Text>)]
    live_queue: Option<String>,
    #[diesel(sql_type = Nullable<Datetime>)]
    available_at: Option<NaiveDateTime>,
    #[diesel(sql_type = Nullable<Datetime>)]
    lease_until: Option<NaiveDateTime>,
    #[diesel(sql_type = Nullable<Integer>)]
    attempts: Option<i32>,
    #[diesel(sql_type = Nullable<Integer>)]
    max_attempts: Option<i32>,
    #[diesel(sql_type = Nullable<Text>)]
    done_queue: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    status_final: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    result: Option<String>,
}

/// Runs `sql(len)` over `ids` in chunks, each padded to few shapes, and
/// collects the rows.
async fn load_chunked<R>(
    conn: &mut AsyncMysqlConnection,
    ids: &[i64],
    sql: fn(usize) -> String,
) -> Result<Vec<R>, Failure>
where
    R: QueryableByName<diesel::mysql::Mysql> + Send + 'static,
{
    let mut rows = Vec::new();
    for chunk in ids.chunks(CHUNK) {
        let ids = id_list(chunk);
        let params = ids.iter().map(|id| Param::Int(*id)).collect();
        rows.extend(cached(sql(ids.len()), params).load::<R>(conn).await?);
    }
    Ok(rows)
}

/// Runs `sql(len)` over `ids` in chunks, after the `first` binds.
async fn execute_chunked(
    conn: &mut AsyncMysqlConnection,
    first: &[Param],
    ids: &[i64],
    sql: fn(usize) -> String,
) -> Result<(), Failure> {
    for chunk in ids.chunks(CHUNK) {
        let ids = id_list(chunk);
        let mut params = first.to_vec();
        params.extend(ids.iter().map(|id| Param::Int(*id)));
        cached(sql(ids.len()), params).execute(conn).await?;
    }
    Ok(())
}

/// The distinct ids `jobs` depend on that were enqueued before.
fn prior_dependencies(jobs: &[ValidJob]) -> Vec<i64> {
    let mut ids: Vec<i64> = jobs
        .iter()
        .flat_map(|job| &job.dependencies)
        .filter_map(|dependency| match dependency {
            Dependency::Job(id) => Some(id.get()),
            Dependency::InBatch(_) => None,
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Locks the live jobs a batch depends on, in id order, and refuses the
/// batch (`Failure::Refused`, nothing written: the transaction rolls back)
/// when one that is not live is unknown, or failed for a job that would be
/// cancelled at once; every job is checked, those whose key exists too.
/// Returns the live ones. Runs before the batch writes anything.
pub(crate) async fn check(
    conn: &mut AsyncMysqlConnection,
    jobs: &[ValidJob],
) -> Result<HashSet<i64>, Failure> {
    check_joins(conn, jobs).await?;
    let ids = prior_dependencies(jobs);
    if ids.is_empty() {
        return Ok(HashSet::new());
    }
    let live: HashSet<i64> = load_chunked::<IdRow>(conn, &ids, sql::lock_dependencies)
        .await?
        .into_iter()
        .map(|row| row.id)
        .collect();
    let gone: Vec<i64> = ids.into_iter().filter(|id| !live.contains(id)).collect();
    let mut finished = HashMap::new();
    for row in load_chunked::<HistoryStatusRow>(conn, &gone, sql::dependency_history).await? {
        let status: FinalStatus = row
            .status_final
            .parse()
            .map_err(|e| Failure::Refused(corrupt("status_final", e)))?;
        finished.insert(row.id, status);
    }
    for job in jobs {
        for dependency in &job.dependencies {
            let Dependency::Job(id) = *dependency else {
                continue;
            };
            if live.contains(&id.get()) {
                continue;
            }
            match finished.get(&id.get()) {
                None => return Err(Failure::Refused(unknown_dependency(id))),
                Some(status) if !job.on_dependency_failure.counts(*status) => {
                    return Err(Failure::Refused(failed_dependency(id, *status)));
                }
                Some(_) => {}
            }
        }
    }
    Ok(live)
}

/// Locks the waiting rows of the callbacks whose batches `jobs` join, and
/// refuses the batch (`Failure::Refused`: [`batch_closed`]) when one is
/// not waiting: a finish releasing it waits for the enqueue's commit,
/// then counts the joined jobs too; one that released it first leaves
/// no row to lock.
async fn check_joins(conn: &mut AsyncMysqlConnection, jobs: &[ValidJob]) -> Result<(), Failure> {
    let mut callbacks: Vec<i64> = jobs
        .iter()
        .filter_map(|job| job.joins.map(JobId::get))
        .collect();
    if callbacks.is_empty() {
        return Ok(());
    }
    callbacks.sort_unstable();
    callbacks.dedup();
    let open: HashSet<i64> = load_chunked::<IdRow>(conn, &callbacks, sql::lock_callbacks)
        .await?
        .into_iter()
        .map(|row| row.id)
        .collect();
    match callbacks.iter().find(|id| !open.contains(id)) {
        Some(closed) => Err(Failure::Refused(batch_closed(JobId(*closed)))),
        None => Ok(()),
    }
}

/// Whether `job` waits when written: it depends on a job of its batch
/// (live, new or holding its key) or on a live one (`live`, from
/// [`check`]).
pub(crate) fn waits(job: &ValidJob, live: &HashSet<i64>) -> bool {
    job.dependencies.iter().any(|dependency| match dependency {
        Dependency::InBatch(_) => true,
        Dependency::Job(id) => live.contains(&id.get()),
    })
}

/// Records the dependencies of each job `outcomes` says was written, and
/// the waiting row of each that [`waits`] (written with `available_at` at
/// [`sql::WAITING_AT`]), and marks the live jobs they wait on. A job of
/// the batch that existed under its key is locked here; if it finished
/// since the enqueue looked its key up, the enqueue runs again
/// (`Failure::Raced`).
pub(crate) async fn link(
    conn: &mut AsyncMysqlConnection,
    jobs: &[ValidJob],
    outcomes: &[EnqueueOutcome],
    live: &HashSet<i64>,
    now: NaiveDateTime,
) -> Result<(), Failure> {
    let mut existed: Vec<i64> = Vec::new();
    let mut edges: Vec<(i64, i64, bool)> = Vec::new();
    let mut waiting: Vec<(i64, i64, NaiveDateTime, DependencyFailure)> = Vec::new();
    // Per callback, how many written jobs joined its batch.
    let mut joined: BTreeMap<i64, i64> = BTreeMap::new();
    for (job, outcome) in jobs.iter().zip(outcomes) {
        if outcome.existed {
            continue;
        }
        if let Some(callback) = job.joins {
            edges.push((callback.get(), outcome.id.get(), true));
            *joined.entry(callback.get()).or_default() += 1;
        }
        if job.dependencies.is_empty() {
            continue;
        }
        let mut seen = HashSet::new();
        let mut remaining = 0;
        for dependency in &job.dependencies {
            let (id, unfinished) = match *dependency {
                Dependency::InBatch(index) => {
                    if outcomes[index].existed {
                        existed.push(outcomes[index].id.get());
                    }
                    (outcomes[index].id.get(), true)
                }
                Dependency::Job(id) => (id.get(), live.contains(&id.get())),
            };
            if seen.insert(id) {
                edges.push((outcome.id.get(), id, unfinished));
                remaining += i64::from(unfinished);
            }
        }
        if remaining > 0 {
            waiting.push((
                outcome.id.get(),
                remaining,
                available_at(job, now),
                job.on_dependency_failure,
            ));
        }
    }
    existed.sort_unstable();
    existed.dedup();
    let locked = load_chunked::<IdRow>(conn, &existed, sql::lock_dependencies).await?;
    if locked.len() != existed.len() {
        return Err(Failure::Raced);
    }
    for rows in edges.chunks(INSERT_ROWS) {
        let params = rows
            .iter()
            .flat_map(|(job, on, unfinished)| {
                [
                    Param::Int(*job),
                    Param::Int(*on),
                    Param::Int(i64::from(*unfinished)),
                ]
            })
            .collect();
        query(&sql::insert_dependencies(rows.len()), params)
            .execute(conn)
            .await?;
    }
    for rows in waiting.chunks(INSERT_ROWS) {
        let params = rows
            .iter()
            .flat_map(|(job, remaining, run_at, on_failure)| {
                [
                    Param::Int(*job),
                    Param::Int(*remaining),
                    Param::Time(*run_at),
                    Param::Text(on_failure.as_str().to_owned()),
                ]
            })
            .collect();
        query(&sql::insert_waiting(rows.len()), params)
            .execute(conn)
            .await?;
    }
    let mut by_count: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for (callback, n) in joined {
        by_count.entry(n).or_default().push(callback);
    }
    for (n, callbacks) in by_count {
        execute_chunked(conn, &[Param::Int(n)], &callbacks, sql::count_up).await?;
    }
    let mut marked: Vec<i64> = edges
        .iter()
        .filter(|(_, _, unfinished)| *unfinished)
        .map(|(_, on, _)| *on)
        .collect();
    marked.sort_unstable();
    marked.dedup();
    execute_chunked(conn, &[], &marked, sql::mark_dependants).await
}

/// Of the live jobs `ids`, those whose finish [`finish`] must count (they
/// have dependants, or wait): for the paths that archive jobs they did not
/// read with `dependants_linked` (discard, cancel, bulk discard). Read before
/// the rows are deleted, under their locks.
pub(crate) async fn linked(
    conn: &mut AsyncMysqlConnection,
    ids: &[i64],
) -> Result<Vec<i64>, Failure> {
    Ok(load_chunked::<IdRow>(conn, ids, sql::linked_jobs)
        .await?
        .into_iter()
        .map(|row| row.id)
        .collect())
}

/// What the jobs `finished`, which left the live table as `status` at
/// `now`, do to the jobs waiting on them: each waiting job counts each of
/// them once; the last one releases it, a failure cancels one that does
/// not run anyway (naming the lowest failed dependency), and those
/// cancellations are finishes of their own, handled in turn.
pub(crate) async fn finish(
    conn: &mut AsyncMysqlConnection,
    now: NaiveDateTime,
    finished: &[i64],
    status: FinalStatus,
) -> Result<(), Failure> {
    let mut events = vec![(finished.to_vec(), status)];
    while let Some((finished, status)) = events.pop() {
        // A job that held a lease (acked, nacked, reclaimed) was not
        // waiting; one discarded or cancelled may have been.
        if matches!(status, FinalStatus::Discarded | FinalStatus::Cancelled) {
            execute_chunked(conn, &[], &finished, sql::delete_waiting).await?;
        }
        let edges = load_chunked::<EdgeRow>(conn, &finished, sql::unfinished_edges).await?;
        if edges.is_empty() {
            continue;
        }
        execute_chunked(conn, &[], &finished, sql::finish_edges).await?;
        // Per waiting job: how many of its dependencies finished, and the
        // lowest of them (the edges come by job, then dependency).
        let mut counted: BTreeMap<i64, (i32, i64)> = BTreeMap::new();
        for edge in &edges {
            counted
                .entry(edge.job_id)
                .and_modify(|(n, _)| *n += 1)
                .or_insert((1, edge.depends_on));
        }
        let waiters: Vec<i64> = counted.keys().copied().collect();
        let rows = load_chunked::<WaitingRow>(conn, &waiters, sql::lock_waiting).await?;
        let mut released = Vec::new();
        let mut counts: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
        let mut cancelled: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
        for row in rows {
            let (n, lowest) = counted[&row.job_id];
            let on_failure = DependencyFailure::parse(&row.on_failure).map_err(Failure::Refused)?;
            if !on_failure.counts(status) {
                cancelled.entry(lowest).or_default().push(row.job_id);
            } else if row.remaining > n {
                counts.entry(n).or_default().push(row.job_id);
            } else {
                released.push(row.job_id);
            }
        }
        for (n, ids) in counts {
            execute_chunked(conn, &[Param::Int(i64::from(n))], &ids, sql::count_down).await?;
        }
        if !released.is_empty() {
            let at = [Param::Time(now), Param::Time(now)];
            execute_chunked(conn, &at, &released, sql::release_waiting).await?;
            execute_chunked(conn, &[], &released, sql::delete_waiting).await?;
        }
        let mut all_cancelled = Vec::new();
        for (dependency, ids) in cancelled {
            let locked: Vec<i64> = load_chunked::<IdRow>(conn, &ids, sql::lock_cancelled)
                .await?
                .into_iter()
                .map(|row| row.id)
                .collect();
            let error = dependency_failed(JobId(dependency), status).to_string();
            let first = [Param::Text(error), Param::Time(now)];
            execute_chunked(conn, &first, &locked, sql::archive_cancelled).await?;
            execute_chunked(conn, &[], &ids, sql::delete_waiting).await?;
            delete_live(conn, &locked).await?;
            all_cancelled.extend(locked);
        }
        if !all_cancelled.is_empty() {
            all_cancelled.sort_unstable();
            events.push((all_cancelled, FinalStatus::Cancelled));
        }
    }
    Ok(())
}

impl crate::MySqlStorage {
    pub(crate) async fn job_links_pooled(&self, id: JobId) -> Result<JobLinks> {
        let mut conn = self.connection().await.map_err(interpret_failure)?;
        let now = self
            .resolve_now(&mut conn)
            .await
            .map_err(interpret_failure)?;
        links(&mut conn, now, id).await
    }
}

/// `Storage::job_links` for `id`, read at `now`.
async fn links(conn: &mut AsyncMysqlConnection, now: NaiveDateTime, id: JobId) -> Result<JobLinks> {
    let fail = |e: diesel::result::Error| interpret_failure(Failure::Query(e));
    let found = cached(
        sql::JOB_EXISTS,
        vec![Param::Int(id.get()), Param::Int(id.get())],
    )
    .get_result::<FoundRow>(conn)
    .await
    .map_err(fail)?;
    if found.found == 0 {
        return Err(QueueError::not_found(format!("job {id}")));
    }
    let rows = cached(
        sql::JOB_LINKS,
        vec![Param::Int(id.get()), Param::Int(id.get())],
    )
    .load::<LinkRow>(conn)
    .await
    .map_err(fail)?;
    let mut links = JobLinks::default();
    for row in rows {
        let live = match (row.live_queue, row.available_at) {
            (Some(queue), Some(available_at)) => Some(LiveLink {
                queue,
                available_at: utc(available_at),
                lease_until: row.lease_until.map(utc),
                attempts: i64::from(row.attempts.unwrap_or_default()),
                max_attempts: i64::from(row.max_attempts.unwrap_or_default()),
            }),
            _ => None,
        };
        let finished = match (row.done_queue, row.status_final) {
            (Some(queue), Some(status)) => Some(FinishedLink {
                queue,
                status,
                result: row
                    .result
                    .map(|text| serde_json::from_str(&text).map_err(|e| corrupt("result", e)))
                    .transpose()?,
            }),
            _ => None,
        };
        let link = job_link(JobId(row.other), live, finished, utc(now))?;
        if row.side == 0 {
            links.dependencies.push(link);
        } else {
            links.dependants.push(link);
        }
    }
    Ok(links)
}
