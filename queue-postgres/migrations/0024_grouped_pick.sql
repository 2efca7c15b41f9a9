-- The grouped claim's pick in one statement (issue 38, item 5: the group
-- drain). Migration 0016's queue_pick_limited walks a grouped queue's
-- claimable jobs in PL/pgSQL: it aggregates the queue's group limits and
-- held leases into jsonb, derives the full groups, reads a page through
-- queue_pick and keeps each job whose group has a slot left, one row at
-- a time, updating the jsonb as it goes; and 0020's and 0018's overloads
-- call it through two more functions. Measured with pg_stat_statements
-- (track = all) during `queue-bench fairness` here: the chain took 1.11 ms
-- a claim, of which its SQL (queue_pick's statement, the two aggregates)
-- was 0.45 ms; the rest was the calls, the loop and the jsonb. The plain
-- claim's pick took 0.26 ms.
--
-- queue_pick_grouped does the same work in one statement: the leases each
-- group holds and its limit, the groups full at the start left out of the
-- scan (as 0016 passes them to queue_pick), the scan of queue_pick's
-- lock branch over p_page jobs, each job's place within its group among
-- them, and the jobs whose group has a slot for them. A page that ends
-- with fewer than p_cap jobs taken while it read all p_page candidates is
-- followed by one four times larger, as in 0016; the jobs already
-- returned are known by their key, which the pages share.

-- The best p_cap claimable jobs of the grouped queue p_queue at p_now,
-- locked, within their groups' slots: each group's limit is its row of
-- queue_group_limit, else p_default (NULL: only the groups with a row are
-- limited), less the leases its jobs hold. Called as 0016's pick is,
-- after the claim locked the queue's config row: VOLATILE, so its
-- statement takes its own snapshot, after that lock, and counts the
-- leases of every claim that committed while this one waited. The jobs
-- of a group that fills up within a page are locked with the page and
-- not returned (as 0016's walk locks them); the groups full at the start
-- are left out of the scan, so their jobs are read, not locked.
CREATE FUNCTION queue_pick_grouped(p_queue text, p_cap bigint, p_now timestamptz,
                                   p_default integer)
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
DECLARE
    v_page bigint := p_cap;
    v_read bigint;
    v_taken bigint := 0;
    v_after_priority integer;
    v_after_at timestamptz;
    v_after_id bigint;
    w record;
BEGIN
    IF p_cap IS NULL OR p_cap <= 0 THEN
        RETURN;
    END IF;
    LOOP
        v_read := 0;
        FOR w IN
            WITH RECURSIVE overridden AS MATERIALIZED (
                SELECT EXISTS (SELECT 1 FROM queue_group_limit g WHERE g.queue_name = p_queue)
                       AS overrides
            ),
            -- The groups holding leases, as arrays (one row): their keys,
            -- the leases each holds and each one's limit, and the keys of
            -- those at their limit.
            slots AS MATERIALIZED (
                SELECT COALESCE(array_agg(h.group_key), '{}'::text[]) AS keys,
                       array_agg(h.held) AS held, array_agg(h.lim) AS lims,
                       COALESCE(array_agg(h.group_key) FILTER (WHERE h.held >= h.lim),
                                '{}'::text[]) AS full_keys
                FROM (SELECT l.group_key, l.held,
                             COALESCE(CASE WHEN (SELECT o.overrides FROM overridden o) THEN
                                          (SELECT g.concurrency_limit FROM queue_group_limit g
                                            WHERE g.queue_name = p_queue
                                              AND g.group_key = l.group_key)
                                      END, p_default) AS lim
                      FROM (SELECT j.group_key, count(*) AS held FROM job_queue j
                             WHERE j.queue_name = p_queue AND j.lease_until IS NOT NULL
                               AND j.group_key IS NOT NULL
                             GROUP BY j.group_key) l) h
            ),
            levels(priority) AS (
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
                SELECT c.id, c.priority, c.available_at, r.slot, c.group_key
                FROM job_ready r
                CROSS JOIN LATERAL (
                    SELECT j.id, j.priority, j.available_at, j.group_key
                    FROM job_queue j
                    WHERE j.id = r.id
                      AND j.queue_name IS NOT DISTINCT FROM r.queue_name
                      AND j.priority IS NOT DISTINCT FROM r.priority
                      AND j.available_at IS NOT DISTINCT FROM r.available_at
                      AND j.locked_by IS NULL
                      AND j.attempts < j.max_attempts
                      AND (j.group_key IS NULL
                           OR j.group_key <> ALL((SELECT f.full_keys FROM slots f)::text[]))
                    FOR UPDATE SKIP LOCKED
                ) c
                WHERE r.queue_name = p_queue
                  AND r.available_at <= p_now
                ORDER BY r.priority DESC, r.available_at, r.id
                LIMIT v_page
            ),
            scheduled AS (
                SELECT c.id, c.priority, c.available_at, NULL::smallint AS slot, c.group_key
                FROM levels l
                CROSS JOIN LATERAL (
                    SELECT j.id, j.priority, j.available_at, j.group_key
                    FROM job_queue j
                    WHERE j.queue_name = p_queue
                      AND j.lease_until IS NULL
                      AND j.available_at > j.updated_at
                      AND j.priority = l.priority
                      AND j.available_at <= p_now
                      AND j.attempts < j.max_attempts
                      AND (j.group_key IS NULL
                           OR j.group_key <> ALL((SELECT f.full_keys FROM slots f)::text[]))
                    ORDER BY j.available_at, j.id
                    LIMIT v_page
                    FOR UPDATE SKIP LOCKED
                ) c
                WHERE l.priority IS NOT NULL
                LIMIT v_page
            ),
            page AS (
                SELECT b.*, row_number() OVER (ORDER BY b.priority DESC, b.available_at, b.id) AS n
                FROM (SELECT u.* FROM (SELECT * FROM ready UNION ALL SELECT * FROM scheduled) u
                      ORDER BY u.priority DESC, u.available_at, u.id
                      LIMIT v_page) b
            ),
            ranked AS (
                SELECT p.*, count(*) OVER () AS read,
                       row_number() OVER (PARTITION BY p.group_key ORDER BY p.n) AS nth
                FROM page p
            )
            SELECT r.id, r.priority, r.available_at, r.slot, r.read
            FROM ranked r
            CROSS JOIN LATERAL (SELECT array_position(s.keys, r.group_key) AS i, s.held, s.lims
                                FROM slots s) s
            WHERE r.group_key IS NULL
               OR r.nth + COALESCE(s.held[s.i], 0)
                  <= COALESCE(s.lims[s.i],
                              CASE WHEN s.i IS NULL AND (SELECT o.overrides FROM overridden o) THEN
                                  (SELECT g.concurrency_limit FROM queue_group_limit g
                                    WHERE g.queue_name = p_queue AND g.group_key = r.group_key)
                              END,
                              p_default, 2147483647)
            ORDER BY r.n
        LOOP
            v_read := w.read;
            -- Returned from an earlier page (each starts at the best job
            -- again).
            CONTINUE WHEN v_after_id IS NOT NULL
                AND (w.priority > v_after_priority
                     OR (w.priority = v_after_priority
                         AND (w.available_at, w.id) <= (v_after_at, v_after_id)));
            v_after_priority := w.priority;
            v_after_at := w.available_at;
            v_after_id := w.id;
            pick_id := w.id;
            pick_priority := w.priority;
            pick_available_at := w.available_at;
            pick_slot := w.slot;
            RETURN NEXT;
            v_taken := v_taken + 1;
            EXIT WHEN v_taken >= p_cap;
        END LOOP;
        EXIT WHEN v_taken >= p_cap OR v_read < v_page;
        v_page := v_page * 4;
    END LOOP;
END
$$;

-- The limited claim's pick (0020's overload, which the claim calls): as
-- before, except that a grouped queue without aging or fair groups,
-- claimed with locks, takes queue_pick_grouped. (The unlocked pick of a
-- claim over several queues whose caps add up to more than it takes, and
-- an aging queue with groups, keep 0018's walk.)
CREATE OR REPLACE FUNCTION queue_pick_limited(p_queue text, p_cap bigint, p_now timestamptz,
                                              p_lock boolean, p_grouped boolean,
                                              p_default integer, p_aging bigint,
                                              p_fair boolean)
RETURNS TABLE (pick_id bigint, pick_priority integer, pick_available_at timestamptz,
               pick_slot smallint)
LANGUAGE plpgsql VOLATILE ROWS 16
SET search_path FROM CURRENT
AS $$
BEGIN
    IF p_fair THEN
        RETURN QUERY SELECT p.pick_id, p.pick_priority, p.pick_available_at, p.pick_slot
                     FROM queue_pick_fair(p_queue, p_cap, p_now, p_lock, p_grouped, p_default,
                                          p_aging) p;
    ELSIF p_grouped AND p_lock AND p_aging IS NULL THEN
        RETURN QUERY SELECT p.pick_id, p.pick_priority, p.pick_available_at, p.pick_slot
                     FROM queue_pick_grouped(p_queue, p_cap, p_now, p_default) p;
    ELSE
        RETURN QUERY SELECT p.pick_id, p.pick_priority, p.pick_available_at, p.pick_slot
                     FROM queue_pick_limited(p_queue, p_cap, p_now, p_lock, p_grouped, p_default,
                                             p_aging) p;
    END IF;
END
$$;
