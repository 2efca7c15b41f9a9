-- The claim no longer scans job_queue (docs/operations.md, "A claim that
-- does not wait for VACUUM").
--
-- A claim ends a job's entry in job_queue_dequeue, and only VACUUM removes
-- the entry; while anything holds the xmin horizon back (an idle
-- transaction, a long report) VACUUM removes nothing, and every claim
-- steps over the entries of every job claimed since, each a visit to the
-- table. One idle session took a queue running 2,000 jobs/s down to 284.
--
-- So claims take due jobs from job_ready, a small ring of four
-- partitions that TRUNCATE empties: an entry per job that was due when it
-- was written (inserted into the ring's current slot by the triggers
-- below, in the writing transaction), deleted by the claim that leases
-- its job. `queue_ready_rotate` makes the next slot current every fraction
-- of a second once it has emptied it: the still-claimable entries it holds
-- (normally none: a slot is three rotations old) move to the current
-- slot, the rest, dead or stale, go with the TRUNCATE, which needs no
-- VACUUM and ignores the horizon. A claim therefore steps over the
-- entries of at most the last few rotations, whatever runs beside it.
--
-- Jobs written with a future available_at (delays, retries after a
-- backoff, snoozes, an available_at moved by hand without updated_at)
-- never enter the ring: claims read them through job_queue_scheduled as
-- before, skip-scanning priorities and stopping at the first job not due.
-- A job is in exactly one of the two places: in the ring when written with
-- available_at <= updated_at, else in job_queue_scheduled. An entry is
-- only a pointer: the claim locks and checks the job's row, so a stale
-- entry (its job discarded, leased by plain SQL, moved) is skipped, and
-- the rotation drops it.
--
-- The current slot and the last rotation's time are sequences: read and
-- written in place, never a row version that a held horizon would keep.

CREATE TABLE job_ready (
    slot         SMALLINT    NOT NULL,
    queue_name   TEXT        NOT NULL,
    priority     INTEGER     NOT NULL,
    available_at TIMESTAMPTZ NOT NULL,
    id           BIGINT      NOT NULL
) PARTITION BY LIST (slot);

CREATE TABLE job_ready_0 PARTITION OF job_ready FOR VALUES IN (0);
CREATE TABLE job_ready_1 PARTITION OF job_ready FOR VALUES IN (1);
CREATE TABLE job_ready_2 PARTITION OF job_ready FOR VALUES IN (2);
CREATE TABLE job_ready_3 PARTITION OF job_ready FOR VALUES IN (3);

-- Claim order within a queue, as job_queue_dequeue's.
CREATE INDEX job_ready_claim ON job_ready (queue_name, priority DESC, available_at, id);

-- The slot new entries go to (0 to 3), and when it became current
-- (milliseconds since the epoch, clock_timestamp()).
CREATE SEQUENCE queue_ready_slot MINVALUE 0 MAXVALUE 3 START 0;
CREATE SEQUENCE queue_ready_rotated_at MINVALUE 0 START 0;

-- The unleased jobs not in the ring: written with a future available_at.
CREATE INDEX job_queue_scheduled ON job_queue (queue_name, priority DESC, available_at, id)
    WHERE lease_until IS NULL AND available_at > updated_at;

-- Every job already due when written, pending now: into the ring.
INSERT INTO job_ready (slot, queue_name, priority, available_at, id)
SELECT 0, queue_name, priority, available_at, id FROM job_queue
WHERE lease_until IS NULL AND available_at <= updated_at;

-- An INSERT's due jobs, in one statement per INSERT statement (a batch
-- enqueue pays one call, not one per row).
CREATE FUNCTION queue_ready_inserted() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    INSERT INTO job_ready (slot, queue_name, priority, available_at, id)
    SELECT (SELECT last_value FROM queue_ready_slot)::smallint,
           n.queue_name, n.priority, n.available_at, n.id
    FROM inserted_jobs n
    WHERE n.lease_until IS NULL AND n.available_at <= n.updated_at;
    RETURN NULL;
END
$$;

CREATE TRIGGER job_queue_ready_insert AFTER INSERT ON job_queue
    REFERENCING NEW TABLE AS inserted_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION queue_ready_inserted();

-- A job that an UPDATE makes due-at-write and unleased (a release, a
-- reclaim, a retry without backoff, a run-now), or whose order changes
-- while it is: a new entry. Claims, heartbeats and acks never call it
-- (the WHEN clause, evaluated without a function call, is false for them).
CREATE FUNCTION queue_ready_updated() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    INSERT INTO job_ready (slot, queue_name, priority, available_at, id)
    VALUES ((SELECT last_value FROM queue_ready_slot)::smallint,
            NEW.queue_name, NEW.priority, NEW.available_at, NEW.id);
    RETURN NULL;
