//! Every SQL statement of the SQLite backend, named after its operation
//! (the listings' are written per filter, in `listing.rs`).
//!
//! A bound `LIMIT` is written `LIMIT +?N`, never `LIMIT ?N`. SQLite reads
//! the value bound to a bare `LIMIT ?N` when it plans a statement, and
//! then re-prepares the statement each time that parameter is bound again:
//! every claim re-compiled its `UPDATE` (about 630,000 instructions, 13% of
//! a drain's) before this rule. The unary plus is a no-op on the value and
//! keeps the plan independent of it (`tests::no_statement_binds_a_bare_limit`).

use crate::listing::queues_cte;

/// The ledger of applied migrations.
pub(crate) const MIGRATE_CREATE_LEDGER: &str =
    "CREATE TABLE IF NOT EXISTS queue_schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    checksum   INTEGER NOT NULL,
    applied_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER))
)";

/// The migrations recorded as applied.
pub(crate) const MIGRATE_APPLIED: &str = "SELECT version, checksum FROM queue_schema_migrations";

/// Records one applied migration.
pub(crate) const MIGRATE_RECORD: &str =
    "INSERT INTO queue_schema_migrations (version, name, checksum) VALUES (?1, ?2, ?3)";

/// Checks the file is a readable SQLite database before anything is written.
pub(crate) const OPEN_CHECK: &str = "SELECT count(*) FROM sqlite_schema";

/// The database's clock: UTC microseconds since the Unix epoch.
pub(crate) const NOW_MICROS: &str = "SELECT CAST(unixepoch('subsec') * 1000000 AS INTEGER)";

/// The columns of a live job, as `rows::job` reads them.
macro_rules! job_columns {
    () => {
        "id, queue_name, priority, unique_key, payload, attempts, max_attempts, snoozes, \
         available_at, lease_until, locked_by, first_locked_at, last_error, created_at, updated_at, \
         trace_context, group_key"
    };
}

/// The columns of a live job, as `rows::job` reads them (for the
/// statements `listing.rs` writes).
pub(crate) const JOB_COLUMNS: &str = job_columns!();

/// The filters of a `JobFilter`, state as derived at now: ?1 now, ?2
/// queue, ?3 state, ?4 id, ?5 unique key, ?6 below this id.
macro_rules! job_filter {
    () => {
        "(?2 IS NULL OR queue_name = ?2)
  AND (?3 IS NULL OR (CASE WHEN lease_until > ?1 THEN 'running'
                           WHEN lease_until IS NOT NULL THEN 'stalled'
                           WHEN available_at >= 253402300799999999 THEN 'waiting'
                           WHEN attempts >= max_attempts THEN 'exhausted'
                           WHEN available_at <= ?1 THEN 'pending'
                           ELSE 'scheduled' END) = ?3)
  AND (?4 IS NULL OR id = ?4) AND (?5 IS NULL OR unique_key = ?5) AND (?6 IS NULL OR id < ?6)"
    };
}

/// The columns of a history row, as `rows::record` reads them.
macro_rules! history_columns {
    () => {
        "id, queue_name, priority, unique_key, payload, status_final, result, last_error, \
         attempts, max_attempts, snoozes, processed_by, created_at, started_at, finished_at, \
         trace_context, group_key"
    };
}

/// The columns of a history row, as `rows::record` reads them (for the
/// statements `listing.rs` writes).
pub(crate) const HISTORY_COLUMNS: &str = history_columns!();

/// Rows per multi-row statement. SQLite's bundled library takes at most
/// 32,766 parameters per statement; the widest row below has 10, so a chunk
/// stays far under it while one statement still carries a whole usual batch.
///
/// The multi-row statements number their parameters by position (plain
/// `?`): sqlx looks up the name of every parameter it binds, and SQLite
/// finds a name by walking the list of named parameters, so numbered
/// parameters (`?NNN`) would cost time quadratic in their count.
pub(crate) const ROWS_PER_STATEMENT: usize = 1_000;

/// Appends `rows` comma-separated tuples of `width` positional parameters.
fn tuples(sql: &mut String, rows: usize, width: usize) {
    let tuple = format!("({})", vec!["?"; width].join(","));
    for row in 0..rows {
        if row > 0 {
            sql.push(',');
        }
        sql.push_str(&tuple);
    }
}

/// Inserts `rows` jobs, skipping each whose unique key is live in its queue;
/// returns `id, queue_name, unique_key` of the rows inserted. Binds per row:
/// queue, priority, key, payload, max attempts, available at, now, now,
/// trace context, group key.
///
/// The rows are inserted in the order of the VALUES list inside one write
/// transaction, and AUTOINCREMENT hands out increasing ids, so the ids of
/// the rows inserted ascend in that order whatever order RETURNING lists
/// them in.
///
/// With `keyed` false every row's key is NULL, so none can conflict: the
/// statement has no conflict clause and returns nothing, and the caller
/// reads the ids from the last inserted rowid (AUTOINCREMENT hands them out
/// consecutively to the rows of one statement under the write lock), which
/// spares streaming a row per job back from the connection's thread.
pub(crate) fn enqueue_many(rows: usize, keyed: bool) -> String {
    let mut sql = String::from(
        "INSERT INTO job_queue (queue_name, priority, unique_key, payload, max_attempts, \
         available_at, created_at, updated_at, trace_context, group_key)\nVALUES ",
    );
    tuples(&mut sql, rows, 10);
    if keyed {
        sql.push_str(
            "\nON CONFLICT (queue_name, unique_key) DO NOTHING\nRETURNING id, queue_name, unique_key",
        );
    }
    sql
}

/// The live job holding a unique key in a queue.
pub(crate) const ENQUEUE_EXISTING: &str =
    "SELECT id FROM job_queue WHERE queue_name = ?1 AND unique_key = ?2";

/// The highest priority below ?2 among the unleased jobs of queue ?1: one
/// step of the claim's walk over priority levels (one probe of the dequeue
/// index, however many jobs share a priority). The first step binds a
/// bound above every `i32`.
pub(crate) const DEQUEUE_LEVEL: &str = "SELECT priority FROM job_queue
WHERE queue_name = ?1 AND lease_until IS NULL AND priority < ?2
ORDER BY priority DESC
LIMIT 1";

