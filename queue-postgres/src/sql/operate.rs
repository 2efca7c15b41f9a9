//! The statements of the operator's actions on jobs: `discard` and `cancel`,
//! `retry_dead_letter`, and the bulk `run_now`, `discard_jobs` and
//! `retry_dead_letters`.

/// Archives a live job, in any state, as $3 (`discarded` or `cancelled`),
/// and tells the cancel channel its id if a worker held it (the NOTIFY is
/// sent on commit). One row: how many were archived (0 or 1).
pub(super) const DISCARD: &str = "
WITH gone AS (DELETE FROM {s}.job_queue WHERE id = $2 RETURNING *),
archived AS (
    INSERT INTO {s}.job_history ({history})
    SELECT id, queue_name, priority, unique_key, payload, $3::text, NULL, last_error, attempts,
           max_attempts, NULL, created_at, first_locked_at, COALESCE($1::timestamptz, now()), snoozes,
           trace_context, group_key
    FROM gone
    RETURNING id
)
SELECT (SELECT count(*) FROM archived) AS removed,
       (SELECT count(pg_notify('{cancel_chan}', id::text)) FROM gone
         WHERE lease_until IS NOT NULL) AS notified";

/// The CTE `back` of the dead-letter retries: the rows of `dl` (deleted
/// from history) inserted live under their ids, pending now, attempts 0.
pub(super) const RESTORE_DEAD_LETTERS: &str = "back AS (
    INSERT INTO {s}.job_queue (id, queue_name, priority, unique_key, payload, attempts, max_attempts,
                               available_at, last_error, created_at, updated_at, snoozes, trace_context,
                               group_key)
    -- max_attempts 0: archived by hand without it; the default allowance (20).
    SELECT id, queue_name, priority, unique_key, payload, 0,
           CASE WHEN max_attempts >= 1 THEN max_attempts ELSE 20 END,
           COALESCE($1::timestamptz, now()), last_error, created_at, COALESCE($1::timestamptz, now()),
           snoozes, trace_context, group_key
    FROM dl
    RETURNING queue_name
)";

/// Moves a dead letter back to the live table under its id, and wakes workers.
pub(super) const RETRY_DEAD_LETTER: &str = "
WITH dl AS (
    DELETE FROM {s}.job_history WHERE id = $2 AND status_final = 'dead_letter' RETURNING *
),
{restore}
SELECT queue_name, pg_notify('{chan}', queue_name)::text AS notified FROM back";

/// Makes the selected scheduled jobs available now and wakes their queues.
/// $7: limit. ($3 is always 'scheduled'.)
pub(super) const RUN_NOW: &str = "
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
pub(super) const DISCARD_JOBS: &str = "
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
       trace_context, group_key
FROM gone";

/// Locks up to $3 dead letters of queue $1 (any when NULL) below id $2
/// (any when NULL) whose unique key is not live, newest first, with their
/// queue and key: `retry_dead_letters` keeps the newest of a key and reads
/// on past the others.
pub(super) const RETRY_DEAD_LETTERS_PICK: &str = "
SELECT h.id, h.queue_name, h.unique_key FROM {s}.job_history h
WHERE h.status_final = 'dead_letter'
  AND ($1::text IS NULL OR h.queue_name = $1)
  AND ($2::bigint IS NULL OR h.id < $2)
  AND NOT EXISTS (SELECT 1 FROM {s}.job_queue j
                  WHERE j.queue_name = h.queue_name AND j.unique_key = h.unique_key)
ORDER BY h.id DESC
LIMIT $3
FOR UPDATE SKIP LOCKED";

/// Moves the dead letters $2 (ids, locked by [`RETRY_DEAD_LETTERS_PICK`])
/// back to the live table, due now, and wakes their queues.
pub(super) const RETRY_DEAD_LETTERS: &str = "
WITH dl AS (
    DELETE FROM {s}.job_history WHERE id = ANY($2::bigint[]) AND status_final = 'dead_letter'
    RETURNING *
),
{restore}
SELECT (SELECT count(*) FROM back) AS moved,
       (SELECT count(pg_notify('{chan}', q.queue_name))
        FROM (SELECT DISTINCT queue_name FROM back) q) AS notified";
