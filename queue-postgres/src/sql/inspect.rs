//! The statements of the read-only views: `stats`, `get_job`, `get_history`,
//! `list_history`, `list_jobs`, `throughput`, and the function source the
//! `explain_*` methods read.

use queue_core::JobState;

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
///   priority level ([`LEVELS`](super::LEVELS) over `job_queue_scheduled`) the range of
///   scheduled jobs now due, up to the cap; scheduled: the same ranges
///   after now (and ring entries after now, which only a clock that went
///   back makes), before the waiting jobs' time; waiting: the same levels'
///   range at `queue_core::waiting_at()` (migration 0022), up to the cap.
///   So a queue of a million pending jobs costs the cap, not the million;
/// - the oldest pending job: per level of the ring its first entry, per
///   level of the scheduled jobs the first unexhausted one.
pub(super) const STATS: &str = "
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
    SELECT q.name AS queue_name, c.due, c.later, c.waiting, c.oldest_pending
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
                          AND j.available_at < {waiting_at}
                          AND j.attempts < j.max_attempts
                        LIMIT $2::bigint) x
                    WHERE l.priority IS NOT NULL
                    LIMIT $2::bigint) w), $2::bigint) AS later,
            (SELECT count(*) FROM (
                SELECT 1 FROM levels l CROSS JOIN LATERAL (
                    SELECT 1 FROM {s}.job_queue j
                    WHERE j.queue_name = q.name AND j.lease_until IS NULL
                      AND j.available_at > j.updated_at AND j.priority = l.priority
                      AND j.available_at = {waiting_at}
                    LIMIT $2::bigint) x
                WHERE l.priority IS NOT NULL
                LIMIT $2::bigint) w) AS waiting,
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
    WHERE c.due > 0 OR c.later > 0 OR c.waiting > 0
),
live AS (
    SELECT COALESCE(u.queue_name, l.queue_name, e.queue_name) AS queue_name,
        COALESCE(u.due, 0) AS pending,
        COALESCE(u.later, 0) AS scheduled,
        COALESCE(u.waiting, 0) AS waiting,
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
       COALESCE(l.exhausted, 0) AS exhausted, COALESCE(l.waiting, 0) AS waiting, l.oldest_pending,
       COALESCE($1::timestamptz, now()) AS now
FROM live l FULL JOIN paused p ON p.queue_name = l.queue_name";

pub(super) const GET_JOB: &str = "SELECT {job} FROM {s}.job_queue WHERE id = $1";

pub(super) const GET_HISTORY: &str = "SELECT {history} FROM {s}.job_history WHERE id = $1";

/// [`history_shape`]'s bit for a queue.
const HISTORY_QUEUE: usize = 1;

/// [`history_shape`]'s bit for a status.
const HISTORY_STATUS: usize = 1 << 1;

/// [`history_shape`]'s bit for a page's `before`.
const HISTORY_BEFORE: usize = 1 << 2;

/// Which of a `HistoryFilter`'s filters are set, as bits
/// ([`HISTORY_QUEUE`], [`HISTORY_STATUS`], [`HISTORY_BEFORE`]): one of
/// [`HISTORY_SHAPES`] listings.
pub(crate) fn history_shape(filter: &queue_core::HistoryFilter) -> usize {
    let bit = |set: bool, bit: usize| if set { bit } else { 0 };
    bit(filter.queue.is_some(), HISTORY_QUEUE)
        | bit(filter.status.is_some(), HISTORY_STATUS)
        | bit(filter.before.is_some(), HISTORY_BEFORE)
}

/// The combinations [`history_shape`] tells apart.
pub(crate) const HISTORY_SHAPES: usize = HISTORY_BEFORE << 1;

/// A page of history (plus one row, to know whether another follows),
/// newest first, for `shape` ([`history_shape`]). Binds: $1 queue, $2
/// status, $3 before, $4 limit + 1. As with [`listing_filter`], a filter
/// set is written as a plain condition and one not set as its
/// parameter's `IS NULL`: `($1 IS NULL OR queue_name = $1)` is no index
/// condition, so a generic plan walked `job_history_pkey` newest first
/// through every newer row to reach a quiet queue's, or the old dead
/// letters under a million completions. With a queue and a status the
/// page reads `job_history_queue_status`, with a status alone
/// `job_history_status`, with neither the primary key. With a queue alone
/// no index orders its rows by id, so each final status's newest rows
/// are read from `job_history_queue_status` and merged: at most a page
/// per status. The queue is written as a range of one value, ordered as
/// that index orders it (as [`newest`] does for live jobs): with
/// `queue_name = $1` a generic plan, taking half the rows to be any
/// queue's, walked `job_history_status` newest first through the other
/// queue's completions (492 pages for a page of ten). So is a status
/// alone, ordered as `job_history_status` orders it: as `status_final =
/// $2`, taken to match a quarter of the rows, the primary key was walked
/// newest first through every newer completion to reach old dead letters.
pub(super) fn list_history(shape: usize) -> String {
    let set = |bit: usize| shape & bit != 0;
    let before = if set(HISTORY_BEFORE) {
        "id < $3"
    } else {
        "$3::bigint IS NULL"
    };
    if set(HISTORY_QUEUE) && !set(HISTORY_STATUS) {
        let branches: Vec<String> = queue_core::FinalStatus::ALL
            .iter()
            .map(|status| {
                format!(
                    "(SELECT {{history}} FROM {{s}}.job_history
     WHERE {QUEUE_RANGE} AND status_final = '{}' AND $2::text IS NULL AND {before}
     ORDER BY {QUEUE_STATUS_NEWEST}
     LIMIT $4)",
                    status.as_str()
                )
            })
            .collect();
        return format!(
            "
SELECT * FROM (
    {}
) page
ORDER BY id DESC
LIMIT $4",
            branches.join("\n    UNION ALL\n    ")
        );
    }
    let (queue, status, newest) = match (set(HISTORY_QUEUE), set(HISTORY_STATUS)) {
        (true, _) => (QUEUE_RANGE, "status_final = $2", QUEUE_STATUS_NEWEST),
        (false, true) => (
            "$1::text IS NULL",
            "status_final >= $2 AND status_final <= $2",
            "status_final DESC, id DESC",
        ),
        (false, false) => ("$1::text IS NULL", "$2::text IS NULL", "id DESC"),
    };
    format!(
        "
SELECT {{history}} FROM {{s}}.job_history
WHERE {queue} AND {status} AND {before}
ORDER BY {newest}
LIMIT $4"
    )
}

