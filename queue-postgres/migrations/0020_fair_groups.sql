-- Fair claiming between groups (issue 38, item 2): a fair queue's claims
-- serve its groups in turn within each (effective) priority level, in
-- the order queue_core's Storage::dequeue states
-- (queue_core::backend::fair_order). fair_groups: set by configure_queue.
-- claim_count: the jobs claimed from the queue while it was fair, the
-- clock of its groups' turns; written by the limited claim under the
-- config row's lock (queue-postgres/src/sql/dequeue.rs, CHARGE).
--
-- A fair queue is a limited queue: its claims take the limited
-- statement, which locks its config row, so its claims run one at a time
-- and each sees the turns the one before it wrote. Workers of the
-- previous release claim a fair queue in plain order: set fair_groups
-- once every worker is upgraded.
ALTER TABLE queue_config ADD COLUMN fair_groups boolean NOT NULL DEFAULT false;
ALTER TABLE queue_config ADD COLUMN claim_count bigint NOT NULL DEFAULT 0;

-- Each group's turn in a fair queue: the queue's claim_count when a job of
-- the group was last claimed. '' stands for the jobs without a group key
-- (a group key is never empty). A group without a row has turn 0.
CREATE TABLE job_group_turn (
    queue_name text   NOT NULL,
    group_key  text   NOT NULL,
    turn       bigint NOT NULL,
    PRIMARY KEY (queue_name, group_key)
);

-- A fair claim reads each group's waiting jobs level by level, best
-- first, through the index job_queue_fair (queue_name, COALESCE(group_key,
-- ''), priority DESC, available_at, id) WHERE lease_until IS NULL: the
-- groups by a skip scan of it, then each group's levels and each level's
-- due jobs as ranges of it (the jobs without a group key are the group ''
-- there, as in job_group_turn). It holds every unleased job, so it costs
-- every enqueue an index entry (15% of a batch enqueue's rate here): it
-- is not made here but by the first configure_queue that makes a queue
-- fair (queue-postgres/src/flow.rs, ensure_fair_index), so a database
-- that never uses fair groups never pays for it.

-- Up to p_n due, claimable jobs of group p_group ('' for the jobs without
-- a group key) of queue p_queue at p_now, best first: by effective
-- priority (aging period p_aging ms; NULL: the stored priority), then
-- available_at, then id, each with its stored and effective priority.
-- The group's levels by a skip scan of job_queue_fair (one probe per
-- level), each level's first p_n due jobs by a range scan that ends at
-- the first job not due yet (within a level, the claim order is also the
-- order by effective priority), their union sorted: at most p_n rows per
-- level present are read, whatever the group's backlog. Unlocked. In
-- PL/pgSQL, whose plans a session keeps: a SQL function called once per
-- group and claim was planned again on every call (0.6 ms a call here,
-- against 0.15).
CREATE FUNCTION queue_fair_group(p_queue text, p_group text, p_n bigint, p_now timestamptz,
                                 p_aging bigint)
RETURNS TABLE (job_id bigint, job_priority integer, job_aged integer,
               job_available_at timestamptz)
LANGUAGE plpgsql STABLE ROWS 16
SET search_path FROM CURRENT
SET enable_bitmapscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_seqscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY
    WITH RECURSIVE levels(priority) AS (
        (SELECT j.priority FROM job_queue j
          WHERE j.queue_name = p_queue AND COALESCE(j.group_key, '') = p_group
            AND j.lease_until IS NULL
          ORDER BY j.priority DESC LIMIT 1)
        UNION ALL
        SELECT (SELECT j.priority FROM job_queue j
                 WHERE j.queue_name = p_queue AND COALESCE(j.group_key, '') = p_group
                   AND j.lease_until IS NULL AND j.priority < l.priority
                 ORDER BY j.priority DESC LIMIT 1)
          FROM levels l WHERE l.priority IS NOT NULL
    )
    SELECT c.id, c.priority, c.aged, c.available_at
    FROM levels l
    CROSS JOIN LATERAL (
        SELECT j.id, j.priority, j.available_at,
               CASE WHEN p_aging IS NULL THEN j.priority
                    ELSE LEAST(j.priority::bigint
                               + GREATEST((EXTRACT(EPOCH FROM p_now - j.available_at)
                                           * 1000000)::bigint, 0) / (p_aging * 1000),
                               2147483647)::integer END AS aged
        FROM job_queue j
        WHERE j.queue_name = p_queue AND COALESCE(j.group_key, '') = p_group
          AND j.lease_until IS NULL AND j.priority = l.priority
          AND j.available_at <= p_now
          AND j.attempts < j.max_attempts
        ORDER BY j.available_at, j.id
        LIMIT p_n
    ) c
    WHERE l.priority IS NOT NULL
    ORDER BY c.aged DESC, c.available_at, c.id
    LIMIT p_n;
