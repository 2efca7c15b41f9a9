-- The statements that find jobs by id (the claim's lease of the jobs it
-- picked, and the statements by lease: ack, nack, release, snooze,
-- heartbeat) behind functions whose settings leave the planner one way to
-- read job_queue: its primary key, however small it believes the table.
--
-- A connection keeps a statement's generic plan until something
-- invalidates it (an ANALYZE or VACUUM of the table does; the table
-- growing does not). A plan made while job_queue was small (a new schema
-- whose table was never analyzed, which the planner takes for ten pages,
-- or a table that autovacuum found empty and truncated) reads it by a
-- sequential scan, or a hash join over one, and keeps doing so while the
-- table grows. A soak at 4,000 jobs/s showed it in every run's first
-- minute: each claim's lease and each ack read all of job_queue (105,000
-- rows, 5,000 to 7,000 buffers, 40 to 70 ms), the backlog grew to 100,000
-- jobs, and it ended at once at the first ANALYZE (docs/operations.md,
-- "The first minute's stall").
--
-- So, as queue_pick does for the pick (migration 0007): in PL/pgSQL,
-- whose plan per query is kept for the session, with sequential and
-- bitmap scans, hash and merge joins and JIT off for these queries only
-- (never for the caller's session; the settings are set on all six
-- functions at the end of this file). Each query also states `id =
-- ANY(p_ids)`, so that the primary key serves it by index condition, not
-- by a full scan. The Rust side calls them with the parameters its
-- statements had; the column lists are job_queue's and job_history's.

-- Leases the jobs p_ids (locked by the caller's pick, migration 0007) to
-- p_worker for p_lease_us microseconds from p_now (NULL: now()); returns
-- them. Its UPDATE takes a snapshot of its own, later than the calling
-- statement's, so it sees every job the pick locked.
CREATE FUNCTION queue_lease(p_ids bigint[], p_now timestamptz, p_lease_us bigint, p_worker text)
RETURNS SETOF job_queue
LANGUAGE plpgsql VOLATILE ROWS 16
AS $$
BEGIN
    RETURN QUERY
    UPDATE job_queue j
    SET attempts = j.attempts + 1,
        lease_until = COALESCE(p_now, now()) + p_lease_us * interval '1 microsecond',
        locked_by = p_worker,
        first_locked_at = COALESCE(j.first_locked_at, COALESCE(p_now, now())),
        updated_at = COALESCE(p_now, now())
    WHERE j.id = ANY(p_ids)
    RETURNING j.*;
END
$$;

-- Archives as completed every lease (p_ids, p_workers, p_attempts, with
-- p_results) that is current; returns the leases archived.
CREATE FUNCTION queue_ack(p_now timestamptz, p_ids bigint[], p_workers text[], p_attempts int[],
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
                                 created_at, started_at, finished_at, snoozes)
        SELECT d.id, d.queue_name, d.priority, d.unique_key, d.payload, 'completed', d.ack_result,
               d.last_error, d.attempts, d.max_attempts, d.locked_by, d.created_at,
               d.first_locked_at, COALESCE(p_now, now()), d.snoozes
        FROM done d
        RETURNING job_history.id, job_history.processed_by, job_history.attempts
    )
    SELECT a.id, a.processed_by, a.attempts FROM archived a;
END
$$;

-- Extends by p_lease_us microseconds from p_now every lease that is
-- current and unexpired; returns those. The expiry test is written so
-- that it does not imply `lease_until IS NOT NULL` (job_queue_leased's
-- predicate), as in migration 0007's comment on the statements by lease.
CREATE FUNCTION queue_heartbeat(p_now timestamptz, p_ids bigint[], p_workers text[],
                                p_attempts int[], p_lease_us bigint)
RETURNS TABLE (beat_id bigint, beat_by text, beat_attempt int)
LANGUAGE plpgsql VOLATILE ROWS 64
AS $$
BEGIN
    RETURN QUERY
    UPDATE job_queue j
    SET lease_until = COALESCE(p_now, now()) + p_lease_us * interval '1 microsecond',
        updated_at = COALESCE(p_now, now())
    FROM UNNEST(p_ids, p_workers, p_attempts) AS i(id, worker, attempt)
    WHERE j.id = ANY(p_ids)
      AND j.id = i.id AND j.locked_by = i.worker AND j.attempts = i.attempt
      AND COALESCE(j.lease_until, '-infinity') > COALESCE(p_now, now())
    RETURNING j.id, j.locked_by, j.attempts;
END
$$;

-- The lease (p_id, p_worker, p_attempt), if current: retried at p_now +
-- p_backoff_us when p_retry and attempts are left, else dead-lettered
-- with p_error. One row: the retry's time (NULL if none) and how many
-- were dead-lettered (0 or 1); both say nothing when the lease was not
-- current.
CREATE FUNCTION queue_nack(p_now timestamptz, p_id bigint, p_worker text, p_attempt int,
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
                                 created_at, started_at, finished_at, snoozes)
        SELECT d.id, d.queue_name, d.priority, d.unique_key, d.payload, 'dead_letter', NULL,
               p_error, d.attempts, d.max_attempts, d.locked_by, d.created_at, d.first_locked_at,
               COALESCE(p_now, now()), d.snoozes
        FROM dead d
        RETURNING job_history.id
    )
    SELECT (SELECT r.available_at FROM retried r), (SELECT count(*) FROM archived);
END
$$;

-- Gives the lease (p_id, p_worker, p_attempt) back, if current, without
-- counting its attempt; returns the job's id.
CREATE FUNCTION queue_release(p_now timestamptz, p_id bigint, p_worker text, p_attempt int)
RETURNS TABLE (released_id bigint)
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    RETURN QUERY
    UPDATE job_queue j
    SET lease_until = NULL, locked_by = NULL, attempts = j.attempts - 1,
        available_at = COALESCE(p_now, now()), updated_at = COALESCE(p_now, now())
    WHERE j.id = p_id AND j.locked_by = p_worker AND j.attempts = p_attempt
    RETURNING j.id;
END
$$;

-- Puts the job of the lease (p_id, p_worker, p_attempt), if current, off
-- by p_delay_us microseconds without counting the attempt; returns its new
-- available_at.
CREATE FUNCTION queue_snooze(p_now timestamptz, p_id bigint, p_worker text, p_attempt int,
                             p_delay_us bigint)
RETURNS TABLE (snoozed_until timestamptz)
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    RETURN QUERY
    UPDATE job_queue j
    SET lease_until = NULL, locked_by = NULL, attempts = j.attempts - 1,
        snoozes = j.snoozes + 1,
        available_at = COALESCE(p_now, now()) + p_delay_us * interval '1 microsecond',
        updated_at = COALESCE(p_now, now())
    WHERE j.id = p_id AND j.locked_by = p_worker AND j.attempts = p_attempt
    RETURNING j.available_at;
END
$$;

-- The settings of every function above, in one place: the schema as the
-- migration's search_path names it, and the primary key as the one way
-- to read job_queue (see the top of this file).
DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['queue_lease', 'queue_ack', 'queue_heartbeat', 'queue_nack',
                             'queue_release', 'queue_snooze'] LOOP
        EXECUTE format('ALTER FUNCTION %I SET search_path FROM CURRENT
                            SET enable_seqscan = off SET enable_bitmapscan = off
                            SET enable_hashjoin = off SET enable_mergejoin = off
                            SET jit = off SET plan_cache_mode = force_generic_plan', f);
    END LOOP;
END
$$;