/// Up to ?3 claimable jobs of queue ?2 at priority ?4, best first. ?1 now.
/// A range scan of the dequeue index on (queue, priority, available_at <=
/// now): it ends at the first job not due yet, so jobs waiting for their
/// time are never read. The claims name their index: left to itself, the
/// planner took the range `available_at <= now` on `job_queue_next_due`
/// and sorted every due job for each claim.
pub(crate) const DEQUEUE_PICK: &str = "SELECT id, priority, available_at
FROM job_queue INDEXED BY job_queue_dequeue
WHERE queue_name = ?2 AND lease_until IS NULL AND priority = ?4 AND available_at <= ?1
  AND attempts < max_attempts
  AND NOT EXISTS (SELECT 1 FROM queue_config p WHERE p.queue_name = ?2 AND p.paused)
ORDER BY available_at, id
LIMIT +?3";

/// Leases the best ?5 claimable jobs of queue ?2 at its highest priority
/// level until ?3 to worker ?4, in one statement. ?1 now. The range scan
/// ends at the first job of that level not due yet; when it takes fewer
/// than ?5, the caller walks the lower levels (`DEQUEUE_LEVEL`).
pub(crate) const DEQUEUE_CLAIM_QUEUE: &str = concat!(
    "UPDATE job_queue
SET attempts = attempts + 1, lease_until = ?3, locked_by = ?4,
    first_locked_at = COALESCE(first_locked_at, ?1), updated_at = ?1
WHERE id IN (
    SELECT id FROM job_queue INDEXED BY job_queue_dequeue
    WHERE queue_name = ?2 AND lease_until IS NULL AND available_at <= ?1
      AND priority = (SELECT priority FROM job_queue
                      WHERE queue_name = ?2 AND lease_until IS NULL
                      ORDER BY priority DESC LIMIT 1)
      AND attempts < max_attempts
      AND NOT EXISTS (SELECT 1 FROM queue_config p WHERE p.queue_name = ?2 AND p.paused)
    ORDER BY available_at, id
    LIMIT +?5)
RETURNING ",
    job_columns!()
);

/// The first ?6 claimable jobs of queue ?2 at ?1 (now) in its top
/// priority level, in claim order, when the queue's only claim limits are
/// its groups' and it is not paused (none otherwise): the page
/// [`GROUP_CLAIM_QUEUE`] takes its jobs from.
macro_rules! group_claim_page {
    () => {
        "SELECT id, available_at, group_key FROM job_queue INDEXED BY job_queue_dequeue
        WHERE queue_name = ?2 AND lease_until IS NULL AND available_at <= ?1
          AND priority = (SELECT priority FROM job_queue
                          WHERE queue_name = ?2 AND lease_until IS NULL
                          ORDER BY priority DESC LIMIT 1)
          AND attempts < max_attempts
          AND EXISTS (SELECT 1 FROM queue_config c
                      WHERE c.queue_name = ?2 AND NOT c.paused AND NOT c.fair_groups
                        AND c.concurrency_limit IS NULL AND c.rate_per_second IS NULL
                        AND c.priority_aging_ms IS NULL)
        ORDER BY available_at, id
        LIMIT +?6"
    };
}

