-- Workflows, counted once per statement (issue 39). 0022's finish trigger
-- ran for each deleted row with dependants, and each of them counted its
-- dependant down in its own UPDATE of that job's job_waiting row: a batch
-- callback or a join that waits for 10,000 jobs had its row updated
-- 10,000 times, and PostgreSQL walks every version of a row updated in
-- a page since the last prune to find the newest (10,000 updates of one
-- row in one transaction: 1.1 s here, against 0.08 s for 10,000 rows
-- updated once each), and each finish paid the four statements of a
-- trigger call. Here the finishes are counted once per statement: an ack
-- of 50 jobs that a join waits for counts the join down once, by 50.
--
-- The order of what a statement finishes is kept as the reference storage
-- has it: completions only count down and release, so they are counted
-- together first; then each dependency that did not complete, in
-- ascending id order, cancels the jobs that do not run anyway (a job that
-- several failures of one statement cancel names the lowest), their own
-- dependants followed through before the next, as 0022's loop did.
--
-- And a release no longer calls the ready ring's row trigger once per
-- released job: queue_release_waiting writes their ring entries in the
-- statement that releases them, and the trigger's WHEN passes over the
-- jobs it releases.

DROP TRIGGER job_queue_dependency_finished ON job_queue;
DROP FUNCTION queue_dependency_finished();

-- Counts the waiting jobs p_waiters down by p_finishes each (rows a
-- caller already deleted are gone and pass), and releases those at 0,
-- deleting their rows. The UPDATE reads each row's latest version once
-- it holds the lock, so of two finishes committing at once exactly one
-- sees 0.
CREATE FUNCTION queue_count_down(p_waiters bigint[], p_finishes integer[], p_at timestamptz,
                                 p_channel text) RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_released bigint[];
    v_run_at timestamptz[];
BEGIN
    WITH counted_down AS (
        UPDATE job_waiting w SET remaining = w.remaining - u.finishes
        FROM unnest(p_waiters, p_finishes) AS u(id, finishes)
        WHERE w.job_id = u.id
        RETURNING w.job_id, w.remaining, w.run_at
    )
    SELECT array_agg(c.job_id), array_agg(c.run_at) INTO v_released, v_run_at
    FROM counted_down c WHERE c.remaining = 0;
    IF v_released IS NOT NULL THEN
        DELETE FROM job_waiting WHERE job_id = ANY(v_released);
        PERFORM queue_release_waiting(v_released, v_run_at, p_at, p_channel);
    END IF;
END
$$;

-- Counts the finishes of p_finished (jobs with dependants that left
-- job_queue, each with its status) for the jobs waiting on them, at
-- p_at, the time of the finish. Releases the jobs whose last dependency
-- this was and cancels those a failure stops; the cancellations' own
-- dependants are counted in turn. The caller has set
-- queue.finishing_dependencies, so the cancellations' DELETEs do not
-- call the trigger again.
CREATE FUNCTION queue_count_finishes(p_finished bigint[], p_status text, p_at timestamptz,
                                     p_channel text) RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_finished bigint[] := p_finished;
    v_status text := p_status;
    v_waiters bigint[];
    v_dependencies bigint[];
    v_finishes integer[];
    v_cancelled bigint[];
    v_released bigint[];
    v_run_at timestamptz[];
