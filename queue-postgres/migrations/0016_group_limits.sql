-- Group concurrency (issue 38, item 1): a job's group key, a queue's
-- group concurrency and each group's own limit, enforced by the limited
-- claim (queue-postgres/src/flow.rs).
--
-- group_key: NULL for a job in no group; 1 to 255 bytes of UTF-8
-- (checked by queue_core::GroupKey before any write). Nullable without a
-- default, so adding it rewrites no row; its CHECK is NOT VALID because
-- every existing row holds NULL (nothing to validate, and no scan of a
-- large table under the migration's lock), and it holds for every row
-- written from now on. History keeps the key, and a dead letter sent
-- back to the live table takes it along.
ALTER TABLE job_queue ADD COLUMN group_key text;
ALTER TABLE job_queue ADD CONSTRAINT job_queue_group_key_length
    CHECK (octet_length(group_key) BETWEEN 1 AND 255) NOT VALID;
ALTER TABLE job_history ADD COLUMN group_key text;

-- The most leased jobs of one group of the queue at once, for every group
-- without a row in queue_group_limit; NULL: not set.
ALTER TABLE queue_config ADD COLUMN group_concurrency_limit integer
    CONSTRAINT queue_config_group_concurrency_limit CHECK (group_concurrency_limit > 0);

-- One group's own limit in one queue (Storage::set_group_limit): it
-- replaces the queue's group_concurrency_limit for that group. Written
-- only for a queue that has a queue_config row.
CREATE TABLE queue_group_limit (
    queue_name        text    NOT NULL,
    group_key         text    NOT NULL,
    concurrency_limit integer NOT NULL,
    PRIMARY KEY (queue_name, group_key),
    CONSTRAINT queue_group_limit_group_key_length CHECK (octet_length(group_key) BETWEEN 1 AND 255),
    CONSTRAINT queue_group_limit_concurrency_limit CHECK (concurrency_limit > 0)
);

-- How many rows of queue_group_limit the queue has, kept by the trigger
-- below (through set_group_limit or plain SQL alike): the claim tells a
-- queue with group limits by its config row's columns alone (a subquery
-- of queue_group_limit in the claim made its generic plan look dearer than
-- its custom ones, and it was planned again on every call).
ALTER TABLE queue_config ADD COLUMN group_limits integer NOT NULL DEFAULT 0;

CREATE FUNCTION queue_group_limits_counted() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE queue_config SET group_limits = group_limits - 1 WHERE queue_name = OLD.queue_name;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        UPDATE queue_config SET group_limits = group_limits + 1 WHERE queue_name = NEW.queue_name;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER queue_group_limits_counted
    AFTER INSERT OR DELETE OR UPDATE OF queue_name ON queue_group_limit
    FOR EACH ROW EXECUTE FUNCTION queue_group_limits_counted();

-- Serves the grouped claim's count of the leases each group of a queue
-- holds: only leased rows with a group have an entry, so the count never
-- visits waiting jobs, and a claim of a job without a group adds none.
CREATE INDEX job_queue_group_leased ON job_queue (queue_name, group_key)
    WHERE lease_until IS NOT NULL AND group_key IS NOT NULL;

-- The claim's pick (migration 0011) gains the jobs' group keys
-- (pick_group) and leaves out the jobs of the groups in p_full (the
-- groups already at their limit; NULL, as every plain claim passes it:
-- none). Its body is 0011's with those two additions; it is dropped and
-- created again because its result gains a column.
DROP FUNCTION queue_pick(text, bigint, timestamptz, boolean);

CREATE FUNCTION queue_pick(p_queue text, p_cap bigint, p_now timestamptz, p_lock boolean,
                           p_full text[] DEFAULT NULL)
RETURNS TABLE (pick_id bigint, pick_priority integer, pick_available_at timestamptz,
               pick_slot smallint, pick_group text)
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
                  AND (p_full IS NULL OR j.group_key IS NULL OR j.group_key <> ALL(p_full))
                FOR UPDATE SKIP LOCKED
            ) c
            WHERE r.queue_name = p_queue
              AND r.available_at <= p_now
            ORDER BY r.priority DESC, r.available_at, r.id
            LIMIT p_cap
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
                FOR UPDATE SKIP LOCKED
            ) c
            WHERE l.priority IS NOT NULL
            LIMIT p_cap
        )
        SELECT b.id, b.priority, b.available_at, b.slot, b.group_key
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
                  AND (p_full IS NULL OR j.group_key IS NULL OR j.group_key <> ALL(p_full))
            ) c
            WHERE r.queue_name = p_queue
              AND r.available_at <= p_now
            ORDER BY r.priority DESC, r.available_at, r.id
            LIMIT p_cap
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
            LIMIT p_cap
        )
        SELECT b.id, b.priority, b.available_at, b.slot, b.group_key
        FROM (SELECT * FROM ready UNION ALL SELECT * FROM scheduled) b
        ORDER BY b.priority DESC, b.available_at, b.id
        LIMIT p_cap;
    END IF;
