-- Priority aging (issue 38, item 3): a queue's aging period P, in
-- milliseconds (1 s to 30 days, checked by queue_core::QueueLimits before
-- any write; NULL: no aging). With it, the claim orders the queue's
-- pending jobs by effective priority, priority + floor((now -
-- available_at) / P) saturating at 2147483647, then available_at, then
-- id (queue_core::backend::aged_priority); the stored priority never
-- changes. Nullable without a default: adding it rewrites no row.
--
-- A queue with a period is a limited queue (queue-postgres/src/sql/
-- dequeue.rs, LIMITED): its claims take the limited statement, which
-- locks its config row and passes the period to queue_pick_limited's new
-- overload below. Claims of queues without a period run exactly the
-- statements they ran before. Workers of the previous release keep
-- running beside the new one but claim an aging queue in plain order:
-- set a period once every worker is upgraded.
ALTER TABLE queue_config ADD COLUMN priority_aging_ms bigint
    CONSTRAINT queue_config_priority_aging_ms CHECK (priority_aging_ms BETWEEN 1000 AND 2592000000);

-- The best p_cap claimable jobs of aging queue p_queue at p_now, in the
-- aging order, leaving out the jobs of the groups in p_full (NULL: none),
-- each with its effective priority as pick_priority (what the claim's
-- merge across queues sorts by), locked unless p_lock is false.
--
-- Within one priority level the claim order (available_at, then id) is
-- also the order by effective priority: a job due earlier has waited at
-- least as long. So the best p_cap jobs are among each level's first
-- p_cap, in both places a claimable job lives (queue_pick, migrations
-- 0010 and 0016): the ready ring, whose index job_ready_claim is in claim
-- order within a queue, and job_queue_scheduled. Each level of each is
-- found by a skip-scan (one probe per level), its first p_cap due jobs
-- read by a range scan that stops at p_cap, and the union is sorted by
-- the effective key: at most p_cap rows per level are read, whatever the
-- backlog. The candidates are read without locks and the best p_cap then
-- locked (SKIP LOCKED), so no job the claim does not take is locked. A
-- claim of an aging queue holds the queue's config row (the limited
-- claim's `locked`), so no other claim of the queue runs in between; a
-- job leased meanwhile by a plain claim (a handle that has not seen the
-- period yet) is skipped by the lock's recheck.
CREATE FUNCTION queue_pick_aged(p_queue text, p_cap bigint, p_now timestamptz, p_lock boolean,
                                p_full text[], p_aging bigint)
RETURNS TABLE (pick_id bigint, pick_priority integer, pick_available_at timestamptz,
               pick_slot smallint, pick_group text)
LANGUAGE plpgsql VOLATILE ROWS 16
SET search_path FROM CURRENT
SET enable_bitmapscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_seqscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    IF p_cap IS NULL OR p_cap <= 0 THEN
        RETURN;
    END IF;
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
    ready_levels(priority) AS (
        (SELECT r.priority FROM job_ready r
          WHERE r.queue_name = p_queue
          ORDER BY r.priority DESC LIMIT 1)
        UNION ALL
        SELECT (SELECT r.priority FROM job_ready r
                 WHERE r.queue_name = p_queue AND r.priority < l.priority
                 ORDER BY r.priority DESC LIMIT 1)
          FROM ready_levels l WHERE l.priority IS NOT NULL
    ),
    ready AS (
        SELECT c.id, c.priority, c.available_at, c.slot, c.group_key
        FROM ready_levels l
        CROSS JOIN LATERAL (
            SELECT j.id, j.priority, j.available_at, r.slot, j.group_key
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
                  AND (p_full IS NULL OR j.group_key IS NULL OR j.group_key <> ALL(p_full))
            ) j
            WHERE r.queue_name = p_queue
              AND r.priority = l.priority
              AND r.available_at <= p_now
            ORDER BY r.available_at, r.id
            LIMIT p_cap
        ) c
        WHERE l.priority IS NOT NULL
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
              AND (p_full IS NULL OR j.group_key IS NULL OR j.group_key <> ALL(p_full))
            ORDER BY j.available_at, j.id
            LIMIT p_cap
        ) c
        WHERE l.priority IS NOT NULL
    ),
    best AS (
        SELECT b.id, b.available_at, b.slot, b.group_key,
               LEAST(b.priority::bigint
                     + GREATEST((EXTRACT(EPOCH FROM p_now - b.available_at) * 1000000)::bigint, 0)
                       / (p_aging * 1000),
                     2147483647)::integer AS aged
        FROM (SELECT * FROM ready UNION ALL SELECT * FROM scheduled) b
        ORDER BY aged DESC, b.available_at, b.id
        LIMIT p_cap
    )
    SELECT b.id, b.aged, b.available_at, b.slot, b.group_key
    FROM best b
    WHERE NOT p_lock
       OR EXISTS (SELECT 1 FROM job_queue j
                   WHERE j.id = b.id AND j.locked_by IS NULL AND j.lease_until IS NULL
                     AND j.available_at = b.available_at AND j.attempts < j.max_attempts
                   FOR UPDATE SKIP LOCKED)
    ORDER BY b.aged DESC, b.available_at, b.id;
