-- The ring rotates when its current slot has taken entries enough to be
-- worth a TRUNCATE, not on a clock alone (docs/operations.md, "A claim
-- that does not wait for VACUUM").
--
-- Each TRUNCATE of a slot invalidates every cached plan that reads the
-- ring, in every session: the claim's pick and lease are planned again
-- on their next call, and a claim arriving while the rotation waits for
-- the slot's lock queues behind it. Four rotations a second cost an
-- idle-ish queue its start latency (claim p99 2.2-2.7 ms before the ring,
-- 5.8-6.8 ms with it, at 200 jobs/s) for nothing: a slot that took a few
-- dozen entries holds few to step over. queue_ready_rotate now takes the
-- period after which a slot may rotate (p_period_ms, as before), the
-- period after which it rotates whatever it holds (p_idle_period_ms), and
-- the size its current slot must reach in between (p_min_bytes, of its
-- heap); a slot that is still empty becomes current without a TRUNCATE.
-- The rest is migration 0010's.

DROP FUNCTION queue_ready_rotate(bigint, bigint, bigint);

CREATE FUNCTION queue_ready_rotate(p_period_ms bigint, p_idle_period_ms bigint, p_min_bytes bigint,
                                   p_wait_ms bigint, p_keep bigint)
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
    -- A current slot that has taken few entries waits for the idle period.
    IF v_now_ms - (SELECT last_value FROM queue_ready_rotated_at) < p_idle_period_ms
       AND pg_relation_size(format('job_ready_%s', (SELECT last_value FROM queue_ready_slot)))
           < p_min_bytes THEN
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
        -- A slot nothing was written to since its TRUNCATE needs none: it
        -- becomes current as it is.
        IF pg_relation_size(v_slot) = 0 THEN
            PERFORM setval('queue_ready_slot', v_next);
            PERFORM setval('queue_ready_rotated_at', v_now_ms);
            RETURN true;
        END IF;
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