END
$$;

-- The pick of the limited claim (queue-postgres/src/sql/dequeue.rs,
-- `DEQUEUE_PICK_LIMITED`): queue_pick as it is for a queue without group
-- limits (p_grouped false), else the best p_cap claimable jobs of the
-- queue within its groups' slots. Each group's limit is its row of
-- queue_group_limit, else p_default (the queue's group concurrency; NULL:
-- only the groups with a row are limited), less the leases its jobs hold.
--
-- Called after the claim locked the queue's config row (its `locked`
-- CTE), so no other claim of the queue runs in between, and as a VOLATILE
-- function its queries take their own snapshots, after that lock: the
-- count of held leases sees every claim that committed while this one
-- waited. It walks the queue's claimable jobs in claim order, a page at
-- a time (the first of p_cap jobs: the groups full at the start are
-- left out already, and a page of 64 for a claim of one locked 64 rows,
-- a limited drain 0.68x the unlimited one against 0.76-0.79x) through
-- queue_pick with the full groups left out, and keeps the
-- jobs whose group has a slot left; a job of a group that filled up on
-- the way is skipped. A page that ends with fewer jobs taken than p_cap
-- is followed by one four times larger, after the last job seen, with
-- the groups full by then left out too. Its cost is the claimable jobs
-- of full groups that stand before the jobs it takes, in claim order:
-- queue_pick reads and drops them (by the group test on the job's row)
-- without locking them.
CREATE FUNCTION queue_pick_limited(p_queue text, p_cap bigint, p_now timestamptz, p_lock boolean,
                                   p_grouped boolean, p_default integer)
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
    v_page bigint := p_cap;
    v_read bigint;
    v_taken bigint := 0;
    v_limit integer;
    v_count integer;
    v_after_priority integer;
    v_after_at timestamptz;
    v_after_id bigint;
    c record;
BEGIN
    IF NOT p_grouped THEN
        RETURN QUERY SELECT p.pick_id, p.pick_priority, p.pick_available_at, p.pick_slot
                     FROM queue_pick(p_queue, p_cap, p_now, p_lock) p;
        RETURN;
    END IF;
    IF p_cap IS NULL OR p_cap <= 0 THEN
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
        FOR c IN SELECT * FROM queue_pick(p_queue, v_page, p_now, p_lock, v_full) LOOP
            v_read := v_read + 1;
            -- Seen on an earlier page (the pages overlap: each starts at
            -- the best job again).
            CONTINUE WHEN v_after_id IS NOT NULL
                AND (c.pick_priority > v_after_priority
                     OR (c.pick_priority = v_after_priority
                         AND (c.pick_available_at, c.pick_id) <= (v_after_at, v_after_id)));
            v_after_priority := c.pick_priority;
            v_after_at := c.pick_available_at;
            v_after_id := c.pick_id;
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

-- The two functions that archive with a column list (migration 0014)
-- copy the group key into history; their bodies are 0014's with the one
-- column added. (queue_lease returns whole rows: it needs no change.)

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
                                 created_at, started_at, finished_at, snoozes, trace_context,
                                 group_key)
        SELECT d.id, d.queue_name, d.priority, d.unique_key, d.payload, 'completed', d.ack_result,
               d.last_error, d.attempts, d.max_attempts, d.locked_by, d.created_at,
               d.first_locked_at, COALESCE(p_now, now()), d.snoozes, d.trace_context, d.group_key
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
                                 created_at, started_at, finished_at, snoozes, trace_context,
                                 group_key)
        SELECT d.id, d.queue_name, d.priority, d.unique_key, d.payload, 'dead_letter', NULL,
               p_error, d.attempts, d.max_attempts, d.locked_by, d.created_at, d.first_locked_at,
               COALESCE(p_now, now()), d.snoozes, d.trace_context, d.group_key
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