/// The grouped claim in one statement, for a queue whose only claim limits
/// are its groups' (a group concurrency, groups' own limits): leases until
/// ?3 to worker ?4 up to ?5 claimable jobs of queue ?2 at ?1 (now), taken
/// in claim order from the first ?6 jobs of its top priority level, each
/// only while its group holds fewer leases than its limit (the group's
/// own, else the queue's, else none) counting the jobs of the group taken
/// before it in this statement. Claims nothing when the queue has another
/// limit or is paused: the caller then takes the limited path, which also
/// takes whatever this statement could not see (the rest of the level, the
/// levels below).
pub(crate) const GROUP_CLAIM_QUEUE: &str = concat!(
    "UPDATE job_queue
SET attempts = attempts + 1, lease_until = ?3, locked_by = ?4,
    first_locked_at = COALESCE(first_locked_at, ?1), updated_at = ?1
WHERE id IN (
    SELECT id FROM (",
    group_claim_page!(),
    ") r
    WHERE r.group_key IS NULL
       OR 1 + (SELECT count(*) FROM (",
    group_claim_page!(),
    ") e
               WHERE e.group_key = r.group_key
                 AND (e.available_at, e.id) < (r.available_at, r.id))
            + (SELECT count(*) FROM job_queue h INDEXED BY job_queue_group_leased
               WHERE h.queue_name = ?2 AND h.group_key = r.group_key
                 AND h.lease_until IS NOT NULL AND h.group_key IS NOT NULL)
          <= COALESCE((SELECT g.concurrency_limit FROM queue_group_limit g
                       WHERE g.queue_name = ?2 AND g.group_key = r.group_key),
                      (SELECT c.group_concurrency_limit FROM queue_config c
                       WHERE c.queue_name = ?2),
                      9223372036854775807)
    ORDER BY r.available_at, r.id
    LIMIT +?5)
RETURNING ",
    job_columns!()
);

/// Leases the unleased jobs whose ids are in the JSON array ?2 until ?3 to
/// worker ?4, in one statement. ?1 now.
pub(crate) const DEQUEUE_CLAIM_IDS: &str = concat!(
    "UPDATE job_queue
SET attempts = attempts + 1, lease_until = ?3, locked_by = ?4,
    first_locked_at = COALESCE(first_locked_at, ?1), updated_at = ?1
WHERE id IN (SELECT value FROM json_each(?2)) AND lease_until IS NULL
RETURNING ",
    job_columns!()
);

/// Archives the live row ?2 into history as status ?3 with result ?4 and
/// last error ?5 (NULL keeps the row's own); `processed_by` from ?6. ?1 now.
pub(crate) const ARCHIVE: &str = "INSERT INTO job_history (id, queue_name, priority, unique_key,
    payload, status_final, result, last_error, attempts, max_attempts, snoozes, processed_by,
    created_at, started_at, finished_at, trace_context, group_key)
SELECT id, queue_name, priority, unique_key, payload, ?3, ?4, COALESCE(?5, last_error), attempts,
       max_attempts, snoozes, ?6, created_at, first_locked_at, ?1, trace_context, group_key
FROM job_queue WHERE id = ?2";

/// Deletes a live row.
pub(crate) const DELETE_LIVE: &str = "DELETE FROM job_queue WHERE id = ?1";

/// Deletes the live rows whose ids are in the JSON array ?1.
pub(crate) const DELETE_LIVE_IDS: &str =
    "DELETE FROM job_queue WHERE id IN (SELECT value FROM json_each(?1))";

/// Archives as `completed` each of `rows` leases that is still current;
/// returns the lease (`id, processed_by, attempts`) of each row archived.
/// Binds per row: id, worker, attempt, result; then now. The live rows are
/// left for [`DELETE_LIVE_IDS`].
pub(crate) fn ack_many(rows: usize) -> String {
    let mut sql = String::from("WITH acked (a_id, a_worker, a_attempt, a_result) AS (VALUES ");
    tuples(&mut sql, rows, 4);
    sql.push_str(
        ")
INSERT INTO job_history (id, queue_name, priority, unique_key, payload, status_final, result,
    last_error, attempts, max_attempts, snoozes, processed_by, created_at, started_at, finished_at,
    trace_context, group_key)
SELECT q.id, q.queue_name, q.priority, q.unique_key, q.payload, 'completed', a.a_result,
       q.last_error, q.attempts, q.max_attempts, q.snoozes, a.a_worker, q.created_at,
       q.first_locked_at, ?, q.trace_context, q.group_key
FROM acked a JOIN job_queue q
  ON q.id = a.a_id AND q.locked_by = a.a_worker AND q.attempts = a.a_attempt
 AND q.lease_until IS NOT NULL
RETURNING id, processed_by, attempts",
    );
    sql
}

/// The current lease (?1 id, ?2 worker, ?3 attempt): attempts left.
pub(crate) const COMPLETE_FIND_LEASE: &str = "SELECT max_attempts - attempts AS left FROM job_queue
WHERE id = ?1 AND locked_by = ?2 AND attempts = ?3 AND lease_until IS NOT NULL";

/// Releases job ?2 for a retry at ?3 with last error ?4. ?1 now.
pub(crate) const NACK_RETRY: &str = "UPDATE job_queue
SET lease_until = NULL, locked_by = NULL, last_error = ?4, available_at = ?3, updated_at = ?1
WHERE id = ?2";

/// Gives back the current lease (?2 id, ?3 worker, ?4 attempt) uncounted. ?1 now.
pub(crate) const RELEASE: &str = "UPDATE job_queue
SET lease_until = NULL, locked_by = NULL, attempts = attempts - 1, available_at = ?1, updated_at = ?1
WHERE id = ?2 AND locked_by = ?3 AND attempts = ?4 AND lease_until IS NOT NULL";

/// Extends each of `rows` current, unexpired leases; returns the lease
/// (`id, locked_by, attempts`) of each row extended. Binds per row: id,
/// worker, attempt; then the new end of the lease, now, now.
pub(crate) fn heartbeat_many(rows: usize) -> String {
    let mut sql = String::from("WITH beat (b_id, b_worker, b_attempt) AS (VALUES ");
    tuples(&mut sql, rows, 3);
    sql.push_str(
        ")
UPDATE job_queue SET lease_until = ?, updated_at = ?
FROM beat
WHERE id = b_id AND locked_by = b_worker AND attempts = b_attempt AND lease_until > ?
RETURNING id, locked_by, attempts",
    );
    sql
}

/// Up to ?2 jobs to reclaim: expired leases oldest first, then exhausted jobs. ?1 now.
pub(crate) const RECLAIM_STALLED_PICK: &str = "SELECT id, locked_by, attempts, max_attempts FROM (
    SELECT * FROM (SELECT id, locked_by, attempts, max_attempts, 0 AS grp, lease_until AS k
                     FROM job_queue WHERE lease_until <= ?1 ORDER BY lease_until, id LIMIT +?2)
    UNION ALL
    SELECT * FROM (SELECT id, locked_by, attempts, max_attempts, 1 AS grp, NULL AS k
                     FROM job_queue WHERE lease_until IS NULL AND attempts >= max_attempts
                     ORDER BY id LIMIT +?2)
) ORDER BY grp, k, id LIMIT +?2";

/// Returns stalled job ?2 to pending with last error ?3. ?1 now.
pub(crate) const RECLAIM_STALLED_REQUEUE: &str = "UPDATE job_queue
SET lease_until = NULL, locked_by = NULL, available_at = ?1, updated_at = ?1, last_error = ?3
WHERE id = ?2";

/// A dead letter's queue and unique key.
pub(crate) const RETRY_DEAD_LETTER_FIND: &str =
    "SELECT queue_name, unique_key FROM job_history WHERE id = ?1 AND status_final = 'dead_letter'";

/// Moves dead letter ?2 back to the live table under its id. ?1 now.
pub(crate) const RETRY_DEAD_LETTER_RESTORE: &str =
    "INSERT INTO job_queue (id, queue_name, priority, unique_key,
    payload, attempts, max_attempts, snoozes, available_at, last_error, created_at, updated_at,
    trace_context, group_key)
SELECT id, queue_name, priority, unique_key, payload, 0,
       CASE WHEN max_attempts >= 1 THEN max_attempts ELSE 20 END, snoozes, ?1, last_error,
       created_at, ?1, trace_context, group_key
FROM job_history WHERE id = ?2";

/// Deletes a history row.
pub(crate) const DELETE_HISTORY: &str = "DELETE FROM job_history WHERE id = ?1";

/// Deletes up to ?3 history rows finished before ?1, of status ?2 if set.
pub(crate) const PRUNE_HISTORY: &str = "DELETE FROM job_history WHERE id IN (
    SELECT id FROM job_history
    WHERE finished_at < ?1 AND (?2 IS NULL OR status_final = ?2)
    ORDER BY finished_at, id LIMIT +?3)";