/// [`list_history`]'s queue: a range of one value.
const QUEUE_RANGE: &str = "queue_name >= $1 AND queue_name <= $1";

/// Newest first within one queue and status, in the order of
/// `job_history_queue_status` read backwards.
const QUEUE_STATUS_NEWEST: &str = "queue_name DESC, status_final DESC, id DESC";

/// The filters of a `JobFilter` on `job_queue j`: $2 queue, $3 state (as
/// derived at now), $4 id, $5 unique key, $6 below this id. `{state}` is
/// [`ANY_STATE`] or one of [`state_predicate`]'s. For the bulk actions;
/// a listing writes only the filters it has ([`listing_filter`]).
pub(super) const JOB_FILTER: &str = "
    ($2::text IS NULL OR j.queue_name = $2)
    AND {state}
    AND ($4::bigint IS NULL OR j.id = $4)
    AND ($5::text IS NULL OR j.unique_key = $5)
    AND ($6::bigint IS NULL OR j.id < $6)";

/// [`listing_shape`]'s bit for a queue.
pub(super) const LISTING_QUEUE: usize = 1;

/// [`listing_shape`]'s bit for an id.
const LISTING_ID: usize = 1 << 1;

/// [`listing_shape`]'s bit for a unique key.
const LISTING_KEY: usize = 1 << 2;

/// [`listing_shape`]'s bit for a page's `before`.
const LISTING_BEFORE: usize = 1 << 3;

/// Which of a `JobFilter`'s optional filters are set, as bits
/// ([`LISTING_QUEUE`], [`LISTING_ID`], [`LISTING_KEY`],
/// [`LISTING_BEFORE`]). With the state (none or one of five), one of
/// [`LISTING_SHAPES`] listings.
pub(crate) fn listing_shape(filter: &queue_core::JobFilter) -> usize {
    let bit = |set: bool, bit: usize| if set { bit } else { 0 };
    bit(filter.queue.is_some(), LISTING_QUEUE)
        | bit(filter.id.is_some(), LISTING_ID)
        | bit(filter.unique_key.is_some(), LISTING_KEY)
        | bit(filter.before.is_some(), LISTING_BEFORE)
}

