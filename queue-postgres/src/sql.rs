//! Every statement `PgStorage` runs, one per operation.
//!
//! Templates name tables as `{s}.table`, the wake-up channel as `{chan}`
//! and the cancellation channel as `{cancel_chan}`;
//! [`Statements::for_schema`] fills them in once per storage, so each
//! statement is one stable string that sqlx prepares once per connection.
//! `$1` is always the clock override: `COALESCE($1::timestamptz, now())`
//! is the database's now unless a manual clock is bound.

use queue_core::JobState;
use sqlx::{AssertSqlSafe, SqlSafeStr, SqlStr};

/// The columns of a live job, in the order `rows::job` reads them.
const JOB_COLUMNS: &str = "id, queue_name, priority, unique_key, payload, attempts, max_attempts, \
     available_at, lease_until, locked_by, first_locked_at, last_error, created_at, updated_at, snoozes, \
     trace_context";

/// The columns of a history row, in the order `rows::record` reads them.
const HISTORY_COLUMNS: &str = "id, queue_name, priority, unique_key, payload, status_final, \
     result, last_error, attempts, max_attempts, processed_by, created_at, started_at, finished_at, \
     snoozes, trace_context";

/// Inserts one batch; per input row: its ordinal, the id, whether it existed.
/// A NULL id means the conflicting row committed after this statement's
/// snapshot; the caller runs those rows again. `{signal}` is the NOTIFY
/// of each queue inserted into (in the caller's transaction) or nothing
/// (in the pool, where `notify::Signals` sends it after the commit).
///
/// Rows without a unique key cannot conflict (the unique index holds NULL
/// keys apart), so they go in by a plain INSERT; only keyed rows pay for
/// ON CONFLICT's speculative insertion. Its `WHERE unique_key IS NOT NULL`
/// (here and in [`ENQUEUE_ONE`]) lets it infer either form of
/// `job_queue_unique_key`: plain, as migrated, or partial
/// (`queue-postgres/migrations/optional/keyless_jobs_unindexed.sql`). And only keyed rows that were not
/// inserted look up the live job holding their key (a scalar subquery
/// evaluated for those rows alone, instead of a join that probed the index
/// for every row). Both INSERTs take their ids from `input` (one `nextval`
/// per row, in input order): a keyless row's id is its `new_id`, and a
/// keyed row was inserted when its `new_id` is among `keyed`'s (a hashed
/// lookup, built once).
///
/// The outcome is not a join of `input` with the inserted rows: the planner
/// cannot see that ids are unique in a CTE, so such a join was estimated at
/// rows x rows / 200 (125,000 rows for a batch of 5,000), each paying the
/// live lookup's cost, and the custom plan of every batch over about 1,000
/// rows priced above `jit_inline_above_cost`. PostgreSQL then JIT-compiled
/// the statement on every custom plan (a connection's first five
/// executions): 736 ms of compiling for a 70 ms insert of 5,000 rows. The
/// estimate is now linear in the batch (about 16 per row: 82,000 for 5,000
/// rows, under `jit_above_cost`).
const ENQUEUE: &str = "
WITH input AS (
    SELECT u.*, nextval('{s}.job_queue_id_seq') AS new_id
    FROM UNNEST($2::text[], $3::int[], $4::text[], $5::jsonb[], $6::int[], $7::bigint[], $8::timestamptz[],
                $9::text[])
        WITH ORDINALITY AS u(queue_name, priority, unique_key, payload, max_attempts, delay_us, run_at,
                             trace_context, ord)
),
plain AS (
    INSERT INTO {s}.job_queue (id, queue_name, priority, unique_key, payload, max_attempts,
                               available_at, created_at, updated_at, trace_context)
    SELECT new_id, queue_name, priority, NULL, payload, max_attempts,
           COALESCE(run_at, COALESCE($1::timestamptz, now()) + COALESCE(delay_us, 0) * interval '1 microsecond'),
           COALESCE($1::timestamptz, now()), COALESCE($1::timestamptz, now()), trace_context
    FROM input WHERE unique_key IS NULL
    RETURNING id, queue_name
),
keyed AS (
    INSERT INTO {s}.job_queue (id, queue_name, priority, unique_key, payload, max_attempts,
                               available_at, created_at, updated_at, trace_context)
    SELECT new_id, queue_name, priority, unique_key, payload, max_attempts,
           COALESCE(run_at, COALESCE($1::timestamptz, now()) + COALESCE(delay_us, 0) * interval '1 microsecond'),
           COALESCE($1::timestamptz, now()), COALESCE($1::timestamptz, now()), trace_context
    FROM input WHERE unique_key IS NOT NULL
    ORDER BY ord
    ON CONFLICT (queue_name, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
    RETURNING id, queue_name
),
ins AS (SELECT id, queue_name FROM plain UNION ALL SELECT id, queue_name FROM keyed)
SELECT i.ord,
       CASE WHEN i.unique_key IS NULL OR i.new_id IN (SELECT id FROM keyed) THEN i.new_id
            ELSE (SELECT live.id FROM {s}.job_queue live
                   WHERE live.queue_name = i.queue_name AND live.unique_key = i.unique_key)
       END AS id,
       NOT (i.unique_key IS NULL OR i.new_id IN (SELECT id FROM keyed)) AS existed{signal}
FROM input i
ORDER BY i.ord";

/// Inserts one job: the common case, in a statement whose plan costs a
/// tenth of the UNNEST one's (PostgreSQL re-plans both on every call, their
/// parameters making custom plans look cheaper than a generic one). One
/// row: the id (NULL when the conflicting row committed after this
/// statement's snapshot; the caller runs it again) and whether it existed.
const ENQUEUE_ONE: &str = "
WITH ins AS (
    INSERT INTO {s}.job_queue (queue_name, priority, unique_key, payload, max_attempts,
                               available_at, created_at, updated_at, trace_context)
    VALUES ($2::text, $3::int, $4::text, $5::jsonb, $6::int,
            COALESCE($8::timestamptz,
                     COALESCE($1::timestamptz, now()) + COALESCE($7::bigint, 0) * interval '1 microsecond'),
            COALESCE($1::timestamptz, now()), COALESCE($1::timestamptz, now()), $9::text)
    ON CONFLICT (queue_name, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
    RETURNING id
)
SELECT COALESCE((SELECT id FROM ins),
                (SELECT live.id FROM {s}.job_queue live
                  WHERE live.queue_name = $2::text AND live.unique_key = $4::text)) AS id,
       NOT EXISTS (SELECT 1 FROM ins) AS existed{signal_one}";

/// The recursive CTE `{name}(priority)`: the distinct priorities of
/// queue `{queue}`'s rows of `{table}` that match `{rows}`, highest first:
/// a skip-scan, one index probe per priority however many rows share one,
/// a NULL row last. Filled in by [`levels`].
const LEVELS: &str = "{name}(priority) AS (
        (SELECT j.priority FROM {s}.{table} j
          WHERE j.queue_name = {queue} AND {rows}
          ORDER BY j.priority DESC LIMIT 1)
        UNION ALL
        SELECT (SELECT j.priority FROM {s}.{table} j
                 WHERE j.queue_name = {queue} AND {rows} AND j.priority < l.priority
                 ORDER BY j.priority DESC LIMIT 1)
          FROM {name} l WHERE l.priority IS NOT NULL
    )";

/// [`LEVELS`] named `name` over the rows of `table` matching `rows`.
fn levels(name: &str, table: &str, rows: &str) -> String {
    LEVELS
        .replace("{name}", name)
        .replace("{table}", table)
        .replace("{rows}", rows)
}

/// The scheduled jobs (unleased, written with a future time): the rows of
/// `job_queue_scheduled`.
const SCHEDULED_ROWS: &str = "j.lease_until IS NULL AND j.available_at > j.updated_at";

/// Up to `{cap}` claimable jobs of queue `{queue}` in claim order, locked
/// unless `{lock}` is FALSE: `queue_pick` (migration 0011, first written in
/// 0007). The jobs that were due when written come from the ready ring
/// (`job_ready`, one ordered scan over its slots, each entry checked
/// against its job by primary key), so a claim never steps over the index
/// entries of jobs claimed since the last VACUUM; the jobs written with a
/// future time come from `job_queue_scheduled`, priority by priority (a
/// skip-scan), each level's due jobs as a range scan that ends at the
/// first job not due yet. The two parts are merged in claim order. In a
/// function because its settings (no bitmap scan, no sequential scan, no
/// sort below the merge) leave the planner that one plan when the
/// statistics say the table is empty, as they often do for a queue (the
/// migrations say more).
///
/// The function's rows are in claim order and stop at `{cap}`. (The order
/// of the claimed jobs is restored after RETURNING anyway; the conformance
/// suite checks which are taken.) Each carries the ring slot its entry was
/// read from (NULL for a scheduled job: migration 0011), for the lease to
/// delete the entry from that partition alone.
const PICK_LEVELS: &str = "
        SELECT p.pick_id AS id, p.pick_priority AS priority, p.pick_available_at AS available_at,
               p.pick_slot AS slot
        FROM {s}.queue_pick({queue}, {cap}, COALESCE($1::timestamptz, now()), {lock}) p";

/// The one-queue claim's cap: $3 behind a subquery, so that the planner
/// prices every call alike and keeps the generic plan. Bound as such, a
/// small $3 (a worker with one or two free slots) makes each custom plan
/// look cheaper than the generic one, and the claim was planned again on
/// every call (0.5-0.7 ms of planning for a claim that runs in about as
/// much).
const ONE_QUEUE_CAP: &str = "(SELECT $3::bigint)";

/// Picks up to $3 claimable jobs of the one queue in $2 ([`PICK_LEVELS`]).
const PICK_ONE_QUEUE: &str = "
WITH {limits}picked AS (
    SELECT c.id, c.slot FROM ({pick}) c
    WHERE NOT EXISTS (SELECT 1 FROM {s}.queue_config p
                       WHERE p.queue_name = ($2::text[])[1] AND p.paused)
)";

/// Picks up to $3 claimable jobs of the queues in $2: per queue the best
/// (its cap in $6, aligned with $2) by [`PICK_LEVELS`], then the best $3
/// of those (a sort of at most the sum of the caps).
const PICK_MANY_QUEUES: &str = "
WITH {limits}picked AS (
    SELECT c.id, c.slot
    FROM {queues}
    CROSS JOIN LATERAL ({pick}) c
    WHERE NOT EXISTS (SELECT 1 FROM {s}.queue_config p WHERE p.queue_name = q.name AND p.paused)
    ORDER BY c.priority DESC, c.available_at, c.id
    LIMIT $3
)";

/// [`PICK_MANY_QUEUES`] when the caps add up to more than $3: the
/// per-queue scans only read (a scan that locked its cap would hold locks
/// on jobs the final LIMIT drops, and a concurrent claim would skip them
/// for worse ones), and the best $3 still claimable are locked last.
const PICK_MANY_QUEUES_OVER: &str = "
WITH {limits}candidates AS (
    SELECT c.id, c.slot
    FROM {queues}
    CROSS JOIN LATERAL ({pick_unlocked}) c
    WHERE NOT EXISTS (SELECT 1 FROM {s}.queue_config p WHERE p.queue_name = q.name AND p.paused)
),
picked AS (
    SELECT j.id, (SELECT c.slot FROM candidates c WHERE c.id = j.id LIMIT 1) AS slot
    FROM {s}.job_queue j
    WHERE j.id = ANY(ARRAY(SELECT id FROM candidates))
      AND j.lease_until IS NULL
      AND j.available_at <= COALESCE($1::timestamptz, now())
      AND j.attempts < j.max_attempts
    ORDER BY j.priority DESC, j.available_at, j.id
    LIMIT $3
    FOR UPDATE OF j SKIP LOCKED
)";

/// Leases the picked jobs for $4 microseconds to worker $5, through
/// `queue_lease` (migration 0011, first written in 0009), which reads them
/// by primary key however small the statistics say `job_queue` is, and
/// deletes their ring entries from the slots the pick read them in; the
/// ids and slots go in as arrays, built from `picked`. `{commit}` is [`ASYNC_COMMIT`] for a storage
/// with asynchronous claims, else nothing.
const CLAIM_PICKED: &str = "
SELECT {job}
FROM {s}.queue_lease(ARRAY(SELECT id FROM picked), $1::timestamptz, $4::bigint, $5::text,
                     ARRAY(SELECT DISTINCT slot FROM picked WHERE slot IS NOT NULL)){commit}";

/// Makes the claim's transaction commit without waiting for its WAL to
/// reach the disk (`SET LOCAL synchronous_commit = off`, as a join the
/// statement evaluates once): `PgStorage::with_async_claims`.
const ASYNC_COMMIT: &str = "
CROSS JOIN (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit";

/// Archives every input lease that is current as `completed`; returns the
/// leases that matched.
///
/// The statements by lease ([`ACK`], [`NACK`], [`RELEASE`], [`SNOOZE`],
/// [`HEARTBEAT`]) and the claim's lease ([`CLAIM_PICKED`]) are functions
/// of migration 0009, whose settings leave the planner only the primary
/// key of `job_queue`: as plain statements, a connection's generic plan
/// made while the table was small (a new schema, or a table autovacuum had
/// just found empty) read the whole table on every call once it had grown
/// (docs/operations.md, "The first minute's stall"). A lease is fenced by
/// (id, locked_by, attempts): `locked_by` set means `lease_until` is set
/// (constraint `job_queue_lease_has_holder`), so they never say
/// `lease_until IS NOT NULL` (the predicate of `job_queue_leased`, whose
/// whole-index bitmap scan once priced like one row: "The ack that read
/// every lease").
const ACK: &str = "
SELECT acked_id AS id, acked_by AS processed_by, acked_attempt AS attempts
FROM {s}.queue_ack($1::timestamptz, $2::bigint[], $3::text[], $4::int[], $5::jsonb[])";

/// Retries ($6 and attempts left, after $7 microseconds) or dead-letters
/// (error $5) the lease ($2, $3, $4) if current.
const NACK: &str = "
SELECT retry_at, dead_lettered
FROM {s}.queue_nack($1::timestamptz, $2::bigint, $3::text, $4::int, $5::jsonb, $6::boolean,
                    $7::bigint)";

/// Gives a current lease back without counting its attempt (one row if it
/// was current).
const RELEASE: &str = "
SELECT released_id FROM {s}.queue_release($1::timestamptz, $2::bigint, $3::text, $4::int)";

/// Extends every input lease that is current and unexpired by $5
/// microseconds; returns those.
const HEARTBEAT: &str = "
SELECT beat_id, beat_by, beat_attempt
FROM {s}.queue_heartbeat($1::timestamptz, $2::bigint[], $3::text[], $4::int[], $5::bigint)";

/// The recursive CTE `{name}(name)`: the queues with rows of `{table}`
/// that match `{rows}`, by a skip-scan (one index probe per queue, a NULL
/// row last). Filled in by [`queues_with`].
const QUEUES_WITH: &str = "{name}(name) AS (
    (SELECT j.queue_name FROM {s}.{table} j WHERE {rows}
      ORDER BY j.queue_name LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue_name FROM {s}.{table} j
             WHERE j.queue_name > q.name AND {rows}
             ORDER BY j.queue_name LIMIT 1)
    FROM {name} q WHERE q.name IS NOT NULL
)";

/// [`QUEUES_WITH`] named `name` over the rows of `table` matching `rows`.
fn queues_with(name: &str, table: &str, rows: &str) -> String {
    QUEUES_WITH
        .replace("{name}", name)
        .replace("{table}", table)
        .replace("{rows}", rows)
}

/// Recovers up to $2 jobs: stalled (oldest lease first), then exhausted.
/// The stalled ones come from `job_queue_leased` (queue_name, lease_until,
/// id), led by the queue (migration 0008): a skip-scan finds the queues
/// holding leases, one probe each, then each queue's expired range is
/// read in lease order, up to $2, and the ranges merged.
const RECLAIM: &str = "
WITH RECURSIVE {leased_queues},
chosen AS (
    SELECT j.id, j.locked_by, j.attempts, j.max_attempts
    FROM {s}.job_queue j
    WHERE j.id IN (
        SELECT id FROM (
            (SELECT e.id, 0 AS grp, e.lease_until AS k
               FROM leased_queues q CROSS JOIN LATERAL (
                   SELECT id, lease_until FROM {s}.job_queue
                   WHERE queue_name = q.name AND lease_until <= COALESCE($1::timestamptz, now())
                   ORDER BY lease_until, id LIMIT $2) e
              WHERE q.name IS NOT NULL
              ORDER BY e.lease_until, e.id LIMIT $2)
            UNION ALL
            (SELECT id, 1, NULL FROM {s}.job_queue
              WHERE lease_until IS NULL AND attempts >= max_attempts
              ORDER BY id LIMIT $2)
        ) c
        ORDER BY grp, k, id LIMIT $2
    )
      AND (j.lease_until <= COALESCE($1::timestamptz, now())
           OR (j.lease_until IS NULL AND j.attempts >= j.max_attempts))
    FOR UPDATE SKIP LOCKED
),
requeued AS (
    UPDATE {s}.job_queue j
    SET lease_until = NULL, locked_by = NULL,
        available_at = COALESCE($1::timestamptz, now()), updated_at = COALESCE($1::timestamptz, now()),
        last_error = jsonb_build_object('kind', 'lease_expired', 'worker_id', c.locked_by,
                                       'attempt', c.attempts)
    FROM chosen c
    WHERE j.id = c.id AND c.attempts < c.max_attempts
    RETURNING j.id
),
dead AS (
    DELETE FROM {s}.job_queue j USING chosen c
    WHERE j.id = c.id AND c.attempts >= c.max_attempts
    RETURNING j.*
),
archived AS (
    INSERT INTO {s}.job_history ({history})
    SELECT id, queue_name, priority, unique_key, payload, 'dead_letter', NULL,
           CASE WHEN locked_by IS NULL THEN last_error
                ELSE jsonb_build_object('kind', 'lease_expired', 'worker_id', locked_by,
                                        'attempt', attempts) END,
           attempts, max_attempts, NULL, created_at, first_locked_at,
           COALESCE($1::timestamptz, now()), snoozes, trace_context
    FROM dead
    RETURNING id
)
SELECT (SELECT count(*) FROM requeued) AS requeued, (SELECT count(*) FROM archived) AS dead_lettered";

/// Archives a live job, in any state, as $3 (`discarded` or `cancelled`),
/// and tells the cancel channel its id if a worker held it (the NOTIFY is
/// sent on commit). One row: how many were archived (0 or 1).
const DISCARD: &str = "
WITH gone AS (DELETE FROM {s}.job_queue WHERE id = $2 RETURNING *),
archived AS (
    INSERT INTO {s}.job_history ({history})
    SELECT id, queue_name, priority, unique_key, payload, $3::text, NULL, last_error, attempts,
           max_attempts, NULL, created_at, first_locked_at, COALESCE($1::timestamptz, now()), snoozes,
           trace_context
    FROM gone
    RETURNING id
)
SELECT (SELECT count(*) FROM archived) AS removed,
       (SELECT count(pg_notify('{cancel_chan}', id::text)) FROM gone
         WHERE lease_until IS NOT NULL) AS notified";

/// The CTE `back` of the dead-letter retries: the rows of `dl` (deleted
/// from history) inserted live under their ids, pending now, attempts 0.
const RESTORE_DEAD_LETTERS: &str = "back AS (
    INSERT INTO {s}.job_queue (id, queue_name, priority, unique_key, payload, attempts, max_attempts,
                               available_at, last_error, created_at, updated_at, snoozes, trace_context)
    -- max_attempts 0: archived by hand without it; the default allowance (20).
    SELECT id, queue_name, priority, unique_key, payload, 0,
           CASE WHEN max_attempts >= 1 THEN max_attempts ELSE 20 END,
           COALESCE($1::timestamptz, now()), last_error, created_at, COALESCE($1::timestamptz, now()),
           snoozes, trace_context
    FROM dl
    RETURNING queue_name
)";