/// Counts per queue and derived state, pending and scheduled each up to
/// ?2, and the oldest pending job, with the paused queues. ?1 now. Read
/// from indexes rather than every live row (365 ms at a million jobs):
/// - the queues: one probe of `job_queue_queue` each (`queues_cte!`);
/// - running and stalled: the leased rows (`job_queue_lease_until`: as
///   many as workers hold), exhausted: `job_queue_exhausted` (normally
///   empty), each counted exactly (and capped by the caller);
/// - pending and scheduled: the queue's range of `job_queue_next_due`
///   before or after now, up to ?2 jobs not exhausted, so a queue of a
///   million pending jobs costs the cap, not the million;
/// - the oldest pending job: that range's first job not exhausted.
pub(crate) const STATS: &str = concat!(
    queues_cte!(),
    ", leased AS (
    SELECT queue_name, sum(lease_until > ?1) AS running, sum(lease_until <= ?1) AS stalled
    FROM job_queue INDEXED BY job_queue_lease_until
    WHERE lease_until IS NOT NULL GROUP BY queue_name
),
exhausted AS (
    SELECT queue_name, count(*) AS exhausted
    FROM job_queue INDEXED BY job_queue_exhausted
    WHERE lease_until IS NULL AND attempts >= max_attempts GROUP BY queue_name
)
SELECT qn.name AS queue_name,
    COALESCE((SELECT paused FROM queue_config c WHERE c.queue_name = qn.name), 0) AS paused,
    (SELECT count(*) FROM (
        SELECT 1 FROM job_queue INDEXED BY job_queue_next_due
        WHERE queue_name = qn.name AND lease_until IS NULL AND available_at <= ?1
          AND attempts < max_attempts
        LIMIT +?2)) AS pending,
    (SELECT count(*) FROM (
        SELECT 1 FROM job_queue INDEXED BY job_queue_next_due
        WHERE queue_name = qn.name AND lease_until IS NULL AND available_at > ?1
          AND available_at < 253402300799999999 AND attempts < max_attempts
        LIMIT +?2)) AS scheduled,
    l.running, l.stalled, e.exhausted,
    (SELECT count(*) FROM (
        SELECT 1 FROM job_queue INDEXED BY job_queue_next_due
        WHERE queue_name = qn.name AND lease_until IS NULL
          AND available_at >= 253402300799999999
        LIMIT +?2)) AS waiting,
    (SELECT available_at FROM job_queue INDEXED BY job_queue_next_due
     WHERE queue_name = qn.name AND lease_until IS NULL AND available_at <= ?1
       AND attempts < max_attempts
     ORDER BY available_at LIMIT 1) AS oldest_pending
FROM queues qn
LEFT JOIN leased l ON l.queue_name = qn.name
LEFT JOIN exhausted e ON e.queue_name = qn.name
WHERE qn.name IS NOT NULL
UNION ALL
SELECT queue_name, 1, 0, 0, 0, 0, 0, 0, NULL FROM queue_config c
WHERE paused AND NOT EXISTS (SELECT 1 FROM job_queue WHERE job_queue.queue_name = c.queue_name)
ORDER BY queue_name"
);

/// One live job.
pub(crate) const GET_JOB: &str =
    concat!("SELECT ", job_columns!(), " FROM job_queue WHERE id = ?1");

/// One history row.
pub(crate) const GET_HISTORY: &str = concat!(
    "SELECT ",
    history_columns!(),
    " FROM job_history WHERE id = ?1"
);