BEGIN
    IF v_status = 'completed' THEN
        -- Each edge from a finished job counts once; per waiting job, by
        -- how many of its dependencies finished: a job this finishes
        -- waiting for loses its row (and is released), the others are
        -- counted down. A count-down that a finish committed since this
        -- statement's snapshot took to 0 (the last two finishes racing)
        -- is found by the UPDATE, which reads the latest row.
        WITH counted AS (
            UPDATE job_dependency d SET unfinished = false
            WHERE d.depends_on = ANY(v_finished) AND d.unfinished
            RETURNING d.job_id
        ),
        per_job AS (
            SELECT job_id, count(*)::integer AS finishes FROM counted GROUP BY job_id
        ),
        done AS (
            DELETE FROM job_waiting w USING per_job p
            WHERE w.job_id = p.job_id AND w.remaining = p.finishes
            RETURNING w.job_id, w.run_at
        )
        SELECT (SELECT array_agg(p.job_id) FROM per_job p),
               (SELECT array_agg(p.finishes) FROM per_job p),
               (SELECT array_agg(d.job_id) FROM done d),
               (SELECT array_agg(d.run_at) FROM done d)
        INTO v_waiters, v_finishes, v_released, v_run_at;
        IF v_released IS NOT NULL THEN
            PERFORM queue_release_waiting(v_released, v_run_at, p_at, p_channel);
        END IF;
        IF cardinality(v_waiters) > COALESCE(cardinality(v_released), 0) THEN
            -- The rows done deleted are gone for this statement.
            PERFORM queue_count_down(v_waiters, v_finishes, p_at, p_channel);
        END IF;
        RETURN;
    END IF;
    LOOP
        -- Per waiting job, how many of its dependencies finished, and one
        -- of them (the reason a cancellation gives).
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
                   attempts, max_attempts, NULL, created_at, first_locked_at, p_at, snoozes,
                   trace_context, group_key
            FROM gone
            RETURNING id
        )
        SELECT COALESCE(array_agg(id), '{}') INTO v_cancelled FROM archived;
        -- The jobs that run anyway count the failure as a finish.
        PERFORM queue_count_down(v_waiters, v_finishes, p_at, p_channel);
        EXIT WHEN cardinality(v_cancelled) = 0;
        v_finished := v_cancelled;
        v_status := 'cancelled';
    END LOOP;
END
$$;

-- The finishes of a transaction, in two row triggers whose WHEN (columns
-- of the deleted row, no function call) is false for a job without
-- dependants that was not waiting, as every job of a queue without
-- workflows: those pay nothing. (A statement trigger would be called by
-- every ack, with a transition table copying every deleted row: 3-8% of
-- a drain's rate here. A BEFORE trigger locks every row it is checked
-- for.)
--
-- After a job with dependants is deleted, it is noted in queue.finished,
-- a transaction-local setting (ids, each followed by a comma). At commit
-- (a deferred constraint trigger), the first of those rows' triggers to
-- run reads and clears the note and counts every finish noted; the
-- others find the note empty. So the jobs waiting are released or
-- cancelled in the transaction of the finish, as it commits, and a
-- transaction that acks 50 jobs a join waits for counts it down once, by
-- 50. A waiting job leaving (discarded, cancelled) waits no more, at
-- once. A job with dependants counts once for each job waiting on it:
-- its status and time are its history row's (written with the DELETE; a
-- row deleted by hand without one counts as discarded, now).
--
-- Two finishes of a waiting job's last two dependencies, committing at
-- once, are serialized by the job's job_waiting row: the count-down is
-- one UPDATE (or the DELETE of the row its last finish takes), which
-- reads the row's latest version once it holds the lock, so exactly one
-- of them counts it down to 0 and releases it.
CREATE FUNCTION queue_dependency_noted() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    IF current_setting('queue.finishing_dependencies', true) = 'on' THEN
        RETURN NULL;
    END IF;
    IF OLD.available_at = '9999-12-31 23:59:59.999999+00' THEN
        DELETE FROM job_waiting WHERE job_id = OLD.id;
    END IF;
    IF OLD.has_dependants THEN
        PERFORM set_config('queue.finished',
                           COALESCE(current_setting('queue.finished', true), '') || OLD.id || ',',
                           true);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER job_queue_dependency_finished AFTER DELETE ON job_queue
    FOR EACH ROW
    WHEN (OLD.has_dependants OR OLD.available_at = '9999-12-31 23:59:59.999999+00')
    EXECUTE FUNCTION queue_dependency_noted();

CREATE FUNCTION queue_dependencies_finished() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_noted text;
    v_finished bigint[];
    v_statuses text[];
    v_ats timestamptz[];
    v_completed bigint[];
    v_at timestamptz;
    v_channel text := 'queue_jobs.' || TG_TABLE_SCHEMA;
    i integer;