END
$$;

-- The best p_cap claimable jobs of fair queue p_queue at p_now, in its
-- fair order, each group within its slots when p_grouped (its own limit
-- or p_default), locked unless p_lock is false; pick_priority is the
-- effective priority (aging period p_aging ms, NULL: none).
--
-- The order is queue_core::backend::fair_order's: the next job is the
-- best group head by effective priority, then the group's turn, then
-- available_at, id, and taking it puts its group's turn behind every
-- other. Taken that way, a served group goes back in the list of heads
-- after every head of its next job's priority or better and before the
-- rest, so the heads are kept as a list in that order (ord) and a served
-- group is put back by a binary search.
--
-- Reads: the groups with unleased jobs by a skip scan of job_queue_fair
-- (one probe per group), each group's head (queue_fair_group with one row:
-- a probe per level), and, for each group served, its next jobs up to what
-- the claim can still take (queue_fair_group again), once. A group that
-- is full (its leases at its limit) is left out, and one that fills up
-- is dropped. Each job returned carries the ring slot of its entry, if
-- it has one, for the lease to delete it (queue_lease, migration 0011).
CREATE FUNCTION queue_pick_fair(p_queue text, p_cap bigint, p_now timestamptz, p_lock boolean,
                                p_grouped boolean, p_default integer, p_aging bigint)
RETURNS TABLE (pick_id bigint, pick_priority integer, pick_available_at timestamptz,
               pick_slot smallint)
LANGUAGE plpgsql VOLATILE ROWS 16
SET search_path FROM CURRENT
SET enable_bitmapscan = off
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    v_limits jsonb := '{}'::jsonb;
    v_held jsonb := '{}'::jsonb;
    v_full text[] := '{}';
    -- The groups: key, next job (id, stored and effective priority,
    -- available_at), and where their loaded jobs are in the s_ arrays
    -- (g_next: the next to serve; 0 while not loaded).
    g_key text[] := '{}';
    g_id bigint[] := '{}';
    g_priority integer[] := '{}';
    g_aged integer[] := '{}';
    g_at timestamptz[] := '{}';
    g_next integer[] := '{}';
    g_end integer[] := '{}';
    s_id bigint[] := '{}';
    s_priority integer[] := '{}';
    s_aged integer[] := '{}';
    s_at timestamptz[] := '{}';
    ord integer[] := '{}';
    -- The jobs taken, in order.
    t_id bigint[] := '{}';
    t_priority integer[] := '{}';
    t_aged integer[] := '{}';
    t_at timestamptz[] := '{}';
    v_taken bigint := 0;
    v_g integer;
    v_n integer;
    v_lo integer;
    v_hi integer;
    v_mid integer;
    v_limit integer;
    v_count integer;
    r record;