/// Marks queue ?2 paused (?3 = 1) or not. ?1 now.
pub(crate) const SET_PAUSED: &str = "INSERT INTO queue_config (queue_name, paused, updated_at)
VALUES (?2, ?3, ?1)
ON CONFLICT (queue_name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at";

/// Clears queue ?2's paused flag, if it has a config row (?3, the flag
/// `SET_PAUSED` binds, is 0 here). ?1 now.
pub(crate) const RESUME: &str =
    "UPDATE queue_config SET paused = 0, updated_at = ?1 WHERE queue_name = ?2 AND ?3 = 0";

/// The earliest future due time of the unleased jobs of queue ?2. ?1 now.
pub(crate) const NEXT_DUE: &str = "SELECT min(available_at) FROM job_queue
WHERE queue_name = ?2 AND lease_until IS NULL AND available_at > ?1
  AND available_at < 253402300799999999";

/// The ids a filter selects, newest first: the filter, ?7 limit.
pub(crate) const SELECT_JOBS: &str = concat!(
    "SELECT id FROM job_queue WHERE ",
    job_filter!(),
    " ORDER BY id DESC LIMIT +?7"
);

/// Makes the selected jobs available at ?1, returning their queues: the
/// filter (its state 'scheduled'), ?7 limit.
pub(crate) const RUN_NOW: &str = concat!(
    "UPDATE job_queue SET available_at = ?1, updated_at = ?1 WHERE id IN (
    SELECT id FROM job_queue WHERE ",
    job_filter!(),
    " ORDER BY id DESC LIMIT +?7) RETURNING queue_name"
);

/// Up to ?3 dead letters (queue ?1, ids below ?2) whose unique key is not
/// live, newest first, with their queue and key (of two with one key,
/// `retry_dead_letters` moves the newest).
pub(crate) const RETRY_DEAD_LETTERS_PICK: &str =
    "SELECT h.id, h.queue_name, h.unique_key FROM job_history h
WHERE h.status_final = 'dead_letter' AND (?1 IS NULL OR h.queue_name = ?1)
  AND (?2 IS NULL OR h.id < ?2)
  AND NOT EXISTS (SELECT 1 FROM job_queue j
                  WHERE j.queue_name = h.queue_name AND j.unique_key = h.unique_key)
ORDER BY h.id DESC LIMIT +?3";

/// Completed and dead-lettered jobs per queue and minute (microseconds)
/// finished in (?1, ?2]: whole minutes from the counters (migration
/// 0006), the window's first, partial minute from history (by
/// `job_history_finished_at`: a minute's rows at most).
pub(crate) const THROUGHPUT: &str = "SELECT queue_name, minute, completed, failed
FROM job_throughput
WHERE minute > (?1 / 60000000) * 60000000 AND minute <= (?2 / 60000000) * 60000000
UNION ALL
SELECT queue_name, (finished_at / 60000000) * 60000000 AS minute,
       SUM(status_final = 'completed') AS completed, SUM(status_final = 'dead_letter') AS failed
FROM job_history
WHERE finished_at > ?1 AND finished_at < (?1 / 60000000) * 60000000 + 60000000
  AND finished_at <= ?2 AND status_final IN ('completed', 'dead_letter')
GROUP BY queue_name, minute";

/// Gives back the current lease (?2 id, ?3 worker, ?4 attempt) uncounted,
/// due again at ?5, one more snooze. ?1 now.
pub(crate) const SNOOZE: &str = "UPDATE job_queue
SET lease_until = NULL, locked_by = NULL, attempts = attempts - 1, snoozes = snoozes + 1,
    available_at = ?5, updated_at = ?1
WHERE id = ?2 AND locked_by = ?3 AND attempts = ?4 AND lease_until IS NOT NULL";

/// The queues whose config limits claims (the limited claim path): a
/// concurrency, a rate, a group concurrency, a group's own limit, a
/// priority aging period or fair groups (which change the claim's order).
pub(crate) const LIMITED_QUEUES: &str = "SELECT queue_name FROM queue_config c
WHERE concurrency_limit IS NOT NULL OR rate_per_second IS NOT NULL
   OR group_concurrency_limit IS NOT NULL OR priority_aging_ms IS NOT NULL OR fair_groups
   OR EXISTS (SELECT 1 FROM queue_group_limit g WHERE g.queue_name = c.queue_name)";

/// The queues whose only claim limits are their groups' (a group
/// concurrency or a group's own limit; no concurrency or rate limit, no
/// priority aging, no fair groups): [`GROUP_CLAIM_QUEUE`] claims them.
pub(crate) const GROUPS_ONLY_QUEUES: &str = "SELECT queue_name FROM queue_config c
WHERE concurrency_limit IS NULL AND rate_per_second IS NULL AND priority_aging_ms IS NULL
  AND NOT fair_groups
  AND (group_concurrency_limit IS NOT NULL
       OR EXISTS (SELECT 1 FROM queue_group_limit g WHERE g.queue_name = c.queue_name))";

/// The claim limits, bucket and held leases (`held`, expired ones too
/// until reclaim; 0 without a concurrency limit) of the queues named in
/// the JSON array ?1 that have limits; `grouped` is 1 when some group of
/// the queue is limited (a group concurrency or a group's own limit). The count reads the index of held
/// leases, so the queue's waiting jobs are never visited; its cost grows
/// with the leases held in the whole database. Run inside the claim's
/// write transaction, nothing changes between this read and the claim.
pub(crate) const FLOW_CLAIM_LIMITS: &str = "SELECT c.queue_name, c.concurrency_limit,
    c.rate_per_second, c.rate_burst, c.tokens, c.refilled_at, c.group_concurrency_limit,
    c.priority_aging_ms, c.fair_groups,
    (c.group_concurrency_limit IS NOT NULL
     OR EXISTS (SELECT 1 FROM queue_group_limit g WHERE g.queue_name = c.queue_name)) AS grouped,
    CASE WHEN c.concurrency_limit IS NULL THEN 0
         ELSE (SELECT count(*) FROM job_queue j INDEXED BY job_queue_lease_until
               WHERE j.lease_until IS NOT NULL AND j.queue_name = c.queue_name) END AS held
FROM queue_config c
WHERE c.queue_name IN (SELECT value FROM json_each(?1))
  AND (c.concurrency_limit IS NOT NULL OR c.rate_per_second IS NOT NULL
       OR c.group_concurrency_limit IS NOT NULL OR c.priority_aging_ms IS NOT NULL
       OR c.fair_groups
       OR EXISTS (SELECT 1 FROM queue_group_limit g WHERE g.queue_name = c.queue_name))";

/// The leases each group of queue ?1 holds (expired ones too, until
/// reclaim), from the index of leased grouped rows: the limited claim
/// counts them inside its write transaction.
pub(crate) const GROUP_HELD: &str = "SELECT group_key, count(*) AS held
FROM job_queue INDEXED BY job_queue_group_leased
WHERE queue_name = ?1 AND lease_until IS NOT NULL AND group_key IS NOT NULL
GROUP BY group_key";

/// The groups of queue ?1 with their own limit.
pub(crate) const GROUP_OVERRIDES: &str =
    "SELECT group_key, concurrency_limit FROM queue_group_limit WHERE queue_name = ?1";

/// Up to ?7 claimable jobs of queue ?1 at ?2 (now), in claim order, after
/// the job (?4 priority, ?5 available_at, ?6 id) the previous page ended
/// at, leaving out the jobs of the full groups named in the JSON array ?3:
/// one page of the grouped claim's walk. The first page binds a priority
/// above every `i32`.
pub(crate) const GROUP_PICK: &str = "SELECT id, priority, available_at, group_key
FROM job_queue INDEXED BY job_queue_dequeue
WHERE queue_name = ?1 AND lease_until IS NULL AND available_at <= ?2
  AND attempts < max_attempts
  AND (group_key IS NULL OR group_key NOT IN (SELECT value FROM json_each(?3)))
  AND (priority < ?4 OR (priority = ?4 AND (available_at > ?5 OR (available_at = ?5 AND id > ?6))))
  AND NOT EXISTS (SELECT 1 FROM queue_config p WHERE p.queue_name = ?1 AND p.paused)
ORDER BY priority DESC, available_at, id
LIMIT +?7";

/// Up to ?7 claimable jobs of queue ?1 at priority ?4 at ?2 (now), in
/// the level's claim order (available_at, id), after the job (?5
/// available_at, ?6 id) the previous page of the level ended at, leaving
/// out the jobs of the full groups named in the JSON array ?3 (`[]` for a
/// queue without group limits): one page of one level in the aging
/// claim's merge. Within a level, jobs due earlier have waited longer, so
/// this order is also the level's order by effective priority. A range
/// scan of the dequeue index on (queue, priority, available_at).
pub(crate) const AGED_LEVEL_PICK: &str = "SELECT id, priority, available_at, group_key
FROM job_queue INDEXED BY job_queue_dequeue
WHERE queue_name = ?1 AND lease_until IS NULL AND priority = ?4 AND available_at <= ?2
  AND attempts < max_attempts
  AND (group_key IS NULL OR group_key NOT IN (SELECT value FROM json_each(?3)))
  AND (available_at > ?5 OR (available_at = ?5 AND id > ?6))
  AND NOT EXISTS (SELECT 1 FROM queue_config p WHERE p.queue_name = ?1 AND p.paused)
ORDER BY available_at, id
LIMIT +?7";

/// Gives group ?2 of queue ?1 its own limit ?3, if the queue has a config
/// row: one row changed when it does, none otherwise.
pub(crate) const SET_GROUP_LIMIT: &str = "INSERT INTO queue_group_limit (queue_name, group_key,
    concurrency_limit)