/// Moves a dead letter back to the live table under its id, and wakes workers.
const RETRY_DEAD_LETTER: &str = "
WITH dl AS (
    DELETE FROM {s}.job_history WHERE id = $2 AND status_final = 'dead_letter' RETURNING *
),
{restore}
SELECT queue_name, pg_notify('{chan}', queue_name)::text AS notified FROM back";

/// Deletes up to $4 history rows older than the retention, oldest first.
/// By id through an array, probing the primary key per row: as `id IN
/// (subquery)` the planner, estimating the subquery at its LIMIT, chose a
/// hash semi-join over a sequential scan of the whole history (145 ms for
/// 934 rows out of 433,000 in a soak, every prune).
const PRUNE: &str = "
DELETE FROM {s}.job_history WHERE id = ANY(ARRAY(
    SELECT id FROM {s}.job_history
    WHERE finished_at < COALESCE($1::timestamptz, now()) - $2::bigint * interval '1 microsecond'
      AND ($3::text IS NULL OR status_final = $3)
    ORDER BY finished_at, id
    LIMIT $4
    FOR UPDATE SKIP LOCKED
))";

/// Run before [`STATS`], in its transaction. The planner prices STATS by
/// its LIMITs' worst case (millions of rows), so by default it would JIT-
/// compile the statement (seconds on a busy machine) and start parallel
/// workers for empty indexes; the statement reads a few index ranges, for
/// which neither pays. Without sequential scans, hash or merge joins and
/// bitmap scans, as in the claim's functions, so that each skip-scan
/// probes an index whatever the statistics say (a ring slot just
/// truncated, a table autovacuum found empty), and in a generic plan
/// made once per connection (its many subqueries over the ring's four
/// slots took milliseconds to plan on every call).
pub(crate) const STATS_SETTINGS: &str = "SET LOCAL jit = off; SET LOCAL max_parallel_workers_per_gather = 0; \
     SET LOCAL enable_seqscan = off; SET LOCAL enable_hashjoin = off; \
     SET LOCAL enable_mergejoin = off; SET LOCAL enable_bitmapscan = off; \
     SET LOCAL plan_cache_mode = force_generic_plan";

