-- The claim's pick (and next_due's probes, at the end) behind functions,
-- so that the planner has one way to read them whatever the table's
-- statistics say.
--
-- A queue table is often empty when autovacuum looks at it: VACUUM and
-- ANALYZE then store reltuples = 0 (and ANALYZE no column statistics), and
-- until their next visit the planner takes every scan of job_queue for one
-- row. For one row an ordered index scan of job_queue_dequeue, a bitmap
-- scan of it plus a sort, and a scan of job_queue_unique_key (queue_name
-- leads it too) plus a sort all cost about the same (8.39 against 8.40 and
-- 8.41 in one measurement), and which one wins is decided by index heights.
-- A soak at 4,000 jobs/s showed the losers: a minute in which every claim
-- read the whole queue through a bitmap and sorted it, 3 ms growing to
-- 200 ms as the backlog grew, until the next ANALYZE saw the pile
-- (docs/operations.md). With bitmap scans and sorts off inside this
-- function, the ordered scan of job_queue_dequeue is the only plan that
-- needs neither; the settings hold for these queries only, never for the
-- caller's session.
--
-- One queue, priority by priority (highest first, a recursive skip-scan
-- of the dequeue index), the due jobs of each as a range scan on
-- (priority, available_at <= p_now) that stops at the first job not due
-- yet, up to p_cap jobs in claim order, locked (SKIP LOCKED) when p_lock.
-- PL/pgSQL keeps each query's generic plan for the session (a SQL
-- function would plan it on every call). VOLATILE, as a function that
-- locks must be: its queries see a snapshot taken when they start, so a
-- job committed after the calling statement's snapshot may be locked here
-- and then not leased by the caller's UPDATE (which cannot see it); it is
-- unlocked at commit and claimed next time. `PgStorage::explain_dequeue`
-- EXPLAINs the locking query as written here, between `RETURN QUERY` and
-- the first `;`.
CREATE FUNCTION queue_pick(p_queue text, p_cap bigint, p_now timestamptz, p_lock boolean)
RETURNS TABLE (pick_id bigint, pick_priority integer, pick_available_at timestamptz)
LANGUAGE plpgsql VOLATILE ROWS 16
SET search_path FROM CURRENT
SET enable_bitmapscan = off
SET enable_sort = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    IF p_lock THEN
        RETURN QUERY
        WITH RECURSIVE levels(priority) AS (
            (SELECT j.priority FROM job_queue j
              WHERE j.queue_name = p_queue AND j.lease_until IS NULL
              ORDER BY j.priority DESC LIMIT 1)
            UNION ALL
            SELECT (SELECT j.priority FROM job_queue j
                     WHERE j.queue_name = p_queue AND j.lease_until IS NULL
                       AND j.priority < l.priority
                     ORDER BY j.priority DESC LIMIT 1)
              FROM levels l WHERE l.priority IS NOT NULL
        )
        SELECT c.id, c.priority, c.available_at
        FROM levels l
        CROSS JOIN LATERAL (
            SELECT j.id, j.priority, j.available_at
            FROM job_queue j
            WHERE j.queue_name = p_queue
              AND j.lease_until IS NULL
              AND j.priority = l.priority
              AND j.available_at <= p_now
              AND j.attempts < j.max_attempts
            ORDER BY j.available_at, j.id
            LIMIT p_cap
            FOR UPDATE SKIP LOCKED
        ) c
        WHERE l.priority IS NOT NULL
        LIMIT p_cap;
    ELSE
        -- The same without locks, for a claim over several queues whose
        -- caps add up to more than it takes: it locks only the winners.
        RETURN QUERY
        WITH RECURSIVE levels(priority) AS (
            (SELECT j.priority FROM job_queue j
              WHERE j.queue_name = p_queue AND j.lease_until IS NULL
              ORDER BY j.priority DESC LIMIT 1)
            UNION ALL
            SELECT (SELECT j.priority FROM job_queue j
                     WHERE j.queue_name = p_queue AND j.lease_until IS NULL
                       AND j.priority < l.priority
                     ORDER BY j.priority DESC LIMIT 1)
              FROM levels l WHERE l.priority IS NOT NULL
        )
        SELECT c.id, c.priority, c.available_at
        FROM levels l
        CROSS JOIN LATERAL (
            SELECT j.id, j.priority, j.available_at
            FROM job_queue j
            WHERE j.queue_name = p_queue
              AND j.lease_until IS NULL
              AND j.priority = l.priority
              AND j.available_at <= p_now
              AND j.attempts < j.max_attempts
            ORDER BY j.available_at, j.id
            LIMIT p_cap
        ) c
        WHERE l.priority IS NOT NULL
        LIMIT p_cap;
    END IF;
END
$$;

-- When the next of queue p_queue's unleased jobs not due at p_now is due
-- (NULL: none), for an idle worker's `next_due`: a skip-scan of the
-- priorities present, then per priority the first available_at after
-- p_now, a few index probes however many jobs wait. In a function for the
-- same reason as queue_pick: planned on statistics that say the table is
-- empty, the probes could become a bitmap scan and sort of the whole
-- queue, on every idle poll. `PgStorage::explain_next_due` EXPLAINs the
-- query between `RETURN (` and the last `);` as written here.
CREATE FUNCTION queue_next_due(p_queue text, p_now timestamptz) RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
SET enable_bitmapscan = off
SET enable_sort = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN (
        WITH RECURSIVE levels(priority) AS (
            (SELECT j.priority FROM job_queue j
              WHERE j.queue_name = p_queue AND j.lease_until IS NULL
              ORDER BY j.priority DESC LIMIT 1)
            UNION ALL
            SELECT (SELECT j.priority FROM job_queue j
                     WHERE j.queue_name = p_queue AND j.lease_until IS NULL
                       AND j.priority < l.priority
                     ORDER BY j.priority DESC LIMIT 1)
              FROM levels l WHERE l.priority IS NOT NULL
        )
        SELECT min((SELECT j.available_at FROM job_queue j
                     WHERE j.queue_name = p_queue AND j.lease_until IS NULL
                       AND j.priority = l.priority AND j.available_at > p_now
                     ORDER BY j.available_at LIMIT 1))
          FROM levels l WHERE l.priority IS NOT NULL
    );
END
$$;