SELECT queue_name, ?2, ?3 FROM queue_config WHERE queue_name = ?1
ON CONFLICT (queue_name, group_key) DO UPDATE SET concurrency_limit = excluded.concurrency_limit";

/// Removes group ?2 of queue ?1's own limit.
pub(crate) const DELETE_GROUP_LIMIT: &str =
    "DELETE FROM queue_group_limit WHERE queue_name = ?1 AND group_key = ?2";

/// Gives group ?2 of queue ?1 its own weight ?3, if the queue has a config
/// row: one row changed when it does, none otherwise.
pub(crate) const SET_GROUP_WEIGHT: &str = "INSERT INTO queue_group_weight (queue_name, group_key,
    weight)
SELECT queue_name, ?2, ?3 FROM queue_config WHERE queue_name = ?1
ON CONFLICT (queue_name, group_key) DO UPDATE SET weight = excluded.weight";

/// Removes group ?2 of queue ?1's own weight.
pub(crate) const DELETE_GROUP_WEIGHT: &str =
    "DELETE FROM queue_group_weight WHERE queue_name = ?1 AND group_key = ?2";

/// Every group's own weight, by queue, then group (byte order).
pub(crate) const GROUP_WEIGHTS: &str = "SELECT queue_name, group_key, weight
FROM queue_group_weight ORDER BY queue_name, group_key";

/// Whether queue ?1 has a config row.
pub(crate) const QUEUE_CONFIGURED: &str = "SELECT 1 FROM queue_config WHERE queue_name = ?1";

/// Every group's own limit, by queue, then group (byte order).
pub(crate) const GROUP_LIMITS: &str = "SELECT queue_name, group_key, concurrency_limit
FROM queue_group_limit ORDER BY queue_name, group_key";

/// Stores queue ?1's bucket: ?2 tokens at ?3.
pub(crate) const FLOW_TAKE_TOKENS: &str =
    "UPDATE queue_config SET tokens = ?2, refilled_at = ?3 WHERE queue_name = ?1";

/// Sets queue ?2's limits (?3 concurrency, ?4 rate, ?5 burst, ?6 lease ms,
/// ?7 backoff base ms, ?8 min ms, ?9 max ms, ?10 jitter, ?12 group
/// concurrency, ?13 priority aging ms, ?14 fair groups), its bucket full (?11 tokens, NULL
/// without a rate, refilled at ?1), keeping its paused flag. ?1 now.
pub(crate) const CONFIGURE_QUEUE: &str = "INSERT INTO queue_config (queue_name, paused,
    concurrency_limit, rate_per_second, rate_burst, lease_ms, backoff_base_ms, backoff_min_ms,
    backoff_max_ms, backoff_jitter, tokens, refilled_at, updated_at, group_concurrency_limit,
    priority_aging_ms, fair_groups)
VALUES (?2, 0, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?1, ?1, ?12, ?13, ?14)
ON CONFLICT (queue_name) DO UPDATE SET concurrency_limit = excluded.concurrency_limit,
    rate_per_second = excluded.rate_per_second, rate_burst = excluded.rate_burst,
    lease_ms = excluded.lease_ms, backoff_base_ms = excluded.backoff_base_ms,
    backoff_min_ms = excluded.backoff_min_ms, backoff_max_ms = excluded.backoff_max_ms,
    backoff_jitter = excluded.backoff_jitter, tokens = excluded.tokens,
    refilled_at = excluded.refilled_at, updated_at = excluded.updated_at,
    group_concurrency_limit = excluded.group_concurrency_limit,
    priority_aging_ms = excluded.priority_aging_ms, fair_groups = excluded.fair_groups";

/// Every queue's config row, by name.
pub(crate) const QUEUE_CONFIGS: &str = "SELECT queue_name, paused, concurrency_limit,
    rate_per_second, rate_burst, lease_ms, backoff_base_ms, backoff_min_ms, backoff_max_ms,
    backoff_jitter, group_concurrency_limit, priority_aging_ms, fair_groups
FROM queue_config
WHERE paused OR concurrency_limit IS NOT NULL OR rate_per_second IS NOT NULL
   OR lease_ms IS NOT NULL OR backoff_base_ms IS NOT NULL OR group_concurrency_limit IS NOT NULL
   OR priority_aging_ms IS NOT NULL OR fair_groups
ORDER BY queue_name";

/// Records fire ?2 of schedule ?1 (next fire ?3) unless a fire at or after
/// it is recorded: one row changed when recorded, none otherwise.
pub(crate) const ENQUEUE_PERIODIC: &str = "INSERT INTO queue_schedule (schedule_name, last_fire_at,
    next_fire_at)
VALUES (?1, ?2, ?3)
ON CONFLICT (schedule_name) DO UPDATE SET last_fire_at = excluded.last_fire_at,
    next_fire_at = excluded.next_fire_at
WHERE queue_schedule.last_fire_at < excluded.last_fire_at";

/// Every schedule's latest fire, by name.
pub(crate) const SCHEDULES: &str =
    "SELECT schedule_name, last_fire_at, next_fire_at FROM queue_schedule ORDER BY schedule_name";

/// Inserts worker ?1 or replaces every column of its row; `last_seen` ?7
/// is the write's now either way (the heartbeat).
pub(crate) const REGISTER_WORKER: &str = "INSERT INTO queue_worker (worker_id, host, pid, version,
    queues, started_at, last_seen)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