END
$$;

CREATE TRIGGER job_queue_ready_update AFTER UPDATE ON job_queue
    FOR EACH ROW
    WHEN (NEW.lease_until IS NULL AND NEW.available_at <= NEW.updated_at
          AND (OLD.lease_until IS NOT NULL OR OLD.available_at > OLD.updated_at
               OR OLD.available_at <> NEW.available_at OR OLD.priority <> NEW.priority
               OR OLD.queue_name <> NEW.queue_name))
    EXECUTE FUNCTION queue_ready_updated();

-- Makes the next slot current if the current one is at least
-- p_period_ms old: counts the next slot's still-claimable entries (more
-- than p_keep: a backlog that claims are draining there; the slot after
-- is tried, up to the three other slots), locks the slot (waiting at most p_wait_ms for the transactions
-- that hold it, such as an enqueue not yet committed that wrote there),
-- moves those entries to the current slot and TRUNCATEs it. Returns
-- whether it rotated. One rotation at a time per schema (an advisory
-- lock; a caller that does not get it returns at once).
--
-- Every claim waits while the slot is locked, so the lock is taken after
-- the count, and both queries walk the slot and read each entry's job by
-- primary key (a LATERAL subquery that OFFSET 0 keeps from being merged
-- into a join, IS NOT DISTINCT FROM as in queue_pick), with sequential
-- scans off: as joins they read all of job_queue, by a hash join or as
-- the outer side of a nested loop, 100-800 ms under a lock that stopped
-- every claim; and on statistics that said job_queue was empty (autovacuum
-- found it so when the queue started) the planner read it once per entry
-- by a sequential scan, 3 ms an entry, seconds a rotation.
CREATE FUNCTION queue_ready_rotate(p_period_ms bigint, p_wait_ms bigint, p_keep bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_bitmapscan = off
SET jit = off
AS $$
DECLARE
    v_now_ms bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    v_current smallint;
    v_next smallint;
    v_slot text;
    v_live bigint;
    v_step int;
    v_claimable text := 'FROM %I r CROSS JOIN LATERAL (
                             SELECT 1 FROM job_queue j
                             WHERE j.id = r.id AND j.locked_by IS NULL
                               AND j.queue_name IS NOT DISTINCT FROM r.queue_name
                               AND j.priority IS NOT DISTINCT FROM r.priority
                               AND j.available_at IS NOT DISTINCT FROM r.available_at
                             OFFSET 0) j';
BEGIN
    IF v_now_ms - (SELECT last_value FROM queue_ready_rotated_at) < p_period_ms THEN
        RETURN false;
    END IF;
    IF NOT pg_try_advisory_xact_lock(hashtext('queue_ready_rotate:' || current_schema())) THEN
        RETURN false;
    END IF;
    v_current := (SELECT last_value FROM queue_ready_slot)::smallint;
    PERFORM set_config('lock_timeout', p_wait_ms || 'ms', true);
    -- The oldest slot first; one holding a backlog is passed over (and
    -- drained by claims), so that the other slots keep turning.
    FOR v_step IN 1..3 LOOP
        v_next := (v_current + v_step) % 4;
        v_slot := 'job_ready_' || v_next;
        EXECUTE format('SELECT count(*) FROM (SELECT 1 ' || v_claimable || ' LIMIT $1) k', v_slot)
            INTO v_live USING p_keep + 1;
        CONTINUE WHEN v_live > p_keep;
        BEGIN
            EXECUTE format('LOCK TABLE %I IN ACCESS EXCLUSIVE MODE', v_slot);
        EXCEPTION WHEN lock_not_available THEN
            RETURN false;
        END;
        EXECUTE format('INSERT INTO job_ready (slot, queue_name, priority, available_at, id)
                        SELECT $1, r.queue_name, r.priority, r.available_at, r.id ' || v_claimable,
                       v_slot)
            USING v_current;
        EXECUTE format('TRUNCATE %I', v_slot);
        PERFORM setval('queue_ready_slot', v_next);
        PERFORM setval('queue_ready_rotated_at', v_now_ms);
        RETURN true;
    END LOOP;
    RETURN false;
END
$$;

