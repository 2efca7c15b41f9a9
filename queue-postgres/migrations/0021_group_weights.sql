-- Weights between a fair queue's groups (issue 38, item 2): a group of
-- weight w takes w jobs in a row each time its turn comes
-- (queue_core::Storage::dequeue states the order; queue_core::backend::
-- FairTurn::take the count).
--
-- One group's own weight in one queue (Storage::set_group_weight); a group
-- without a row has weight 1. Written only for a queue that has a
-- queue_config row, under that row's lock (sql/queues.rs,
-- SET_GROUP_WEIGHT).
CREATE TABLE queue_group_weight (
    queue_name text    NOT NULL,
    group_key  text    NOT NULL,
    weight     integer NOT NULL CHECK (weight BETWEEN 1 AND 1000),
    PRIMARY KEY (queue_name, group_key)
);

-- The jobs a group has taken since its turn last moved (fewer than its
-- weight; always 0 for a group of weight 1). The limited claim writes it
-- with the turn (queue-postgres/src/sql/dequeue.rs, CHARGE's turned).
ALTER TABLE job_group_turn ADD COLUMN taken integer NOT NULL DEFAULT 0;

-- A group's jobs taken towards its weight and its weight, read afresh:
-- the limited claim's CHARGE (queue-postgres/src/sql/dequeue.rs, turned)
-- calls it for each group it served, after it took the config row's lock.
-- A query of that statement would read the statement's snapshot, taken
-- before the lock was granted, and miss what the claim that held the lock
-- wrote; a VOLATILE function's query takes its own snapshot (as
-- queue_held_leases, migration 0006). PL/pgSQL: never inlined.
CREATE FUNCTION queue_fair_state(p_queue text, p_group text)
RETURNS TABLE (state_taken integer, state_weight integer)
LANGUAGE plpgsql VOLATILE ROWS 1
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY
    SELECT COALESCE((SELECT t.taken FROM job_group_turn t
                      WHERE t.queue_name = p_queue AND t.group_key = p_group), 0),
           COALESCE((SELECT w.weight FROM queue_group_weight w
                      WHERE w.queue_name = p_queue AND w.group_key = p_group), 1);
END
$$;

-- queue_pick_fair (migration 0020) with weights: each group's turn, its
-- jobs taken and its weight are read with its head; a take counts
-- towards the weight, and the group's turn moves behind every other only
-- at its weight. A served group goes back among the heads by the whole
-- key, which for groups of weight 1 is where migration 0020 put it. The
-- rest of 0020's comment holds.
CREATE OR REPLACE FUNCTION queue_pick_fair(p_queue text, p_cap bigint, p_now timestamptz, p_lock boolean,
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
    -- Each group's turn (job_group_turn's turn), the jobs it has taken
    -- towards its weight (taken) and its weight.
    g_turn bigint[] := '{}';
    g_taken integer[] := '{}';
    g_weight integer[] := '{}';
    v_claims bigint := 0;
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
        SELECT g.k, h.job_id, h.job_priority, h.job_aged, h.job_available_at,
               COALESCE(t.turn, 0) AS turn, COALESCE(t.taken, 0) AS taken,
               COALESCE(w.weight, 1) AS weight
        FROM groups g
        CROSS JOIN LATERAL queue_fair_group(p_queue, g.k, 1, p_now, p_aging) h
        LEFT JOIN job_group_turn t ON t.queue_name = p_queue AND t.group_key = g.k
        LEFT JOIN queue_group_weight w ON w.queue_name = p_queue AND w.group_key = g.k
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
        g_turn := g_turn || r.turn;
        g_taken := g_taken || r.taken;
        g_weight := g_weight || r.weight;
        v_claims := GREATEST(v_claims, r.turn);
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
        -- The take counts towards the group's weight
        -- (queue_core::backend::FairTurn::take): at its weight, the
        -- group's turn goes behind every other.
        v_claims := v_claims + 1;
        g_taken[v_g] := g_taken[v_g] + 1;
        IF g_taken[v_g] >= g_weight[v_g] THEN
            g_turn[v_g] := v_claims;
            g_taken[v_g] := 0;
        END IF;
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
        -- Back in the list of heads at the first place whose head is
        -- worse by (effective priority, turn, available_at, id), by binary
        -- search (ord is in that order): a group whose turn moved goes
        -- behind every head of its priority or better (their turns are all
        -- earlier) and before the rest; one still within its weight keeps
        -- its turn, and its place among the heads of that turn.
        v_lo := 1;
        v_hi := cardinality(ord) + 1;
        WHILE v_lo < v_hi LOOP
            v_mid := (v_lo + v_hi) / 2;
            IF (-g_aged[ord[v_mid]]::bigint, g_turn[ord[v_mid]], g_at[ord[v_mid]], g_id[ord[v_mid]])
               < (-g_aged[v_g]::bigint, g_turn[v_g], g_at[v_g], g_id[v_g]) THEN
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