/// Counts per queue and derived state, each up to $2, with paused queues,
/// read from the claim's structures rather than from every live row
/// (migration 0012 dropped `job_queue_dequeue`, which held every unleased
/// job a second time beside the ring):
/// - the queues with unleased jobs: a skip-scan of the ready ring
///   (`job_ready`) and one of `job_queue_scheduled`, one probe per queue
///   each (a queue with scheduled jobs that are all exhausted counts
///   nothing there and is left out);
/// - running and stalled, and the queues with leased jobs: the leased rows
///   (`job_queue_leased`; as many as workers hold, so few);
/// - exhausted: `job_queue_exhausted` (normally empty; reclaim empties it);
/// - pending: the queue's ring entries (one per unleased, unexhausted job
///   written due: migration 0012 keeps it so), up to the cap, plus per
///   priority level ([`LEVELS`] over `job_queue_scheduled`) the range of
///   scheduled jobs now due, up to the cap; scheduled: the same ranges
///   after now (and ring entries after now, which only a clock that went
///   back makes). So a queue of a million pending jobs costs the cap, not
///   the million;
/// - the oldest pending job: per level of the ring its first entry, per
///   level of the scheduled jobs the first unexhausted one.
const STATS: &str = "
WITH RECURSIVE {ring_queues}, {scheduled_queues},
leased AS (
    SELECT queue_name,
        count(*) FILTER (WHERE lease_until > COALESCE($1::timestamptz, now())) AS running,
        count(*) FILTER (WHERE lease_until <= COALESCE($1::timestamptz, now())) AS stalled
    FROM {s}.job_queue WHERE lease_until IS NOT NULL
    GROUP BY queue_name
),
exhausted AS (
    SELECT queue_name, count(*) AS total
    FROM {s}.job_queue WHERE lease_until IS NULL AND attempts >= max_attempts
    GROUP BY queue_name
),
queues AS (
    SELECT name FROM ring_queues WHERE name IS NOT NULL
    UNION
    SELECT name FROM scheduled_queues WHERE name IS NOT NULL
),
unleased AS (
    SELECT q.name AS queue_name, c.due, c.waiting, c.oldest_pending
    FROM queues q
    CROSS JOIN LATERAL (
        WITH RECURSIVE {levels}, {ring_levels}
        SELECT
            LEAST((SELECT count(*) FROM (
                    SELECT 1 FROM {s}.job_ready r
                    WHERE r.queue_name = q.name
                      AND r.available_at <= COALESCE($1::timestamptz, now())
                    LIMIT $2::bigint) x)
                + (SELECT count(*) FROM (
                    SELECT 1 FROM levels l CROSS JOIN LATERAL (
                        SELECT 1 FROM {s}.job_queue j
                        WHERE j.queue_name = q.name AND j.lease_until IS NULL
                          AND j.available_at > j.updated_at AND j.priority = l.priority
                          AND j.available_at <= COALESCE($1::timestamptz, now())
                          AND j.attempts < j.max_attempts
                        LIMIT $2::bigint) x
                    WHERE l.priority IS NOT NULL
                    LIMIT $2::bigint) d), $2::bigint) AS due,
            LEAST((SELECT count(*) FROM (
                    SELECT 1 FROM {s}.job_ready r
                    WHERE r.queue_name = q.name
                      AND r.available_at > COALESCE($1::timestamptz, now())
                    LIMIT $2::bigint) x)
                + (SELECT count(*) FROM (
                    SELECT 1 FROM levels l CROSS JOIN LATERAL (
                        SELECT 1 FROM {s}.job_queue j
                        WHERE j.queue_name = q.name AND j.lease_until IS NULL
                          AND j.available_at > j.updated_at AND j.priority = l.priority
                          AND j.available_at > COALESCE($1::timestamptz, now())
                          AND j.attempts < j.max_attempts
                        LIMIT $2::bigint) x
                    WHERE l.priority IS NOT NULL
                    LIMIT $2::bigint) w), $2::bigint) AS waiting,
            LEAST(
                (SELECT min(o.available_at) FROM ring_levels l CROSS JOIN LATERAL (
                    SELECT r.available_at FROM {s}.job_ready r
                    WHERE r.queue_name = q.name AND r.priority = l.priority
                    ORDER BY r.available_at LIMIT 1) o
                 WHERE l.priority IS NOT NULL),
                (SELECT min(o.available_at) FROM levels l CROSS JOIN LATERAL (
                    SELECT j.available_at FROM {s}.job_queue j
                    WHERE j.queue_name = q.name AND j.lease_until IS NULL
                      AND j.available_at > j.updated_at AND j.priority = l.priority
                      AND j.attempts < j.max_attempts
                    ORDER BY j.available_at LIMIT 1) o
                 WHERE l.priority IS NOT NULL)) AS oldest_pending
    ) c
    WHERE c.due > 0 OR c.waiting > 0
),
live AS (
    SELECT COALESCE(u.queue_name, l.queue_name, e.queue_name) AS queue_name,
        COALESCE(u.due, 0) AS pending,
        COALESCE(u.waiting, 0) AS scheduled,
        LEAST(COALESCE(l.running, 0), $2::bigint) AS running,
        LEAST(COALESCE(l.stalled, 0), $2::bigint) AS stalled,
        LEAST(COALESCE(e.total, 0), $2::bigint) AS exhausted,
        CASE WHEN u.oldest_pending <= COALESCE($1::timestamptz, now())
             THEN u.oldest_pending END AS oldest_pending
    FROM unleased u
    FULL JOIN leased l ON l.queue_name = u.queue_name
    FULL JOIN exhausted e ON e.queue_name = COALESCE(u.queue_name, l.queue_name)
),
paused AS (SELECT queue_name FROM {s}.queue_config WHERE paused)
SELECT COALESCE(l.queue_name, p.queue_name) AS queue_name, p.queue_name IS NOT NULL AS paused,
       COALESCE(l.pending, 0) AS pending, COALESCE(l.scheduled, 0) AS scheduled,
       COALESCE(l.running, 0) AS running, COALESCE(l.stalled, 0) AS stalled,
       COALESCE(l.exhausted, 0) AS exhausted, l.oldest_pending,
       COALESCE($1::timestamptz, now()) AS now
