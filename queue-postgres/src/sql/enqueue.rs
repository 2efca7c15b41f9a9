//! The statements of `Storage::enqueue` and `enqueue_batch`, and the wake-up
//! signal a pooled enqueue sends after its commit.

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
pub(super) const ENQUEUE: &str = "
WITH input AS (
    SELECT u.*, nextval('{s}.job_queue_id_seq') AS new_id
    FROM UNNEST($2::text[], $3::int[], $4::text[], $5::jsonb[], $6::int[], $7::bigint[], $8::timestamptz[],
                $9::text[], $10::text[])
        WITH ORDINALITY AS u(queue_name, priority, unique_key, payload, max_attempts, delay_us, run_at,
                             trace_context, group_key, ord)
),
plain AS (
    INSERT INTO {s}.job_queue (id, queue_name, priority, unique_key, payload, max_attempts,
                               available_at, created_at, updated_at, trace_context, group_key)
    SELECT new_id, queue_name, priority, NULL, payload, max_attempts,
           COALESCE(run_at, COALESCE($1::timestamptz, now()) + COALESCE(delay_us, 0) * interval '1 microsecond'),
           COALESCE($1::timestamptz, now()), COALESCE($1::timestamptz, now()), trace_context, group_key
    FROM input WHERE unique_key IS NULL
    RETURNING id, queue_name
),
keyed AS (
    INSERT INTO {s}.job_queue (id, queue_name, priority, unique_key, payload, max_attempts,
                               available_at, created_at, updated_at, trace_context, group_key)
    SELECT new_id, queue_name, priority, unique_key, payload, max_attempts,
           COALESCE(run_at, COALESCE($1::timestamptz, now()) + COALESCE(delay_us, 0) * interval '1 microsecond'),
           COALESCE($1::timestamptz, now()), COALESCE($1::timestamptz, now()), trace_context, group_key
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
pub(super) const ENQUEUE_ONE: &str = "
WITH ins AS (
    INSERT INTO {s}.job_queue (queue_name, priority, unique_key, payload, max_attempts,
                               available_at, created_at, updated_at, trace_context, group_key)
    VALUES ($2::text, $3::int, $4::text, $5::jsonb, $6::int,
            COALESCE($8::timestamptz,
                     COALESCE($1::timestamptz, now()) + COALESCE($7::bigint, 0) * interval '1 microsecond'),
            COALESCE($1::timestamptz, now()), COALESCE($1::timestamptz, now()), $9::text, $10::text)
    ON CONFLICT (queue_name, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
    RETURNING id
)
SELECT COALESCE((SELECT id FROM ins),
                (SELECT live.id FROM {s}.job_queue live
                  WHERE live.queue_name = $2::text AND live.unique_key = $4::text)) AS id,
       NOT EXISTS (SELECT 1 FROM ins) AS existed{signal_one}";

/// The wake-up signal of enqueues inside the caller's transaction.
pub(super) const ENQUEUE_SIGNAL: &str = ",
       (SELECT count(pg_notify('{chan}', q.queue_name))
          FROM (SELECT DISTINCT queue_name FROM ins) q) AS notified";

/// The wake-up signal of a one-job enqueue inside the caller's transaction.
pub(super) const ENQUEUE_ONE_SIGNAL: &str = ",
       (SELECT count(pg_notify('{chan}', $2::text)) FROM ins) AS notified";

/// Wake-up signals for the queues in $1, sent after pooled enqueues commit.
pub(super) const SIGNAL: &str = "SELECT count(pg_notify('{chan}', q)) FROM unnest($1::text[]) AS q";

/// The batch enqueue by COPY, first half: the storage's now and one id per
/// job, taken in one call of the sequence each, so that the ids ascend in
/// the batch's order as the INSERT's `nextval`s do. `$1` the clock
/// override, `$2` how many.
pub(super) const ENQUEUE_COPY_IDS: &str = "
SELECT COALESCE($1::timestamptz, now()) AS now,
       ARRAY(SELECT nextval('{s}.job_queue_id_seq') FROM generate_series(1, $2::int)) AS ids";

/// The batch enqueue by COPY, second half: the rows in PostgreSQL's binary
/// COPY format (`copy_in.rs` writes them), columns in this order. Row
/// triggers and the ready ring's statement trigger fire as for an INSERT.
pub(super) const ENQUEUE_COPY: &str = "
COPY {s}.job_queue (id, queue_name, priority, payload, max_attempts, available_at,
                    created_at, updated_at, trace_context, group_key)
FROM STDIN (FORMAT binary)";