/// The combinations [`listing_shape`] tells apart.
pub(crate) const LISTING_SHAPES: usize = LISTING_BEFORE << 1;

/// [`JOB_FILTER`] for a listing of `shape` ([`listing_shape`]): a filter
/// that is set is a plain condition an index can serve in a generic
/// plan, one that is not is its parameter's `IS NULL` (true, bound NULL);
/// the queue as a range of one value (see [`newest`]).
/// `($2 IS NULL OR queue_name = $2)` cannot be an index condition, so a
/// generic plan of it walked `job_queue_pkey` newest first through every
/// other queue's jobs.
pub(super) fn listing_filter(shape: usize) -> String {
    let pick =
        |bit: usize, set: &str, unset: &str| if shape & bit != 0 { set } else { unset }.to_owned();
    [
        pick(
            LISTING_QUEUE,
            "j.queue_name >= $2 AND j.queue_name <= $2",
            "$2::text IS NULL",
        ),
        "{state}".to_owned(),
        pick(LISTING_ID, "j.id = $4", "$4::bigint IS NULL"),
        pick(LISTING_KEY, "j.unique_key = $5", "$5::text IS NULL"),
        pick(LISTING_BEFORE, "j.id < $6", "$6::bigint IS NULL"),
    ]
    .join("\n    AND ")
}

/// The state filter $3 of [`JOB_FILTER`] for any state or none, as
/// [`queue_core::derive_state`] words it.
pub(super) const ANY_STATE: &str = "($3::text IS NULL OR (CASE
        WHEN j.lease_until > COALESCE($1::timestamptz, now()) THEN 'running'
        WHEN j.lease_until IS NOT NULL THEN 'stalled'
        WHEN j.available_at = {waiting_at} THEN 'waiting'
        WHEN j.attempts >= j.max_attempts THEN 'exhausted'
        WHEN j.available_at <= COALESCE($1::timestamptz, now()) THEN 'pending'
        ELSE 'scheduled' END) = $3)";

/// The state filter of [`JOB_FILTER`] for one state ($3 bound to its
/// name), written as the conditions an index can serve: a listing of
/// running or stalled jobs reads the leased rows of
/// `job_queue_leased`, of exhausted jobs `job_queue_exhausted`, in
/// place of every row of the queue newest first.
pub(super) fn state_predicate(state: JobState) -> &'static str {
    match state {
        JobState::Pending => {
            "($3::text IS NOT NULL AND j.lease_until IS NULL AND j.attempts < j.max_attempts
              AND j.available_at <= COALESCE($1::timestamptz, now()))"
        }
        JobState::Scheduled => {
            "($3::text IS NOT NULL AND j.lease_until IS NULL AND j.attempts < j.max_attempts
              AND j.available_at > COALESCE($1::timestamptz, now())
              AND j.available_at < {waiting_at})"
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
        // Rows of `job_queue_scheduled` at the end of each priority level.
        JobState::Waiting => {
            "($3::text IS NOT NULL AND j.lease_until IS NULL
              AND j.available_at = {waiting_at})"
        }
    }
}

/// A page of live jobs (plus one row), newest first. $7: limit + 1.
/// `{listing_filter}` is [`listing_filter`]'s, `{newest}` [`newest`]'s.
/// For pending and scheduled jobs, or any state over every queue: they
/// are most jobs, so newest first finds a page soonest.
pub(super) const LIST_JOBS: &str = "
SELECT {job} FROM {s}.job_queue j
WHERE {listing_filter}
ORDER BY {newest}
LIMIT $7";