-- The claim's pick (migration 0007) over the ring and the scheduled jobs:
-- up to p_cap claimable jobs of queue p_queue in claim order, locked
-- (SKIP LOCKED) when p_lock. The ring's part is one ordered scan of the
-- ring's index (merged over its slots), each entry checked against its
-- job's row in a LATERAL subquery so that the ring drives (as a plain
-- join the planner walked job_queue_dequeue instead, which yields the same
-- order through the join's equalities, and read every unleased job of the
-- queue). Its comparisons with the entry are IS NOT DISTINCT FROM (the
-- columns are NOT NULL: the same test) because no index can serve that
-- operator: with `=`, statistics saying job_queue is empty let the
-- planner read it through job_queue_unique_key, led by queue_name (2,000
-- buffers for a claim of 3 jobs), instead of its primary key. For the
-- same reason it tests `locked_by IS NULL` (the same as `lease_until IS
-- NULL`, constraint job_queue_lease_has_holder): `lease_until IS NULL`
-- is the predicate of job_queue_dequeue, and with it the planner may
-- read that whole index for each entry. The
-- scheduled part is 0007's skip-scan over
-- job_queue_scheduled. Each part locks up to p_cap jobs; the final LIMIT
-- may leave some of them locked and unleased until the claim commits (a
-- concurrent claim skips them; the next takes them). The two parts are
-- merged by a sort of at most 2 x p_cap rows, which enable_sort = off
-- prices at 10^10: JIT is off, or every claim would compile the query
-- (0.3 s). `PgStorage::explain_dequeue` EXPLAINs the locking query as written
-- here, between `RETURN QUERY` and the first `;`.
CREATE OR REPLACE FUNCTION queue_pick(p_queue text, p_cap bigint, p_now timestamptz, p_lock boolean)
RETURNS TABLE (pick_id bigint, pick_priority integer, pick_available_at timestamptz)
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
            SELECT c.id, c.priority, c.available_at
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
            SELECT c.id, c.priority, c.available_at
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
        SELECT b.id, b.priority, b.available_at
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
            SELECT c.id, c.priority, c.available_at
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
            SELECT c.id, c.priority, c.available_at
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
        SELECT b.id, b.priority, b.available_at
        FROM (SELECT * FROM ready UNION ALL SELECT * FROM scheduled) b
        ORDER BY b.priority DESC, b.available_at, b.id
        LIMIT p_cap;
    END IF;
END
$$;

-- The claim's lease (migration 0009) also deletes the ring entries of the
-- jobs it leases (found by their whole key: the lease changes none of it).
CREATE OR REPLACE FUNCTION queue_lease(p_ids bigint[], p_now timestamptz, p_lease_us bigint, p_worker text)
RETURNS SETOF job_queue
LANGUAGE plpgsql VOLATILE ROWS 16
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
    spent AS (
        DELETE FROM job_ready r USING leased l
        WHERE r.queue_name = l.queue_name AND r.priority = l.priority
          AND r.available_at = l.available_at AND r.id = l.id
    )
    SELECT * FROM leased;
END
$$;

-- CREATE OR REPLACE reset queue_lease's settings: 0009's again.
ALTER FUNCTION queue_lease SET search_path FROM CURRENT
    SET enable_seqscan = off SET enable_bitmapscan = off
    SET enable_hashjoin = off SET enable_mergejoin = off
    SET jit = off SET plan_cache_mode = force_generic_plan;

-- An idle worker's next_due (migration 0007) over the jobs that can be
-- not due: those written with a future time (job_queue_scheduled, the
-- same skip-scan of priorities as before), and, for a clock that moved
-- back, ring entries later than p_now (the ring holds a few rotations of
-- entries). job_queue_dequeue would do too, but under a held horizon its
-- head keeps an entry per job claimed since, and each idle poll stepped
-- over them (15 ms after 100,000 claims).
CREATE OR REPLACE FUNCTION queue_next_due(p_queue text, p_now timestamptz) RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
SET enable_bitmapscan = off
SET enable_sort = off
SET enable_seqscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN (
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
        )
        SELECT least(
            (SELECT min((SELECT j.available_at FROM job_queue j
                          WHERE j.queue_name = p_queue AND j.lease_until IS NULL
                            AND j.available_at > j.updated_at
                            AND j.priority = l.priority AND j.available_at > p_now
                          ORDER BY j.available_at LIMIT 1))
               FROM levels l WHERE l.priority IS NOT NULL),
            (SELECT min(r.available_at) FROM job_ready r
              WHERE r.queue_name = p_queue AND r.available_at > p_now))
    );
END
$$;