FROM live l FULL JOIN paused p ON p.queue_name = l.queue_name";

const GET_JOB: &str = "SELECT {job} FROM {s}.job_queue WHERE id = $1";

const GET_HISTORY: &str = "SELECT {history} FROM {s}.job_history WHERE id = $1";

/// One page plus one row, to know whether another page follows.
const LIST_HISTORY: &str = "
SELECT {history} FROM {s}.job_history
WHERE ($1::text IS NULL OR queue_name = $1)
  AND ($2::text IS NULL OR status_final = $2)
  AND ($3::bigint IS NULL OR id < $3)
ORDER BY id DESC
LIMIT $4";

/// The filters of a `JobFilter` on `job_queue j`: $2 queue, $3 state (as
/// derived at now), $4 id, $5 unique key, $6 below this id. `{state}` is
/// [`ANY_STATE`] or one of [`state_predicate`]'s.
const JOB_FILTER: &str = "
    ($2::text IS NULL OR j.queue_name = $2)
    AND {state}
    AND ($4::bigint IS NULL OR j.id = $4)
    AND ($5::text IS NULL OR j.unique_key = $5)
    AND ($6::bigint IS NULL OR j.id < $6)";

/// The state filter $3 of [`JOB_FILTER`] for any state or none, as
/// [`queue_core::derive_state`] words it.
const ANY_STATE: &str = "($3::text IS NULL OR (CASE
        WHEN j.lease_until > COALESCE($1::timestamptz, now()) THEN 'running'
        WHEN j.lease_until IS NOT NULL THEN 'stalled'
        WHEN j.attempts >= j.max_attempts THEN 'exhausted'
        WHEN j.available_at <= COALESCE($1::timestamptz, now()) THEN 'pending'
        ELSE 'scheduled' END) = $3)";