BEGIN
    v_noted := current_setting('queue.finished', true);
    IF v_noted IS NULL OR v_noted = '' THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('queue.finished', '', true);
    SELECT array_agg(DISTINCT u.id ORDER BY u.id) INTO v_finished
    FROM unnest(string_to_array(rtrim(v_noted, ','), ',')::bigint[]) AS u(id);
    SELECT array_agg(COALESCE(h.status_final, 'discarded') ORDER BY u.id),
           array_agg(COALESCE(h.finished_at, now()) ORDER BY u.id)
    INTO v_statuses, v_ats
    FROM unnest(v_finished) AS u(id) LEFT JOIN job_history h ON h.id = u.id;
    SELECT array_agg(u.id), max(u.at) INTO v_completed, v_at
    FROM unnest(v_finished, v_statuses, v_ats) AS u(id, status, at)
    WHERE u.status = 'completed';
    IF v_completed IS NOT NULL THEN
        PERFORM queue_count_finishes(v_completed, 'completed', v_at, v_channel);
    END IF;
    IF cardinality(v_finished) = COALESCE(cardinality(v_completed), 0) THEN
        RETURN NULL;
    END IF;
    -- Failures: their cancellations delete jobs, counted by the loop in
    -- queue_count_finishes, not by these triggers again.
    PERFORM set_config('queue.finishing_dependencies', 'on', true);
    FOR i IN 1 .. cardinality(v_finished) LOOP
        IF v_statuses[i] <> 'completed' THEN
            PERFORM queue_count_finishes(ARRAY[v_finished[i]], v_statuses[i], v_ats[i],
                                         v_channel);
        END IF;
    END LOOP;
    PERFORM set_config('queue.finishing_dependencies', '', true);
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER job_queue_dependencies_counted AFTER DELETE ON job_queue
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW
    WHEN (OLD.has_dependants)
    EXECUTE FUNCTION queue_dependencies_finished();

-- Releases the waiting jobs p_ids (their job_waiting rows counted to 0
-- and deleted by the caller's transaction, which held their locks; 0022's
-- form deleted them here): each is due at
-- the later of p_at, the finish that released it, and p_run_at, the time
-- it was enqueued for; those due now get their ready ring entries here,
-- in one statement; their queues are woken (the NOTIFY is sent on
-- commit) on p_channel.
CREATE OR REPLACE FUNCTION queue_release_waiting(p_ids bigint[], p_run_at timestamptz[],
                                                 p_at timestamptz, p_channel text) RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_notified bigint;
BEGIN
    PERFORM set_config('queue.releasing', 'on', true);
    WITH released AS (
        UPDATE job_queue j
        SET available_at = greatest(u.run_at, p_at), updated_at = p_at
        FROM unnest(p_ids, p_run_at) AS u(id, run_at)
        WHERE j.id = u.id AND j.lease_until IS NULL
          AND j.available_at = '9999-12-31 23:59:59.999999+00'
        RETURNING j.id, j.queue_name, j.priority, j.available_at, j.updated_at, j.attempts,
                  j.max_attempts
    ),
    ready AS (
        INSERT INTO job_ready (slot, queue_name, priority, available_at, id)
        SELECT (SELECT last_value FROM queue_ready_slot)::smallint,
               r.queue_name, r.priority, r.available_at, r.id
        FROM released r
        WHERE r.available_at <= r.updated_at AND r.attempts < r.max_attempts
    )
    SELECT count(pg_notify(p_channel, q.queue_name)) INTO v_notified
    FROM (SELECT DISTINCT queue_name FROM released) q;
    PERFORM set_config('queue.releasing', '', true);
END
$$;

-- 0012's trigger, passing over a job that queue_release_waiting releases
-- (it writes the entry; queue.releasing is on only during its UPDATE,
-- and read only for a job leaving the waiting instant). Every other way a
-- job leaves it (an enqueue whose dependencies had all finished, plain
-- SQL) still gets its entry here.
DROP TRIGGER job_queue_ready_update ON job_queue;

CREATE TRIGGER job_queue_ready_update AFTER UPDATE ON job_queue
    FOR EACH ROW
    WHEN (NEW.lease_until IS NULL AND NEW.available_at <= NEW.updated_at
          AND NEW.attempts < NEW.max_attempts
          AND (OLD.lease_until IS NOT NULL OR OLD.available_at > OLD.updated_at
               OR OLD.attempts >= OLD.max_attempts
               OR OLD.available_at <> NEW.available_at OR OLD.priority <> NEW.priority
               OR OLD.queue_name <> NEW.queue_name)
          AND (OLD.available_at <> '9999-12-31 23:59:59.999999+00'
               OR current_setting('queue.releasing', true) IS DISTINCT FROM 'on'))
    EXECUTE FUNCTION queue_ready_updated();