ON CONFLICT (worker_id) DO UPDATE SET host = excluded.host, pid = excluded.pid,
    version = excluded.version, queues = excluded.queues, started_at = excluded.started_at,
    last_seen = excluded.last_seen";

/// Deletes worker ?1's row.
pub(crate) const DEREGISTER_WORKER: &str = "DELETE FROM queue_worker WHERE worker_id = ?1";

/// Deletes the workers last seen `forget_after` (?2 microseconds) or more
/// before now (?1): the first statement of `list_workers`' transaction.
pub(crate) const LIST_WORKERS_FORGET: &str = "DELETE FROM queue_worker WHERE last_seen <= ?1 - ?2";

/// Every worker left, by id: the second statement of `list_workers`.
pub(crate) const LIST_WORKERS: &str = "SELECT worker_id, host, pid, version, queues, started_at,
    last_seen FROM queue_worker ORDER BY worker_id";

/// Adds ?4 jobs to lag row (minute ?1, queue ?2, bucket ?3).
pub(crate) const RECORD_LAG: &str = "INSERT INTO job_sample_lag (minute, queue_name, bucket, jobs)
VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (minute, queue_name, bucket) DO UPDATE SET jobs = jobs + excluded.jobs";

/// Sets depth row (minute ?1, queue ?2) to ?3 pending, ?4 scheduled, ?5
/// running.
pub(crate) const RECORD_DEPTH: &str = "INSERT INTO job_sample_depth
    (minute, queue_name, pending, scheduled, running)
VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT (minute, queue_name) DO UPDATE
SET pending = excluded.pending, scheduled = excluded.scheduled, running = excluded.running";

/// Deletes the lag rows of minutes before ?1.
pub(crate) const PRUNE_LAG_SAMPLES: &str = "DELETE FROM job_sample_lag WHERE minute < ?1";

/// Deletes the depth rows of minutes before ?1.
pub(crate) const PRUNE_DEPTH_SAMPLES: &str = "DELETE FROM job_sample_depth WHERE minute < ?1";

/// Per queue and minute in `(?1, ?2]`, its lags as one text (`lags` set,
/// `queue_core::backend::lag_text`'s form: a row per sample rather than per
/// bucket), and its depth (`pending`, `scheduled`, `running` set).
pub(crate) const SAMPLES: &str = "
SELECT queue_name, minute, group_concat(bucket || ':' || jobs, ' ') AS lags,
       NULL AS pending, NULL AS scheduled, NULL AS running
FROM job_sample_lag WHERE minute > ?1 AND minute <= ?2
GROUP BY minute, queue_name
UNION ALL
SELECT queue_name, minute, NULL, pending, scheduled, running
FROM job_sample_depth WHERE minute > ?1 AND minute <= ?2";

/// Each group's turn in fair queue ?1 (`''`: the jobs without a group key).
pub(crate) const FAIR_TURNS: &str =
    "SELECT group_key, turn, taken FROM job_group_turn WHERE queue_name = ?1";

/// The groups of queue ?1 given their own weight, and their weights.
pub(crate) const FAIR_WEIGHTS: &str =
    "SELECT group_key, weight FROM queue_group_weight WHERE queue_name = ?1";

/// The first group key of queue ?1 above ?2 among its unleased jobs (NULL
/// past the last): one step of the skip scan of `job_queue_fair` that
/// lists a fair queue's groups, one index probe per group.
pub(crate) const FAIR_NEXT_GROUP: &str =
    "SELECT min(group_key) FROM job_queue INDEXED BY job_queue_fair
WHERE queue_name = ?1 AND lease_until IS NULL AND group_key > ?2";

/// The highest priority below ?3 among the unleased jobs of group ?2 (NULL:
/// no group key) of queue ?1: one step of the walk over a group's levels.
pub(crate) const FAIR_GROUP_LEVEL: &str = "SELECT priority FROM job_queue INDEXED BY job_queue_fair
WHERE queue_name = ?1 AND group_key IS ?2 AND lease_until IS NULL AND priority < ?3
ORDER BY priority DESC
LIMIT 1";

/// Up to ?7 claimable jobs of group ?2 (NULL: no group key) of queue ?1 at
/// priority ?3, due at ?4 (now), after the job (?5 available_at, ?6 id)
/// the previous page ended at, oldest first: a range of `job_queue_fair`
/// that ends at the first job not due yet.
pub(crate) const FAIR_LEVEL_PICK: &str = "SELECT id, priority, available_at, group_key
FROM job_queue INDEXED BY job_queue_fair
WHERE queue_name = ?1 AND group_key IS ?2 AND lease_until IS NULL AND priority = ?3
  AND available_at <= ?4 AND attempts < max_attempts
  AND (available_at > ?5 OR (available_at = ?5 AND id > ?6))
  AND NOT EXISTS (SELECT 1 FROM queue_config p WHERE p.queue_name = ?1 AND p.paused)
ORDER BY available_at, id
LIMIT +?7";

/// Advances fair queue ?1's claim count by ?2 (the jobs a claim took from
/// it) and answers the new count.
pub(crate) const FAIR_COUNT: &str = "UPDATE queue_config SET claim_count = claim_count + ?2
WHERE queue_name = ?1 RETURNING claim_count";

/// Sets group ?2's turn in queue ?1 to ?3 (NULL: leaves it, 0 for a new
/// row) and the jobs it has taken towards its weight to ?4.
pub(crate) const FAIR_TURN: &str = "INSERT INTO job_group_turn (queue_name, group_key, turn, taken)
VALUES (?1, ?2, COALESCE(?3, 0), ?4)
ON CONFLICT (queue_name, group_key) DO UPDATE SET turn = COALESCE(?3, turn), taken = ?4";

// Workflows: dependencies between jobs (migration 0012).

/// `queue_core::waiting_at()` in microseconds: a waiting job's
/// `available_at`. The statements that tell waiting jobs apart (stats,
/// `NEXT_DUE`, the listings' state filters) write the same number as a
/// literal; the workflow conformance cases fail if one differs.
pub(crate) const WAITING_AT: i64 = 253_402_300_799_999_999;