/// The state filter of [`JOB_FILTER`] for one state ($3 bound to its
/// name), written as the conditions an index can serve: a listing of
/// running or stalled jobs reads the leased rows of
/// `job_queue_leased`, of exhausted jobs `job_queue_exhausted`, in
/// place of every row of the queue newest first.
fn state_predicate(state: JobState) -> &'static str {
    match state {
        JobState::Pending => {
            "($3::text IS NOT NULL AND j.lease_until IS NULL AND j.attempts < j.max_attempts
              AND j.available_at <= COALESCE($1::timestamptz, now()))"
        }
        JobState::Scheduled => {
            "($3::text IS NOT NULL AND j.lease_until IS NULL AND j.attempts < j.max_attempts
              AND j.available_at > COALESCE($1::timestamptz, now()))"
        }
        JobState::Running => {
            "($3::text IS NOT NULL AND j.lease_until > COALESCE($1::timestamptz, now()))"
        }
        JobState::Stalled => {
            "($3::text IS NOT NULL AND j.lease_until <= COALESCE($1::timestamptz, now()))"
        }
        JobState::Exhausted => {
            "($3::text IS NOT NULL AND j.lease_until IS NULL AND j.attempts >= j.max_attempts)"
        }
    }
}

/// A page of live jobs (plus one row), newest first. $7: limit + 1.
const LIST_JOBS: &str = "
SELECT {job} FROM {s}.job_queue j
WHERE {job_filter}
ORDER BY j.id DESC
LIMIT $7";

/// Makes the selected scheduled jobs available now and wakes their queues.
/// $7: limit. ($3 is always 'scheduled'.)
const RUN_NOW: &str = "
WITH picked AS (
    SELECT j.id FROM {s}.job_queue j
    WHERE {job_filter}
    ORDER BY j.id DESC
    LIMIT $7
    FOR UPDATE
),
moved AS (
    UPDATE {s}.job_queue j
    SET available_at = COALESCE($1::timestamptz, now()), updated_at = COALESCE($1::timestamptz, now())
    FROM picked p
    WHERE j.id = p.id
    RETURNING j.queue_name
)
SELECT (SELECT count(*) FROM moved) AS moved,
       (SELECT count(pg_notify('{chan}', q.queue_name))
        FROM (SELECT DISTINCT queue_name FROM moved) q) AS notified";

/// Archives the selected live jobs as `discarded`. $7: limit.
const DISCARD_JOBS: &str = "
WITH picked AS (
    SELECT j.id FROM {s}.job_queue j
    WHERE {job_filter}
    ORDER BY j.id DESC
    LIMIT $7
    FOR UPDATE
),
gone AS (DELETE FROM {s}.job_queue j USING picked p WHERE j.id = p.id RETURNING j.*)
INSERT INTO {s}.job_history ({history})
SELECT id, queue_name, priority, unique_key, payload, 'discarded', NULL, last_error, attempts,
       max_attempts, NULL, created_at, first_locked_at, COALESCE($1::timestamptz, now()), snoozes,
       trace_context
FROM gone";

/// Moves up to $4 dead letters (queue $2, ids below $3) whose unique key is
/// not live back to the live table, and wakes their queues.
const RETRY_DEAD_LETTERS: &str = "
WITH dl AS (
    DELETE FROM {s}.job_history WHERE id IN (
        SELECT h.id FROM {s}.job_history h
        WHERE h.status_final = 'dead_letter'
          AND ($2::text IS NULL OR h.queue_name = $2)
          AND ($3::bigint IS NULL OR h.id < $3)
          AND NOT EXISTS (SELECT 1 FROM {s}.job_queue j
                          WHERE j.queue_name = h.queue_name AND j.unique_key = h.unique_key)
        ORDER BY h.id DESC
        LIMIT $4
        FOR UPDATE SKIP LOCKED
    )
    RETURNING *
),
{restore}
SELECT (SELECT count(*) FROM back) AS moved,
       (SELECT count(pg_notify('{chan}', q.queue_name))
        FROM (SELECT DISTINCT queue_name FROM back) q) AS notified";