END
$$;

-- The limited claim's pick with the queue's aging period p_aging (ms;
-- NULL: none): migration 0016's queue_pick_limited, unchanged, when the
-- queue has no period; else queue_pick_aged for a queue without group
-- limits, and for one with them the walk of 0016 (the groups' slots, the
-- full groups left out of each page, a job of a group that fills up on
-- the way skipped, pages four times larger until p_cap jobs are taken or
-- the queue has no more) over queue_pick_aged's pages, in the aging
-- order. The pages overlap (each starts at the best job again), so the
-- jobs seen on an earlier page are known by id. pick_priority is the
-- effective priority for an aging queue.
CREATE FUNCTION queue_pick_limited(p_queue text, p_cap bigint, p_now timestamptz, p_lock boolean,
                                   p_grouped boolean, p_default integer, p_aging bigint)
RETURNS TABLE (pick_id bigint, pick_priority integer, pick_available_at timestamptz,
               pick_slot smallint)
LANGUAGE plpgsql VOLATILE ROWS 16
SET search_path FROM CURRENT
SET enable_bitmapscan = off
SET jit = off
AS $$
DECLARE
    v_limits jsonb;
    v_held jsonb;
    v_full text[];
    v_seen bigint[] := '{}';
    v_page bigint := p_cap;
    v_read bigint;
    v_taken bigint := 0;
    v_limit integer;
    v_count integer;
    c record;
BEGIN
    IF p_aging IS NULL THEN
        RETURN QUERY SELECT p.pick_id, p.pick_priority, p.pick_available_at, p.pick_slot
                     FROM queue_pick_limited(p_queue, p_cap, p_now, p_lock, p_grouped, p_default) p;
        RETURN;
    END IF;
    IF p_cap IS NULL OR p_cap <= 0 THEN
        RETURN;
    END IF;
    IF NOT p_grouped THEN
        RETURN QUERY SELECT p.pick_id, p.pick_priority, p.pick_available_at, p.pick_slot
                     FROM queue_pick_aged(p_queue, p_cap, p_now, p_lock, NULL, p_aging) p;
        RETURN;
    END IF;
    SELECT COALESCE(jsonb_object_agg(g.group_key, g.concurrency_limit), '{}'::jsonb)
      INTO v_limits
      FROM queue_group_limit g WHERE g.queue_name = p_queue;
    SELECT COALESCE(jsonb_object_agg(h.group_key, h.held), '{}'::jsonb)
      INTO v_held
      FROM (SELECT j.group_key, count(*) AS held FROM job_queue j
             WHERE j.queue_name = p_queue AND j.lease_until IS NOT NULL
               AND j.group_key IS NOT NULL
             GROUP BY j.group_key) h;
    LOOP
        SELECT COALESCE(array_agg(e.key), '{}'::text[]) INTO v_full
          FROM jsonb_each_text(v_held) e
         WHERE e.value::bigint >= COALESCE((v_limits ->> e.key)::bigint, p_default::bigint,
                                           9223372036854775807);
        v_read := 0;
        FOR c IN SELECT * FROM queue_pick_aged(p_queue, v_page, p_now, p_lock, v_full, p_aging) LOOP
            v_read := v_read + 1;
            CONTINUE WHEN c.pick_id = ANY(v_seen);
            v_seen := v_seen || c.pick_id;
            IF c.pick_group IS NOT NULL THEN
                v_limit := COALESCE((v_limits ->> c.pick_group)::integer, p_default);
                v_count := COALESCE((v_held ->> c.pick_group)::integer, 0);
                CONTINUE WHEN v_limit IS NOT NULL AND v_count >= v_limit;
                v_held := jsonb_set(v_held, ARRAY[c.pick_group], to_jsonb(v_count + 1));
            END IF;
            pick_id := c.pick_id;
            pick_priority := c.pick_priority;
            pick_available_at := c.pick_available_at;
            pick_slot := c.pick_slot;
            RETURN NEXT;
            v_taken := v_taken + 1;
            EXIT WHEN v_taken >= p_cap;
        END LOOP;
        EXIT WHEN v_taken >= p_cap OR v_read < v_page;
        v_page := v_page * 4;
    END LOOP;
END
$$;
