-- Workflows (issue 39): a job may depend on other jobs and waits, with
-- available_at at queue_core::waiting_at() ('9999-12-31 23:59:59.999999+00'),
-- until they have finished. A waiting job is one more row of
-- job_queue_scheduled, after every time an enqueue may ask for, so every
-- claim passes it over at the end of its priority level without knowing
-- why. queue_core's Storage::enqueue_batch states the contract.
--
-- What finishing a job does to the jobs waiting on it lives here, in a
-- trigger on job_queue's DELETE: every way a job leaves the live table
-- (an ack, a dead letter, a discard or cancel, a reclaim past its last
-- attempt, plain SQL) counts its finish, in the same transaction, with no
-- change to those statements. Its WHEN clause, evaluated without a
-- function call, reads two columns of the deleted row, so a job without
-- dependants that was not waiting (every job of a queue without
-- workflows) pays nothing.

-- Set (never cleared) by the enqueue of a job that depends on this one,
-- under a row lock (queue-postgres/src/workflow.rs): an ack that deletes
-- the row waits for that enqueue to commit, then sees its edges.
ALTER TABLE job_queue ADD COLUMN has_dependants boolean NOT NULL DEFAULT false;

-- One row per dependency a job was enqueued with, kept after both finish
-- (Storage::job_links reads them); unfinished is true until depends_on
-- leaves the live table, when its finish is counted, once, for job_id.
CREATE TABLE job_dependency (
    job_id     bigint  NOT NULL,
    depends_on bigint  NOT NULL,
    unfinished boolean NOT NULL,
    PRIMARY KEY (job_id, depends_on)
);

-- A finishing job's dependants, and job_links' list of them.
CREATE INDEX job_dependency_depends_on ON job_dependency (depends_on, job_id);

-- The jobs waiting: how many dependencies have not finished (0 only
-- inside the transaction that releases the job, which deletes the row), the
-- available_at the job was enqueued for, and what a failed dependency
-- does to it (queue_core::DependencyFailure).
CREATE TABLE job_waiting (
    job_id     bigint      PRIMARY KEY,
    remaining  integer     NOT NULL CHECK (remaining >= 0),
    run_at     timestamptz NOT NULL,
    on_failure text        NOT NULL CHECK (on_failure IN ('cancel', 'run'))
);

-- Releases the waiting jobs p_ids (their job_waiting rows counted down to
-- 0 by the caller's transaction, which holds their locks): each is due at
-- the later of p_at, the finish that released it, and p_run_at, the time
-- it was enqueued for; their queues are woken (the NOTIFY is sent on
-- commit) on p_channel.
CREATE FUNCTION queue_release_waiting(p_ids bigint[], p_run_at timestamptz[], p_at timestamptz,
                                      p_channel text) RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_notified bigint;
BEGIN
    DELETE FROM job_waiting WHERE job_id = ANY(p_ids);
    WITH released AS (
        UPDATE job_queue j
        SET available_at = greatest(u.run_at, p_at), updated_at = p_at
        FROM unnest(p_ids, p_run_at) AS u(id, run_at)
        WHERE j.id = u.id AND j.lease_until IS NULL
          AND j.available_at = '9999-12-31 23:59:59.999999+00'
        RETURNING j.queue_name
    )
    SELECT count(pg_notify(p_channel, q.queue_name)) INTO v_notified
    FROM (SELECT DISTINCT queue_name FROM released) q;
END
$$;

-- The finish of OLD, a job that had dependants or was waiting, leaving
-- job_queue. A waiting job leaving (discarded, cancelled) waits no more.
-- A job with dependants counts once for each job waiting on it: its
-- status and time are its history row's (written by the same statement;
-- a row deleted by hand without one counts as discarded, now). The last
-- finish a waiting job needed releases it (queue_release_waiting).
--
-- Two finishes of a waiting job's last two dependencies, committing at
-- once, are serialized by the job's job_waiting row: the count-down is
-- one UPDATE, which reads the row's latest version once it holds the
-- lock, so exactly one of them counts it down to 0 and releases it.
-- (A count-down and a release decided in two statements of one snapshot
-- would let both see a count they did not leave, or neither.)
--
-- A completion (the common case) is two statements: its status, then the
-- edges and the count-downs together. A dependency that did not complete
-- cancels the jobs that do not run anyway, whose own dependants this
-- invocation then handles in turn: the cancellations' DELETEs find the
-- setting on and return at once, so a long chain is a loop here, not a
-- recursion. Each step is one statement over all the jobs it touches (a
-- root's finish releases its 10,000 children in a few statements, not
-- 10,000 rounds of them).
CREATE FUNCTION queue_dependency_finished() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_finished bigint[];
    v_status text;
    v_at timestamptz;
    v_waiters bigint[];
    v_dependencies bigint[];
    v_finishes integer[];
    v_cancelled bigint[];
    v_released bigint[];
    v_run_at timestamptz[];
    v_channel text := 'queue_jobs.' || TG_TABLE_SCHEMA;