/// Completed and dead-lettered jobs per queue and UTC minute finished in
/// `(lo, hi]`, the $2 microseconds before now. Every minute after the
/// first comes from `job_throughput` (kept by triggers on history, see
/// migration 0005; a sum over each minute's shards), the current one
/// included: nothing has finished after now, so its counter holds exactly
/// what finished in it up to now. The first minute, which the window
/// covers only in part, comes from history through
/// `job_history_finished_at`. So the cost is a row per queue, minute and
/// writer plus what finished in one minute a window ago. (A window is at
/// least a minute, so the first and the current minute differ.)
const THROUGHPUT: &str = "
WITH w AS (
    SELECT COALESCE($1::timestamptz, now()) - $2::bigint * interval '1 microsecond' AS lo,
           COALESCE($1::timestamptz, now()) AS hi
),
m AS (
    SELECT lo, hi,
           date_trunc('minute', lo AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS first_minute,
           date_trunc('minute', hi AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS last_minute
    FROM w
),
ends AS (
    SELECT h.queue_name, h.finished_at, h.status_final FROM {s}.job_history h, m
    WHERE h.finished_at > m.lo AND h.finished_at < m.first_minute + interval '1 minute'
)
SELECT t.queue_name, t.minute, sum(t.completed)::bigint AS completed, sum(t.failed)::bigint AS failed
FROM {s}.job_throughput t, m
WHERE t.minute > m.first_minute AND t.minute <= m.last_minute
GROUP BY t.queue_name, t.minute
HAVING sum(t.completed) <> 0 OR sum(t.failed) <> 0
UNION ALL
SELECT queue_name,
       date_trunc('minute', finished_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS minute,
       count(*) FILTER (WHERE status_final = 'completed') AS completed,
       count(*) FILTER (WHERE status_final = 'dead_letter') AS failed
FROM ends
WHERE status_final IN ('completed', 'dead_letter')
GROUP BY 1, 2";

/// Deletes the `job_throughput` rows of minutes before the oldest history
/// row (all of them when history is empty): their shards sum to zero once
/// prune has deleted the rows they counted.
const PRUNE_COUNTERS: &str = "
DELETE FROM {s}.job_throughput
WHERE minute < COALESCE(
    (SELECT date_trunc('minute', min(finished_at) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
       FROM {s}.job_history),
    'infinity'::timestamptz)";

const PAUSE: &str = "
INSERT INTO {s}.queue_config (queue_name, paused, updated_at)
VALUES ($2, TRUE, COALESCE($1::timestamptz, now()))
ON CONFLICT (queue_name) DO UPDATE SET paused = TRUE, updated_at = EXCLUDED.updated_at";

const RESUME: &str = "
WITH resumed AS (
    UPDATE {s}.queue_config SET paused = FALSE, updated_at = COALESCE($1::timestamptz, now())
    WHERE queue_name = $2 AND paused
    RETURNING queue_name
)
SELECT pg_notify('{chan}', queue_name)::text FROM resumed";

const NOW: &str = "SELECT COALESCE($1::timestamptz, now())";

/// The wake-up signal of enqueues inside the caller's transaction.
const ENQUEUE_SIGNAL: &str = ",
       (SELECT count(pg_notify('{chan}', q.queue_name))
          FROM (SELECT DISTINCT queue_name FROM ins) q) AS notified";

/// The wake-up signal of a one-job enqueue inside the caller's transaction.
const ENQUEUE_ONE_SIGNAL: &str = ",
       (SELECT count(pg_notify('{chan}', $2::text)) FROM ins) AS notified";

/// Wake-up signals for the queues in $1, sent after pooled enqueues commit.
const SIGNAL: &str = "SELECT count(pg_notify('{chan}', q)) FROM unnest($1::text[]) AS q";

/// Microseconds until the earliest unleased job of the queues in $2 that is
/// not due yet: per queue `queue_next_due` (migration 0007), a skip-scan
/// from one distinct priority to the next (one index probe each) and the
/// first future available_at within each (one more probe), a few lookups
/// whatever the backlog (a plain min(available_at) would read every
/// waiting row of the queue, the index ordering by priority first). In a
/// function, as the claim's pick, so that statistics saying the table is
/// empty cannot turn the probes into a scan and sort of the whole queue.
const NEXT_DUE: &str = "
SELECT (EXTRACT(EPOCH FROM min({s}.queue_next_due(q.name, COALESCE($1::timestamptz, now())))
                - COALESCE($1::timestamptz, now())) * 1000000)::bigint
FROM unnest($2::text[]) AS q(name)";

/// Puts a current lease's job off by $5 microseconds without counting the
/// attempt; returns its new `available_at`.
const SNOOZE: &str = "
SELECT snoozed_until
FROM {s}.queue_snooze($1::timestamptz, $2::bigint, $3::text, $4::int, $5::bigint)";

/// The queues whose claims are limited (what `LimitedQueues` remembers).
const LIMITED_QUEUES: &str = "
SELECT queue_name FROM {s}.queue_config
WHERE concurrency_limit IS NOT NULL OR rate_per_second IS NOT NULL";

/// The queues a claim takes from and their caps: $2 and $6 as given, for
/// the plain claim ([`PICK_MANY_QUEUES`], [`PICK_MANY_QUEUES_OVER`]),
/// through `queue_claim_queues` (migration 0006: `unnest` planned as one
/// row, so that the statement's generic plan is kept).
const QUEUES_AS_GIVEN: &str = "{s}.queue_claim_queues($2::text[], $6::bigint[]) AS q(name, cap)";

/// The limited claim's caps: [`LIMITS_MANY`]' `limits`.
const QUEUES_LIMITED: &str = "limits AS q(name, cap)";

/// The limited claim's first CTEs: lock the config rows of the limited
/// queues among $2 in name order (so concurrent claims over several
/// queues never deadlock); count each one's held leases up to its
/// concurrency limit with `queue_held_leases` (migration 0006: a VOLATILE
/// function's query takes its own snapshot, after the lock, so it sees
/// every claim that committed while this one waited; a query of this
/// statement would not); refill each rate-limited queue's bucket on the
/// database clock (`queue_core::Bucket::refill`: a missing bucket is
/// full, a clock that went back adds nothing). Then `limits`
/// ([`LIMITS_ONE`], [`LIMITS_MANY`]) narrows the caps to what both limits
/// allow (`queue_core::QueueLimits::allowance`).
const LOCKED: &str = "locked AS MATERIALIZED (
    SELECT queue_name, concurrency_limit, rate_per_second, rate_burst, tokens, refilled_at
    FROM {s}.queue_config
    WHERE queue_name = ANY($2::text[])
      AND (concurrency_limit IS NOT NULL OR rate_per_second IS NOT NULL)
    ORDER BY queue_name COLLATE \"C\"
    FOR UPDATE
),
buckets AS MATERIALIZED (
    SELECT l.queue_name, l.concurrency_limit,
           CASE WHEN l.concurrency_limit IS NOT NULL
                THEN {s}.queue_held_leases(l.queue_name, l.concurrency_limit) END AS held,
           CASE WHEN l.rate_per_second IS NULL THEN NULL
                WHEN l.tokens IS NULL OR l.refilled_at IS NULL THEN l.rate_burst::float8
                ELSE GREATEST(LEAST(l.tokens + l.rate_per_second * GREATEST(
                         EXTRACT(EPOCH FROM COALESCE($1::timestamptz, now()) - l.refilled_at)::float8, 0),
                     l.rate_burst::float8), 0) END AS tokens,
           GREATEST(COALESCE($1::timestamptz, now()), l.refilled_at) AS refilled_at
    FROM locked l
),
";

/// The one queue's cap: $3 narrowed by its limits (none when it has no
/// `buckets` row), never below 0.
const LIMITS_ONE: &str = "limits AS MATERIALIZED (
    SELECT GREATEST(LEAST($3::bigint, b.concurrency_limit - b.held,
                          floor(b.tokens + 1e-9)::bigint), 0) AS cap
    FROM (SELECT 1) o LEFT JOIN buckets b ON TRUE
),
";

/// Each queue's cap in $6 narrowed by its limits (queues without a
/// `buckets` row keep theirs), dropping the queues left with none (the
/// queues through `queue_claim_queues`, as in [`QUEUES_AS_GIVEN`]).
const LIMITS_MANY: &str = "limits AS MATERIALIZED (
    SELECT name, cap FROM (
        SELECT q.name, LEAST(q.cap, b.concurrency_limit - b.held,
                             floor(b.tokens + 1e-9)::bigint) AS cap
        FROM {s}.queue_claim_queues($2::text[], $6::bigint[]) AS q(name, cap)
        LEFT JOIN buckets b ON b.queue_name = q.name
    ) n
    WHERE cap > 0
),
";

/// The limited claim's end: [`CLAIM_PICKED`] as the CTE `claimed`, then
/// the buckets of rate-limited queues stored less what the claim took
/// (`queue_core::Bucket::after`), under the lock taken in [`LOCKED`].
const CHARGE: &str = ",
claimed AS ({claim}),
charged AS (
    UPDATE {s}.queue_config c
    SET tokens = GREATEST(b.tokens - (SELECT count(*) FROM claimed k
                                       WHERE k.queue_name = b.queue_name), 0),
        refilled_at = b.refilled_at
    FROM buckets b
    WHERE c.queue_name = b.queue_name AND b.tokens IS NOT NULL
)
SELECT * FROM claimed";

/// The body and settings, as stored, of function $2 of schema $1 (the
/// claim's `queue_pick`, migration 0007; the limited claim's
/// `queue_held_leases`, migration 0006): for `PgStorage`'s `explain_*`,
/// which EXPLAIN a query of the body under the function's settings.
const FUNCTION_SOURCE: &str = "
SELECT p.prosrc, COALESCE(p.proconfig, '{}') AS settings
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = $1 AND p.proname = $2";

/// Sets a queue's limits ($3 concurrency, $4 rate, $5 burst, $6 lease ms,
/// $7-$10 backoff base, min, max ms and jitter; NULL: not set), keeping its
/// paused flag; a rate starts with a full bucket. Wakes the queue's
/// workers, whose next claim sees the change.
const CONFIGURE: &str = "
WITH up AS (
    INSERT INTO {s}.queue_config (queue_name, paused, updated_at, concurrency_limit,
                                  rate_per_second, rate_burst, tokens, refilled_at, lease_ms,
                                  backoff_base_ms, backoff_min_ms, backoff_max_ms, backoff_jitter)
    VALUES ($2, FALSE, COALESCE($1::timestamptz, now()), $3::int, $4::float8, $5::int,
            $5::int::float8,
            CASE WHEN $4::float8 IS NULL THEN NULL ELSE COALESCE($1::timestamptz, now()) END,
            $6::bigint, $7::bigint, $8::bigint, $9::bigint, $10::float8)
    ON CONFLICT (queue_name) DO UPDATE
    SET concurrency_limit = EXCLUDED.concurrency_limit, rate_per_second = EXCLUDED.rate_per_second,
        rate_burst = EXCLUDED.rate_burst, tokens = EXCLUDED.tokens,
        refilled_at = EXCLUDED.refilled_at, lease_ms = EXCLUDED.lease_ms,
        backoff_base_ms = EXCLUDED.backoff_base_ms, backoff_min_ms = EXCLUDED.backoff_min_ms,
        backoff_max_ms = EXCLUDED.backoff_max_ms, backoff_jitter = EXCLUDED.backoff_jitter,
        updated_at = EXCLUDED.updated_at
    RETURNING queue_name
)
SELECT pg_notify('{chan}', queue_name)::text FROM up";

/// Every queue that is paused or has a setting.
const QUEUE_CONFIGS: &str = "
SELECT queue_name, paused, concurrency_limit, rate_per_second, rate_burst, lease_ms,
       backoff_base_ms, backoff_min_ms, backoff_max_ms, backoff_jitter
FROM {s}.queue_config
WHERE paused OR concurrency_limit IS NOT NULL OR rate_per_second IS NOT NULL
   OR lease_ms IS NOT NULL OR backoff_base_ms IS NOT NULL";

/// Records fire $3 (next $4) of schedule $2 unless a fire at or after $3 is
/// recorded; returns a row only when it recorded it. A concurrent recorder
/// of the same schedule makes this one wait and then re-check the WHERE
/// against the committed row, so one caller per fire time gets the row.
const FIRE_RECORD: &str = "
INSERT INTO {s}.queue_schedule (schedule_name, last_fire_at, next_fire_at, updated_at)
VALUES ($2, $3, $4, COALESCE($1::timestamptz, now()))
ON CONFLICT (schedule_name) DO UPDATE
SET last_fire_at = EXCLUDED.last_fire_at, next_fire_at = EXCLUDED.next_fire_at,
    updated_at = EXCLUDED.updated_at
WHERE queue_schedule.last_fire_at < EXCLUDED.last_fire_at
RETURNING schedule_name";

/// Every schedule's latest recorded fire.
const SCHEDULES: &str = "SELECT schedule_name, last_fire_at, next_fire_at FROM {s}.queue_schedule";

/// Makes the ready ring's next slot current if the current one is $1 ms
/// old and holds $3 bytes, or is $2 ms old, waiting $4 ms for the next
/// slot's lock and moving at most $5 entries (`queue_ready_rotate`,
/// migration 0013; `ready_ring.rs`).
const ROTATE_READY: &str =
    "SELECT {s}.queue_ready_rotate($1::bigint, $2::bigint, $3::bigint, $4::bigint, $5::bigint)";

/// A claim: `template` with [`PICK_LEVELS`] for the queue
/// and cap expressions given, then [`CLAIM_PICKED`].
fn pick(template: &str, queue: &str, cap: &str) -> String {
    let body = picking(template, queue, cap)
        .replace("{limits}", "")
        .replace("{queues}", QUEUES_AS_GIVEN);
    format!("{body}{CLAIM_PICKED}")
}

/// The limited claim of a several-queue `template`: [`LOCKED`] and
/// [`LIMITS_MANY`] first, [`CHARGE`] last.
fn pick_limited(template: &str) -> String {
    let body = picking(template, "q.name", "q.cap")
        .replace("{limits}", &format!("{LOCKED}{LIMITS_MANY}"))
        .replace("{queues}", QUEUES_LIMITED);
    format!("{body}{}", CHARGE.replace("{claim}", CLAIM_PICKED))
}

/// The limited claim of one queue: [`PICK_ONE_QUEUE`] with [`LOCKED`] and
/// [`LIMITS_ONE`] first, [`CHARGE`] last.
fn pick_limited_one() -> String {
    let body = picking(
        PICK_ONE_QUEUE,
        "($2::text[])[1]",
        "(SELECT cap FROM limits)",
    )
    .replace("{limits}", &format!("{LOCKED}{LIMITS_ONE}"));
    format!("{body}{}", CHARGE.replace("{claim}", CLAIM_PICKED))
}

fn picking(template: &str, queue: &str, cap: &str) -> String {
    template
        .replace("{pick}", &PICK_LEVELS.replace("{lock}", "TRUE"))
        .replace("{pick_unlocked}", &PICK_LEVELS.replace("{lock}", "FALSE"))
        .replace("{queue}", queue)
        .replace("{cap}", cap)
}

/// The statements of one storage, with its schema filled in.
#[derive(Debug, Clone)]
pub(crate) struct Statements {
    pub(crate) enqueue: SqlStr,
    pub(crate) enqueue_quiet: SqlStr,
    pub(crate) enqueue_one: SqlStr,
    pub(crate) enqueue_one_quiet: SqlStr,
    pub(crate) signal: SqlStr,
    pub(crate) dequeue_one: SqlStr,
    pub(crate) dequeue_many: SqlStr,
    pub(crate) dequeue_many_over: SqlStr,
    pub(crate) ack: SqlStr,
    pub(crate) nack: SqlStr,
    pub(crate) release: SqlStr,
    pub(crate) heartbeat: SqlStr,
    pub(crate) reclaim: SqlStr,
    pub(crate) discard: SqlStr,
    pub(crate) retry_dead_letter: SqlStr,
    pub(crate) prune: SqlStr,
    pub(crate) prune_counters: SqlStr,
    pub(crate) stats: SqlStr,
    pub(crate) get_job: SqlStr,
    pub(crate) get_history: SqlStr,
    pub(crate) list_history: SqlStr,
    list_jobs: SqlStr,
    /// [`LIST_JOBS`] for one state, in the order of [`JobState::ALL`].
    list_jobs_in: [SqlStr; 5],
    pub(crate) run_now: SqlStr,
    pub(crate) discard_jobs: SqlStr,
    pub(crate) retry_dead_letters: SqlStr,
    pub(crate) throughput: SqlStr,
    pub(crate) pause: SqlStr,
    pub(crate) resume: SqlStr,
    pub(crate) now: SqlStr,
    pub(crate) next_due: SqlStr,
    pub(crate) snooze: SqlStr,
    pub(crate) limited_queues: SqlStr,
    pub(crate) dequeue_limited_one: SqlStr,
    pub(crate) dequeue_limited: SqlStr,
    pub(crate) dequeue_limited_over: SqlStr,
    pub(crate) function_source: SqlStr,
    pub(crate) configure: SqlStr,
    pub(crate) queue_configs: SqlStr,
    pub(crate) fire_record: SqlStr,
    pub(crate) schedules: SqlStr,
    pub(crate) rotate_ready: SqlStr,
}

impl Statements {
    /// Fills the templates for `schema` (already validated as a plain
    /// identifier), wake-up `channel` and cancellation channel `cancel`;
    /// claims commit asynchronously when `async_claims`.
    pub(crate) fn for_schema(
        schema: &str,
        channel: &str,
        cancel: &str,
        async_claims: bool,
    ) -> Self {
        let commit = if async_claims { ASYNC_COMMIT } else { "" };
        let fill_state = |template: &str, state: &str| -> SqlStr {
            AssertSqlSafe(
                template
                    .replace("{commit}", commit)
                    .replace("{job_filter}", JOB_FILTER)
                    .replace("{state}", state)
                    .replace("{restore}", RESTORE_DEAD_LETTERS)
                    .replace("{job}", JOB_COLUMNS)
                    .replace("{history}", HISTORY_COLUMNS)
                    .replace("{s}", &format!("\"{schema}\""))
                    .replace("{cancel_chan}", cancel)
                    .replace("{chan}", channel),
            )
            .into_sql_str()
        };
        let fill = |template: &str| fill_state(template, ANY_STATE);
        Self {
            enqueue: fill(&ENQUEUE.replace("{signal}", ENQUEUE_SIGNAL)),
            enqueue_quiet: fill(&ENQUEUE.replace("{signal}", "")),
            enqueue_one: fill(&ENQUEUE_ONE.replace("{signal_one}", ENQUEUE_ONE_SIGNAL)),
            enqueue_one_quiet: fill(&ENQUEUE_ONE.replace("{signal_one}", "")),
            signal: fill(SIGNAL),
            dequeue_one: fill(&pick(PICK_ONE_QUEUE, "($2::text[])[1]", ONE_QUEUE_CAP)),
            dequeue_many: fill(&pick(PICK_MANY_QUEUES, "q.name", "q.cap")),
            dequeue_many_over: fill(&pick(PICK_MANY_QUEUES_OVER, "q.name", "q.cap")),
            ack: fill(ACK),
            nack: fill(NACK),
            release: fill(RELEASE),
            heartbeat: fill(HEARTBEAT),
            reclaim: fill(&RECLAIM.replace(
                "{leased_queues}",
                &queues_with("leased_queues", "job_queue", "j.lease_until IS NOT NULL"),
            )),
            discard: fill(DISCARD),
            retry_dead_letter: fill(RETRY_DEAD_LETTER),
            prune: fill(PRUNE),
            prune_counters: fill(PRUNE_COUNTERS),
            stats: fill(
                &STATS
                    .replace(
                        "{ring_queues}",
                        &queues_with("ring_queues", "job_ready", "TRUE"),
                    )
                    .replace(
                        "{scheduled_queues}",
                        &queues_with("scheduled_queues", "job_queue", SCHEDULED_ROWS),
                    )
                    .replace("{levels}", &levels("levels", "job_queue", SCHEDULED_ROWS))
                    .replace("{ring_levels}", &levels("ring_levels", "job_ready", "TRUE"))
                    .replace("{queue}", "q.name"),
            ),
            get_job: fill(GET_JOB),
            get_history: fill(GET_HISTORY),
            list_history: fill(LIST_HISTORY),
            list_jobs: fill(LIST_JOBS),
            list_jobs_in: JobState::ALL.map(|state| fill_state(LIST_JOBS, state_predicate(state))),
            run_now: fill(RUN_NOW),
            discard_jobs: fill(DISCARD_JOBS),
            retry_dead_letters: fill(RETRY_DEAD_LETTERS),
            throughput: fill(THROUGHPUT),
            pause: fill(PAUSE),
            resume: fill(RESUME),
            now: fill(NOW),
            next_due: fill(NEXT_DUE),
            snooze: fill(SNOOZE),
            limited_queues: fill(LIMITED_QUEUES),
            dequeue_limited_one: fill(&pick_limited_one()),
            dequeue_limited: fill(&pick_limited(PICK_MANY_QUEUES)),
            dequeue_limited_over: fill(&pick_limited(PICK_MANY_QUEUES_OVER)),
            function_source: fill(FUNCTION_SOURCE),
            configure: fill(CONFIGURE),
            queue_configs: fill(QUEUE_CONFIGS),
            fire_record: fill(FIRE_RECORD),
            schedules: fill(SCHEDULES),
            rotate_ready: fill(ROTATE_READY),
        }
    }
}

impl Statements {
    /// The listing for `state` ([`LIST_JOBS`] with its index-friendly
    /// predicate), or for any state.
    pub(crate) fn list_jobs_for(&self, state: Option<JobState>) -> &SqlStr {
        let at = match state {
            None => return &self.list_jobs,
            Some(JobState::Pending) => 0,
            Some(JobState::Scheduled) => 1,
            Some(JobState::Running) => 2,
            Some(JobState::Stalled) => 3,
            Some(JobState::Exhausted) => 4,
        };
        &self.list_jobs_in[at]
    }
}
