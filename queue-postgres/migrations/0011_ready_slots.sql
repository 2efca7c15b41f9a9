-- The claim deletes its jobs' ring entries from the slots they are in,
-- not from every slot (docs/operations.md, "A claim that does not wait
-- for VACUUM").
--
-- queue_lease (migration 0010) found a leased job's entry by its key
-- alone, so its DELETE probed the ring's index in each of the four
-- partitions for every job: 17 ms of a claim of 1,000 jobs, against
-- 4 ms for one partition. The pick knows the slot of each entry it
-- returns, so it now returns it (pick_slot: NULL for a job from
-- job_queue_scheduled), and queue_lease takes the picked slots: it
-- deletes from the partitions named only. A caller that passes no slots (p_slots NULL, as a
-- claim written for migration 0010 does) deletes no entry: the entries of
-- its jobs stay until a rotation truncates their slot, and claims skip
-- them meanwhile (their job's row is leased), as they skip any stale
-- entry.
--
-- queue_pick gains a column, so it is dropped and created again (CREATE
-- OR REPLACE cannot change what a function returns); its body is
-- migration 0010's with the slot carried through each part.

DROP FUNCTION queue_pick(text, bigint, timestamptz, boolean);

-- The claim's pick: as in migration 0010, and the slot of each job's
-- entry (NULL for the scheduled part's jobs).
CREATE FUNCTION queue_pick(p_queue text, p_cap bigint, p_now timestamptz, p_lock boolean)
RETURNS TABLE (pick_id bigint, pick_priority integer, pick_available_at timestamptz,
               pick_slot smallint)
LANGUAGE plpgsql VOLATILE ROWS 16
SET search_path FROM CURRENT
SET enable_bitmapscan = off
SET enable_sort = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_seqscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    IF p_lock THEN
        RETURN QUERY
        WITH RECURSIVE levels(priority) AS (
            (SELECT j.priority FROM job_queue j
              WHERE j.queue_name = p_queue AND j.lease_until IS NULL
                AND j.available_at > j.updated_at
              ORDER BY j.priority DESC LIMIT 1)
            UNION ALL
            SELECT (SELECT j.priority FROM job_queue j
                     WHERE j.queue_name = p_queue AND j.lease_until IS NULL
                       AND j.available_at > j.updated_at AND j.priority < l.priority
                     ORDER BY j.priority DESC LIMIT 1)
              FROM levels l WHERE l.priority IS NOT NULL
        ),
        ready AS (
            SELECT c.id, c.priority, c.available_at, r.slot
            FROM job_ready r
            CROSS JOIN LATERAL (
                SELECT j.id, j.priority, j.available_at
                FROM job_queue j
                WHERE j.id = r.id
                  AND j.queue_name IS NOT DISTINCT FROM r.queue_name
                  AND j.priority IS NOT DISTINCT FROM r.priority
                  AND j.available_at IS NOT DISTINCT FROM r.available_at
                  AND j.locked_by IS NULL
                  AND j.attempts < j.max_attempts
                FOR UPDATE SKIP LOCKED
            ) c
            WHERE r.queue_name = p_queue
              AND r.available_at <= p_now
            ORDER BY r.priority DESC, r.available_at, r.id
            LIMIT p_cap
        ),
        scheduled AS (
            SELECT c.id, c.priority, c.available_at, NULL::smallint AS slot
            FROM levels l
            CROSS JOIN LATERAL (
                SELECT j.id, j.priority, j.available_at
                FROM job_queue j
                WHERE j.queue_name = p_queue
                  AND j.lease_until IS NULL
                  AND j.available_at > j.updated_at
                  AND j.priority = l.priority
                  AND j.available_at <= p_now
                  AND j.attempts < j.max_attempts
                ORDER BY j.available_at, j.id
                LIMIT p_cap
                FOR UPDATE SKIP LOCKED
            ) c
            WHERE l.priority IS NOT NULL
            LIMIT p_cap
        )
        SELECT b.id, b.priority, b.available_at, b.slot
        FROM (SELECT * FROM ready UNION ALL SELECT * FROM scheduled) b
        ORDER BY b.priority DESC, b.available_at, b.id
        LIMIT p_cap;
    ELSE
        -- The same without locks, for a claim over several queues whose
        -- caps add up to more than it takes: it locks only the winners.
        RETURN QUERY
        WITH RECURSIVE levels(priority) AS (
            (SELECT j.priority FROM job_queue j
              WHERE j.queue_name = p_queue AND j.lease_until IS NULL
                AND j.available_at > j.updated_at
              ORDER BY j.priority DESC LIMIT 1)
            UNION ALL
            SELECT (SELECT j.priority FROM job_queue j
                     WHERE j.queue_name = p_queue AND j.lease_until IS NULL
                       AND j.available_at > j.updated_at AND j.priority < l.priority
                     ORDER BY j.priority DESC LIMIT 1)
              FROM levels l WHERE l.priority IS NOT NULL
        ),
        ready AS (
            SELECT c.id, c.priority, c.available_at, r.slot
            FROM job_ready r
            CROSS JOIN LATERAL (
                SELECT j.id, j.priority, j.available_at
                FROM job_queue j
                WHERE j.id = r.id
                  AND j.queue_name IS NOT DISTINCT FROM r.queue_name
                  AND j.priority IS NOT DISTINCT FROM r.priority
                  AND j.available_at IS NOT DISTINCT FROM r.available_at
                  AND j.locked_by IS NULL
                  AND j.attempts < j.max_attempts
            ) c
            WHERE r.queue_name = p_queue
              AND r.available_at <= p_now
            ORDER BY r.priority DESC, r.available_at, r.id
            LIMIT p_cap
        ),
        scheduled AS (
            SELECT c.id, c.priority, c.available_at, NULL::smallint AS slot
            FROM levels l
            CROSS JOIN LATERAL (
                SELECT j.id, j.priority, j.available_at
                FROM job_queue j
                WHERE j.queue_name = p_queue
                  AND j.lease_until IS NULL
                  AND j.available_at > j.updated_at
                  AND j.priority = l.priority
                  AND j.available_at <= p_now
                  AND j.attempts < j.max_attempts
                ORDER BY j.available_at, j.id
                LIMIT p_cap
            ) c
            WHERE l.priority IS NOT NULL
            LIMIT p_cap
        )
        SELECT b.id, b.priority, b.available_at, b.slot
        FROM (SELECT * FROM ready UNION ALL SELECT * FROM scheduled) b
        ORDER BY b.priority DESC, b.available_at, b.id
        LIMIT p_cap;
    END IF;
END
$$;

-- The claim's lease (migration 0010), deleting the leased jobs' entries
-- from the slots p_slots names (any order, NULLs ignored: the slots of the
-- picked jobs, as the pick returned them). One DELETE per partition, each
-- behind a test of p_slots that the executor evaluates once: PostgreSQL
-- 15 prunes no partition of a DELETE through the parent at run time, so
-- `DELETE FROM job_ready ... WHERE slot = ANY(p_slots)` probed all four.
DROP FUNCTION queue_lease(bigint[], timestamptz, bigint, text);

CREATE FUNCTION queue_lease(p_ids bigint[], p_now timestamptz, p_lease_us bigint, p_worker text,
                            p_slots smallint[] DEFAULT NULL)
RETURNS SETOF job_queue
LANGUAGE plpgsql VOLATILE ROWS 16
SET search_path FROM CURRENT
SET enable_seqscan = off
SET enable_bitmapscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY
    WITH leased AS (
        UPDATE job_queue j
        SET attempts = j.attempts + 1,
            lease_until = COALESCE(p_now, now()) + p_lease_us * interval '1 microsecond',
            locked_by = p_worker,
            first_locked_at = COALESCE(j.first_locked_at, COALESCE(p_now, now())),
            updated_at = COALESCE(p_now, now())
        WHERE j.id = ANY(p_ids)
        RETURNING j.*
    ),
    spent_0 AS (
        DELETE FROM job_ready_0 r USING leased l
        WHERE 0 = ANY(p_slots)
          AND r.queue_name = l.queue_name AND r.priority = l.priority
          AND r.available_at = l.available_at AND r.id = l.id
    ),
    spent_1 AS (
        DELETE FROM job_ready_1 r USING leased l
        WHERE 1 = ANY(p_slots)
          AND r.queue_name = l.queue_name AND r.priority = l.priority
          AND r.available_at = l.available_at AND r.id = l.id
    ),
    spent_2 AS (
        DELETE FROM job_ready_2 r USING leased l
        WHERE 2 = ANY(p_slots)
          AND r.queue_name = l.queue_name AND r.priority = l.priority
          AND r.available_at = l.available_at AND r.id = l.id
    ),
    spent_3 AS (
        DELETE FROM job_ready_3 r USING leased l
        WHERE 3 = ANY(p_slots)
          AND r.queue_name = l.queue_name AND r.priority = l.priority
          AND r.available_at = l.available_at AND r.id = l.id
    )
    SELECT * FROM leased;
END
$$;