BEGIN
    IF current_setting('queue.finishing_dependencies', true) = 'on' THEN
        RETURN NULL;
    END IF;
    IF OLD.available_at = '9999-12-31 23:59:59.999999+00' THEN
        DELETE FROM job_waiting WHERE job_id = OLD.id;
    END IF;
    IF NOT OLD.has_dependants THEN
        RETURN NULL;
    END IF;
    SELECT h.status_final, h.finished_at INTO v_status, v_at
    FROM job_history h WHERE h.id = OLD.id;
    IF NOT FOUND THEN
        v_status := 'discarded';
        v_at := now();
    END IF;
    IF v_status = 'completed' THEN
        WITH counted AS (
            UPDATE job_dependency d SET unfinished = false
            WHERE d.depends_on = OLD.id AND d.unfinished
            RETURNING d.job_id
        ),
        counted_down AS (
            UPDATE job_waiting w SET remaining = w.remaining - 1
            FROM counted c WHERE w.job_id = c.job_id
            RETURNING w.job_id, w.remaining, w.run_at
        )
        SELECT array_agg(c.job_id), array_agg(c.run_at) INTO v_released, v_run_at
        FROM counted_down c WHERE c.remaining = 0;
        IF v_released IS NOT NULL THEN
            PERFORM queue_release_waiting(v_released, v_run_at, v_at, v_channel);
        END IF;
        RETURN NULL;
    END IF;
    -- A failure: cancellations delete jobs, handled by this loop.
    PERFORM set_config('queue.finishing_dependencies', 'on', true);
    v_finished := ARRAY[OLD.id];
    LOOP
        -- Each edge from a finished job counts once: per waiting job, how
        -- many of its dependencies finished, and one of them (the reason
        -- a cancellation gives).
        WITH counted AS (
            UPDATE job_dependency d SET unfinished = false
            WHERE d.depends_on = ANY(v_finished) AND d.unfinished
            RETURNING d.job_id, d.depends_on
        )
        SELECT array_agg(c.job_id ORDER BY c.job_id),
               array_agg(c.dependency ORDER BY c.job_id),
               array_agg(c.finishes ORDER BY c.job_id)
        INTO v_waiters, v_dependencies, v_finishes
        FROM (SELECT job_id, min(depends_on) AS dependency, count(*)::integer AS finishes
              FROM counted GROUP BY job_id) c;
        EXIT WHEN v_waiters IS NULL;
        WITH stopped AS (
            DELETE FROM job_waiting w USING unnest(v_waiters, v_dependencies) AS u(id, dependency)
            WHERE w.job_id = u.id AND w.on_failure = 'cancel'
            RETURNING w.job_id, u.dependency
        ),
        gone AS (
            DELETE FROM job_queue j USING stopped s WHERE j.id = s.job_id
            RETURNING j.*, s.dependency
        ),
        archived AS (
            INSERT INTO job_history (id, queue_name, priority, unique_key, payload, status_final,
                                     result, last_error, attempts, max_attempts, processed_by,
                                     created_at, started_at, finished_at, snoozes, trace_context,
                                     group_key)
            SELECT id, queue_name, priority, unique_key, payload, 'cancelled', NULL,
                   jsonb_build_object(
                       'message', format('dependency %s finished as %s', dependency, v_status),
                       'dependency', dependency,
                       'status', v_status),
                   attempts, max_attempts, NULL, created_at, first_locked_at, v_at, snoozes,
                   trace_context, group_key
            FROM gone
            RETURNING id
        )
        SELECT COALESCE(array_agg(id), '{}') INTO v_cancelled FROM archived;
        -- The jobs that run anyway count the failure as a finish.
        WITH counted_down AS (
            UPDATE job_waiting w SET remaining = w.remaining - u.finishes
            FROM unnest(v_waiters, v_finishes) AS u(id, finishes)
            WHERE w.job_id = u.id
            RETURNING w.job_id, w.remaining, w.run_at
        )
        SELECT array_agg(c.job_id), array_agg(c.run_at) INTO v_released, v_run_at
        FROM counted_down c WHERE c.remaining = 0;
        IF v_released IS NOT NULL THEN
            PERFORM queue_release_waiting(v_released, v_run_at, v_at, v_channel);
        END IF;
        EXIT WHEN cardinality(v_cancelled) = 0;
        v_finished := v_cancelled;
        v_status := 'cancelled';
    END LOOP;
    PERFORM set_config('queue.finishing_dependencies', '', true);
    RETURN NULL;
END
$$;

CREATE TRIGGER job_queue_dependency_finished AFTER DELETE ON job_queue
    FOR EACH ROW
    WHEN (OLD.has_dependants OR OLD.available_at = '9999-12-31 23:59:59.999999+00')
    EXECUTE FUNCTION queue_dependency_finished();

-- The next time a queue has a job due, as 0010's, past a job that waits:
-- it is due at no time (a release wakes its queue).
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
                            AND j.available_at < '9999-12-31 23:59:59.999999+00'
                          ORDER BY j.available_at LIMIT 1))
               FROM levels l WHERE l.priority IS NOT NULL),
            (SELECT min(r.available_at) FROM job_ready r
              WHERE r.queue_name = p_queue AND r.available_at > p_now))
    );
END
$$;
