-- The W3C trace context of the code that enqueued a job (issue 34): the
-- traceparent, then one space and the tracestate when there is one, as
-- queue_core::TraceContext::to_stored writes it. NULL: none was given.
-- Nullable without a default, so adding it rewrites no row.
ALTER TABLE job_queue ADD COLUMN trace_context text;
ALTER TABLE job_history ADD COLUMN trace_context text;

-- The claim's queue_lease (migration 0011) returns whole job_queue rows
-- (RETURNING j.*), so it returns the new column as it is: the claim's
-- statements are unchanged. The two functions that archive with a column
-- list (migration 0009) copy it into history; their bodies are 0009's
-- with the one column added.

CREATE OR REPLACE FUNCTION queue_ack(p_now timestamptz, p_ids bigint[], p_workers text[], p_attempts int[],
                          p_results jsonb[])
RETURNS TABLE (acked_id bigint, acked_by text, acked_attempt int)
LANGUAGE plpgsql VOLATILE ROWS 64
AS $$
BEGIN
    RETURN QUERY
    WITH done AS (
        DELETE FROM job_queue j
        USING UNNEST(p_ids, p_workers, p_attempts, p_results) AS i(id, worker, attempt, result)
        WHERE j.id = ANY(p_ids)
          AND j.id = i.id AND j.locked_by = i.worker AND j.attempts = i.attempt
        RETURNING j.*, i.result AS ack_result
    ),
    archived AS (
        INSERT INTO job_history (id, queue_name, priority, unique_key, payload, status_final,
                                 result, last_error, attempts, max_attempts, processed_by,
                                 created_at, started_at, finished_at, snoozes, trace_context)
        SELECT d.id, d.queue_name, d.priority, d.unique_key, d.payload, 'completed', d.ack_result,
               d.last_error, d.attempts, d.max_attempts, d.locked_by, d.created_at,
               d.first_locked_at, COALESCE(p_now, now()), d.snoozes, d.trace_context
        FROM done d
        RETURNING job_history.id, job_history.processed_by, job_history.attempts
    )
    SELECT a.id, a.processed_by, a.attempts FROM archived a;
END
$$;

CREATE OR REPLACE FUNCTION queue_nack(p_now timestamptz, p_id bigint, p_worker text, p_attempt int,
                           p_error jsonb, p_retry boolean, p_backoff_us bigint)
RETURNS TABLE (retry_at timestamptz, dead_lettered bigint)
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    RETURN QUERY
    WITH target AS (
        SELECT j.id, j.attempts, j.max_attempts FROM job_queue j
        WHERE j.id = p_id AND j.locked_by = p_worker AND j.attempts = p_attempt
        FOR UPDATE
    ),
    retried AS (
        UPDATE job_queue j
        SET lease_until = NULL, locked_by = NULL, last_error = p_error,
            available_at = COALESCE(p_now, now()) + p_backoff_us * interval '1 microsecond',
            updated_at = COALESCE(p_now, now())
        FROM target t
        WHERE j.id = p_id AND j.id = t.id AND p_retry AND t.attempts < t.max_attempts
        RETURNING j.available_at
    ),
    dead AS (
        DELETE FROM job_queue j USING target t
        WHERE j.id = p_id AND j.id = t.id AND NOT (p_retry AND t.attempts < t.max_attempts)
        RETURNING j.*
    ),
    archived AS (
        INSERT INTO job_history (id, queue_name, priority, unique_key, payload, status_final,
                                 result, last_error, attempts, max_attempts, processed_by,
                                 created_at, started_at, finished_at, snoozes, trace_context)
        SELECT d.id, d.queue_name, d.priority, d.unique_key, d.payload, 'dead_letter', NULL,
               p_error, d.attempts, d.max_attempts, d.locked_by, d.created_at, d.first_locked_at,
               COALESCE(p_now, now()), d.snoozes, d.trace_context
        FROM dead d
        RETURNING job_history.id
    )
    SELECT (SELECT r.available_at FROM retried r), (SELECT count(*) FROM archived);
END
$$;

-- CREATE OR REPLACE resets a function's settings: the same as migration
-- 0009 gives all its functions.
DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['queue_ack', 'queue_nack'] LOOP
        EXECUTE format('ALTER FUNCTION %I SET search_path FROM CURRENT
                            SET enable_seqscan = off SET enable_bitmapscan = off
                            SET enable_hashjoin = off SET enable_mergejoin = off
                            SET jit = off SET plan_cache_mode = force_generic_plan', f);
    END LOOP;
END
$$;