BEGIN
    IF p_cap IS NULL OR p_cap <= 0 THEN
        RETURN;
    END IF;
    IF p_grouped THEN
        SELECT COALESCE(jsonb_object_agg(g.group_key, g.concurrency_limit), '{}'::jsonb)
          INTO v_limits
          FROM queue_group_limit g WHERE g.queue_name = p_queue;
        SELECT COALESCE(jsonb_object_agg(h.group_key, h.held), '{}'::jsonb)
          INTO v_held
          FROM (SELECT j.group_key, count(*) AS held FROM job_queue j
                 WHERE j.queue_name = p_queue AND j.lease_until IS NOT NULL
                   AND j.group_key IS NOT NULL
                 GROUP BY j.group_key) h;
        SELECT COALESCE(array_agg(e.key), '{}'::text[]) INTO v_full
          FROM jsonb_each_text(v_held) e
         WHERE e.value::bigint >= COALESCE((v_limits ->> e.key)::bigint, p_default::bigint,
                                           9223372036854775807);
    END IF;
    FOR r IN
        WITH RECURSIVE groups(k) AS (
            (SELECT COALESCE(j.group_key, '') FROM job_queue j
              WHERE j.queue_name = p_queue AND j.lease_until IS NULL
              ORDER BY COALESCE(j.group_key, '') LIMIT 1)
            UNION ALL
            SELECT (SELECT COALESCE(j.group_key, '') FROM job_queue j
                     WHERE j.queue_name = p_queue AND j.lease_until IS NULL
                       AND COALESCE(j.group_key, '') > g.k
                     ORDER BY COALESCE(j.group_key, '') LIMIT 1)
              FROM groups g WHERE g.k IS NOT NULL
        )
        SELECT g.k, h.job_id, h.job_priority, h.job_aged, h.job_available_at
        FROM groups g
        CROSS JOIN LATERAL queue_fair_group(p_queue, g.k, 1, p_now, p_aging) h
        LEFT JOIN job_group_turn t ON t.queue_name = p_queue AND t.group_key = g.k
        WHERE g.k IS NOT NULL AND g.k <> ALL(v_full)
        ORDER BY h.job_aged DESC, COALESCE(t.turn, 0), h.job_available_at, h.job_id
    LOOP
        g_key := g_key || r.k;
        g_id := g_id || r.job_id;
        g_priority := g_priority || r.job_priority;
        g_aged := g_aged || r.job_aged;
        g_at := g_at || r.job_available_at;
        g_next := g_next || 0;
        g_end := g_end || 0;
        ord := ord || cardinality(g_key);
    END LOOP;
    WHILE v_taken < p_cap AND cardinality(ord) > 0 LOOP
        v_g := ord[1];
        ord := ord[2:];
        -- The group's slot, if it has a limit: a full group is dropped.
        IF p_grouped AND g_key[v_g] <> '' THEN
            v_limit := COALESCE((v_limits ->> g_key[v_g])::integer, p_default);
            v_count := COALESCE((v_held ->> g_key[v_g])::integer, 0);
            CONTINUE WHEN v_limit IS NOT NULL AND v_count >= v_limit;
        END IF;
        IF p_grouped AND g_key[v_g] <> '' THEN
            v_held := jsonb_set(v_held, ARRAY[g_key[v_g]], to_jsonb(v_count + 1));
        END IF;
        t_id := t_id || g_id[v_g];
        t_priority := t_priority || g_priority[v_g];
        t_aged := t_aged || g_aged[v_g];
        t_at := t_at || g_at[v_g];
        v_taken := v_taken + 1;
        EXIT WHEN v_taken >= p_cap;
        -- The group's next job: its jobs after the one just served, read
        -- once, as many as the claim can still take.
        IF g_next[v_g] = 0 THEN
            g_next[v_g] := cardinality(s_id) + 1;
            FOR r IN SELECT * FROM queue_fair_group(p_queue, g_key[v_g], p_cap - v_taken + 1,
                                                    p_now, p_aging) LOOP
                CONTINUE WHEN r.job_id = g_id[v_g];
                s_id := s_id || r.job_id;
                s_priority := s_priority || r.job_priority;
                s_aged := s_aged || r.job_aged;
                s_at := s_at || r.job_available_at;
            END LOOP;
            g_end[v_g] := cardinality(s_id);
        END IF;
        CONTINUE WHEN g_next[v_g] > g_end[v_g];
        v_n := g_next[v_g];
        g_next[v_g] := v_n + 1;
        g_id[v_g] := s_id[v_n];
        g_priority[v_g] := s_priority[v_n];
        g_aged[v_g] := s_aged[v_n];
        g_at[v_g] := s_at[v_n];
        -- Back behind every head of its priority or better (their turns
        -- are all earlier) and before the rest: the first place whose
        -- head is worse, by binary search (ord is in head order).
        v_lo := 1;
        v_hi := cardinality(ord) + 1;
        WHILE v_lo < v_hi LOOP
            v_mid := (v_lo + v_hi) / 2;
            IF g_aged[ord[v_mid]] >= g_aged[v_g] THEN
                v_lo := v_mid + 1;
            ELSE
                v_hi := v_mid;
            END IF;
        END LOOP;
        ord := ord[1:v_lo - 1] || v_g || ord[v_lo:];
    END LOOP;
    -- The jobs taken, locked (SKIP LOCKED: one a claim by hand or a
    -- worker of the previous release leased meanwhile is left out), each
    -- with its ring entry's slot, in one statement.
    RETURN QUERY
    SELECT t.id, t.aged, t.at,
           (SELECT r2.slot FROM job_ready r2
             WHERE r2.queue_name = p_queue AND r2.priority = t.priority
               AND r2.available_at = t.at AND r2.id = t.id
             LIMIT 1)
    FROM unnest(t_id, t_priority, t_aged, t_at) WITH ORDINALITY AS t(id, priority, aged, at, n)
    WHERE NOT p_lock
       OR EXISTS (SELECT 1 FROM job_queue j
                   WHERE j.id = t.id AND j.lease_until IS NULL AND j.available_at = t.at
                     AND j.attempts < j.max_attempts
                   FOR UPDATE SKIP LOCKED)
    ORDER BY t.n;
END
$$;

-- The limited claim's pick with fair groups p_fair: queue_pick_fair for a
-- fair queue, else migration 0018's queue_pick_limited, unchanged.
CREATE FUNCTION queue_pick_limited(p_queue text, p_cap bigint, p_now timestamptz, p_lock boolean,
                                   p_grouped boolean, p_default integer, p_aging bigint,
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
    ELSE
        RETURN QUERY SELECT p.pick_id, p.pick_priority, p.pick_available_at, p.pick_slot
                     FROM queue_pick_limited(p_queue, p_cap, p_now, p_lock, p_grouped, p_default,
                                             p_aging) p;
    END IF;
END
$$;
