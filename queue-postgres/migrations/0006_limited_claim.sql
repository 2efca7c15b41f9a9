-- The limited claim (issue 15) in one statement instead of a transaction
-- of four: the claim locks the limited queues' config rows, counts their
-- held leases, narrows its caps, claims and stores the buckets, all in one
-- round trip (see `LIMITS` in queue-postgres/src/sql.rs).
--
-- The one part plain SQL cannot do is the count: a READ COMMITTED
-- statement reads one snapshot, taken before it waited for the config
-- row's lock, so it would miss the claims that committed while it waited
-- and overrun the limit. A VOLATILE function takes a fresh snapshot for
-- each query it runs, after the lock is held: this one.
--
-- It counts up to p_cap (the queue's limit: enough for the allowance)
-- through job_queue_held. Bitmap scans are off inside it: a bitmap scan
-- reads every entry of the index, one per job claimed since the last
-- vacuum (4.4 ms per claim after a drain of 50,000 jobs), where an index
-- scan stops at the limit and skips entries it has seen dead. PL/pgSQL
-- keeps the query's plan for the session (a SQL function plans it on
-- every call: 0.2 ms, against 0.04). `PgStorage::explain_held` EXPLAINs
-- the query between `RETURN (` and the last `);` as written here.
CREATE FUNCTION queue_held_leases(p_queue text, p_cap bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET enable_bitmapscan = off
AS $$
BEGIN
    RETURN (SELECT count(*) FROM (SELECT 1 FROM job_queue j
                                  WHERE j.queue_name = $1 AND j.lease_until IS NOT NULL
                                  LIMIT $2) h);
END
$$;

-- The queues of a claim on several queues and their caps: unnest($1, $2),
-- planned as one row. With unnest in the statement itself, the planner's
-- generic plan assumes ten queues, always looks dearer than a custom plan
-- for the two or three a worker names, and the claim was planned again
-- on every call (1 ms of a 2 ms claim); behind a function with a fixed
-- estimate, the generic plan costs what the custom ones do and is kept.
-- PL/pgSQL keeps the query's plan (a SQL function would plan it on every
-- call, and one without settings would be inlined back into unnest).
CREATE FUNCTION queue_claim_queues(p_names text[], p_caps bigint[])
RETURNS TABLE (name text, cap bigint)
LANGUAGE plpgsql VOLATILE ROWS 1
AS $$
BEGIN
    RETURN QUERY SELECT * FROM unnest(p_names, p_caps);
END
$$;