/// Newest first, for a listing of `shape`: within one queue, as
/// `job_queue_unleased` orders it (the same order, the queue being one),
/// so that the plan reads that index's range of the queue rather than
/// `job_queue_pkey` newest first with the queue as a filter (priced a
/// little cheaper by the planner, which takes a queue's rows to be spread
/// evenly over the ids: 29 ms against 0.1 ms when they are the oldest).
/// That is why [`listing_filter`] writes the queue as a range of one
/// value: from `queue_name = $2` the planner would know the first sort
/// key constant, drop it, and be back at the primary key.
pub(super) fn newest(shape: usize) -> &'static str {
    if shape & LISTING_QUEUE != 0 {
        "j.queue_name DESC, j.id DESC"
    } else {
        "j.id DESC"
    }
}

/// [`LIST_JOBS`] of one queue in any state: its newest unleased jobs
/// (`job_queue_unleased`, newest first) and its leased ones (through
/// `job_queue_leased`, as many as workers hold, then sorted), merged.
pub(super) const LIST_QUEUE_JOBS: &str = "
WITH leased AS MATERIALIZED (
    SELECT {job} FROM {s}.job_queue j
    WHERE j.lease_until IS NOT NULL AND {listing_filter}
)
SELECT * FROM (
    (SELECT {job} FROM {s}.job_queue j
     WHERE j.lease_until IS NULL AND {listing_filter}
     ORDER BY {newest}
     LIMIT $7)
    UNION ALL
    (SELECT * FROM leased ORDER BY id DESC LIMIT $7)
) page
ORDER BY id DESC
LIMIT $7";

/// The most scheduled jobs [`LIST_SCHEDULED_JOBS`] sorts by id; past
/// that many it reads newest first.
pub(super) const SCHEDULED_SORTED: i64 = 10_000;

/// [`LIST_JOBS`] for scheduled jobs. They are few (retries waiting for
/// their backoff, often among the oldest ids, behind a pending backlog)
/// or many (a backlog of delayed jobs): up to [`SCHEDULED_SORTED`] of
/// them are read from `job_queue_scheduled` (every unleased job written
/// due later, so every scheduled one) and sorted, at most that many index
/// entries; past that, newest first finds a page soonest, as for pending
/// jobs. One of the two branches runs (a one-time filter decides).
pub(super) const LIST_SCHEDULED_JOBS: &str = "
WITH waiting AS MATERIALIZED (
    SELECT j.id FROM {s}.job_queue j
    WHERE j.lease_until IS NULL AND j.available_at > j.updated_at AND {listing_filter}
    LIMIT {sorted} + 1
),
few AS (SELECT count(*) <= {sorted} AS few FROM waiting)
SELECT * FROM (
    (SELECT {job} FROM {s}.job_queue j
     WHERE j.id IN (SELECT w.id FROM waiting w ORDER BY w.id DESC LIMIT $7)
       AND (SELECT f.few FROM few f))
    UNION ALL
    (SELECT {job} FROM {s}.job_queue j
     WHERE {listing_filter} AND NOT (SELECT f.few FROM few f)
     ORDER BY {newest}
     LIMIT $7)
) page
ORDER BY id DESC
LIMIT $7";

/// [`LIST_JOBS`] for the rare states (running, stalled, exhausted): the
/// state's rows first, through its partial index (`job_queue_leased`,
/// `job_queue_exhausted`: as many rows as leases workers hold, or the few
/// exhausted jobs), then newest first. Written as one query, a generic
/// plan walked `job_queue_pkey` newest first and filtered, reading every
/// newer job when the state's are the oldest (as leased jobs are: the
/// claim takes the oldest first): 32 ms for the running jobs of one queue
/// under 200,000 others.
pub(super) const LIST_RARE_JOBS: &str = "
WITH rare AS MATERIALIZED (
    SELECT {job} FROM {s}.job_queue j
    WHERE {listing_filter}
)
SELECT * FROM rare
ORDER BY id DESC
LIMIT $7";

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
pub(super) const THROUGHPUT: &str = "
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

/// The body and settings, as stored, of function $2 of schema $1 (the
/// claim's `queue_pick`, migration 0007; the limited claim's
/// `queue_held_leases`, migration 0006): for `PgStorage`'s `explain_*`,
/// which EXPLAIN a query of the body under the function's settings.
pub(super) const FUNCTION_SOURCE: &str = "
SELECT p.prosrc, COALESCE(p.proconfig, '{}') AS settings
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = $1 AND p.proname = $2";