/// Where dependency ?1 stands: 'live', its final status, or no row.
pub(crate) const DEPENDENCY_STATUS: &str = "SELECT 'live' FROM job_queue WHERE id = ?1
UNION ALL SELECT status_final FROM job_history WHERE id = ?1 LIMIT 1";

/// Records edges: the JSON array ?1 of `[job, dependency, unfinished]`
/// (unfinished 1 while the dependency is live), distinct pairs.
pub(crate) const INSERT_DEPENDENCIES: &str =
    "INSERT INTO job_dependency (job_id, depends_on, unfinished)
SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(?1)";

/// Makes live jobs wait: the JSON array ?1 of `[job, remaining, run_at,
/// on_failure]` (run_at the `available_at` it was enqueued for), and
/// writes their `available_at` at [`WAITING_AT`] (?2; ?3 now).
pub(crate) const INSERT_WAITING: &str =
    "INSERT INTO job_waiting (job_id, remaining, run_at, on_failure)
SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(?1)";

/// The jobs in the JSON array ?1 wait: `available_at` ?2, now ?3.
pub(crate) const SET_WAITING: &str = "UPDATE job_queue SET available_at = ?2, updated_at = ?3
WHERE id IN (SELECT value FROM json_each(?1))";

/// Counts the finish of each job in the JSON array ?1, once, for each job
/// waiting on it: (waiting job, finished dependency) per edge counted.
pub(crate) const FINISH_DEPENDENCIES: &str = "UPDATE job_dependency SET unfinished = 0
WHERE depends_on IN (SELECT value FROM json_each(?1)) AND unfinished = 1
RETURNING job_id, depends_on";

/// Of the waiting jobs in the JSON array ?1, those a failed dependency
/// cancels.
pub(crate) const CANCELLED_BY_FAILURE: &str = "SELECT job_id FROM job_waiting
WHERE job_id IN (SELECT value FROM json_each(?1)) AND on_failure = 'cancel'";

/// The JSON array ?1 of `[job, count]` as a table `c (id, n)`: how many
/// of each waiting job's dependencies one finish counted.
macro_rules! counted {
    () => {
        "(SELECT value ->> 0 AS id, value ->> 1 AS n FROM json_each(?1)) c"
    };
}

/// Releases the waiting jobs whose count ([`counted!`]) reaches their
/// remaining dependencies: due at the later of now (?2) and the time each
/// was enqueued for; their queues, for the wake-up.
pub(crate) const RELEASE_WAITING: &str = concat!(
    "UPDATE job_queue SET available_at = max(w.run_at, ?2), updated_at = ?2
FROM ",
    counted!(),
    " JOIN job_waiting w ON w.job_id = c.id
WHERE job_queue.id = c.id AND w.remaining <= c.n
RETURNING job_queue.queue_name"
);

/// Forgets the waiting jobs [`RELEASE_WAITING`] released.
pub(crate) const DELETE_RELEASED: &str = concat!(
    "DELETE FROM job_waiting WHERE job_id IN (SELECT w.job_id FROM ",
    counted!(),
    " JOIN job_waiting w ON w.job_id = c.id WHERE w.remaining <= c.n)"
);

/// Makes waiting callbacks wait for the jobs that joined their batches:
/// the JSON array ?1 of `[callback, joined]` as [`counted!`].
pub(crate) const JOIN_WAITING: &str = concat!(
    "UPDATE job_waiting SET remaining = remaining + c.n FROM ",
    counted!(),
    " WHERE job_waiting.job_id = c.id"
);

/// Whether job ?1 is waiting: a batch's callback that jobs may still join.
pub(crate) const IS_WAITING: &str = "SELECT EXISTS (SELECT 1 FROM job_waiting WHERE job_id = ?1)";

/// Counts the others' finishes off ([`counted!`], run after
/// [`DELETE_RELEASED`]).
pub(crate) const COUNT_DOWN_WAITING: &str = concat!(
    "UPDATE job_waiting SET remaining = remaining - c.n FROM ",
    counted!(),
    " WHERE job_waiting.job_id = c.id"
);

/// The jobs in the JSON array ?1 wait no more.
pub(crate) const DELETE_WAITING_IDS: &str =
    "DELETE FROM job_waiting WHERE job_id IN (SELECT value FROM json_each(?1))";

/// Job ?1's dependencies (`other`), then its dependants, with where each
/// stands: live columns, else history's, else neither.
pub(crate) const JOB_LINKS: &str = "SELECT l.side, l.other,
       q.queue_name AS live_queue, q.available_at, q.lease_until, q.attempts, q.max_attempts,
       h.queue_name AS done_queue, h.status_final, h.result
FROM (SELECT 0 AS side, depends_on AS other FROM job_dependency WHERE job_id = ?1
      UNION ALL
      SELECT 1, job_id FROM job_dependency INDEXED BY job_dependency_depends_on
      WHERE depends_on = ?1) l
LEFT JOIN job_queue q ON q.id = l.other
LEFT JOIN job_history h ON h.id = l.other
ORDER BY l.side, l.other";

/// Whether job ?1 is live or in history.
pub(crate) const JOB_EXISTS: &str = "SELECT EXISTS (SELECT 1 FROM job_queue WHERE id = ?1)
    OR EXISTS (SELECT 1 FROM job_history WHERE id = ?1)";

#[cfg(test)]
mod tests {
    /// No source file of the crate writes a bound `LIMIT` bare (see the
    /// module's documentation): a statement with one is re-prepared on
    /// every call.
    #[test]
    fn no_statement_binds_a_bare_limit() {
        let bare = concat!("LIMIT", " ?");
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut offenders = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("src") {
            let path = entry.expect("entry").path();
            let text = std::fs::read_to_string(&path).expect("a source file");
            for (n, line) in text.lines().enumerate() {
                if line.contains(bare) && !line.trim_start().starts_with("//") {
                    offenders.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                }
            }
        }
        assert!(offenders.is_empty(), "bare bound LIMITs: {offenders:#?}");
    }

    #[test]
    fn the_waiting_instant_is_queue_cores() {
        assert_eq!(
            super::WAITING_AT,
            queue_core::waiting_at().timestamp_micros()
        );
    }
}
