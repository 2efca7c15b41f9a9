-- job_queue_dequeue goes: every unleased job was an entry in it and, when
-- due when written, an entry in the ready ring too (migration 0010), so
-- each enqueue wrote two index entries in claim order where one serves.
-- Claims and next_due read the ring and job_queue_scheduled since 0010;
-- stats counts from them since this migration (queue-postgres/src/sql.rs,
-- STATS), so the ring must now hold exactly one entry per job in it:
--
-- - in the ring: unleased, due when written (available_at <= updated_at),
--   and not exhausted (attempts < max_attempts: an exhausted job is not
--   claimable, and stats counts it apart);
-- - a job enters the ring when it is written in that state (insert) or an
--   UPDATE brings it there or changes its key (queue, priority,
--   available_at): an entry is written;
-- - it leaves when leased (the claim's queue_lease deletes the entry,
--   from the slot its pick read it in: migration 0011), deleted while in
--   the ring (a discard, a cancel: the new row trigger below), or updated
--   out of that state or to another key without a lease (the other new
--   trigger below).
--
-- What still leaves an entry behind: a lease written by hand (plain SQL,
-- docs/sql-interop.md) and any write to job_ready. Claims skip such an
-- entry (they check every entry against its job), the rotation drops it,
-- and until then stats counts its job as pending too.
--
-- Plain-SQL claims written against job_queue_dequeue still run, reading
-- job_queue by another path: docs/sql-interop.md says what to call
-- instead.
DROP INDEX job_queue_dequeue;

-- Exhausted jobs stay out of the ring.
CREATE OR REPLACE FUNCTION queue_ready_inserted() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    INSERT INTO job_ready (slot, queue_name, priority, available_at, id)
    SELECT (SELECT last_value FROM queue_ready_slot)::smallint,
           n.queue_name, n.priority, n.available_at, n.id
    FROM inserted_jobs n
    WHERE n.lease_until IS NULL AND n.available_at <= n.updated_at
      AND n.attempts < n.max_attempts;
    RETURN NULL;
END
$$;

DROP TRIGGER job_queue_ready_update ON job_queue;

CREATE TRIGGER job_queue_ready_update AFTER UPDATE ON job_queue
    FOR EACH ROW
    WHEN (NEW.lease_until IS NULL AND NEW.available_at <= NEW.updated_at
          AND NEW.attempts < NEW.max_attempts
          AND (OLD.lease_until IS NOT NULL OR OLD.available_at > OLD.updated_at
               OR OLD.attempts >= OLD.max_attempts
               OR OLD.available_at <> NEW.available_at OR OLD.priority <> NEW.priority
               OR OLD.queue_name <> NEW.queue_name))
    EXECUTE FUNCTION queue_ready_updated();

-- The entry of a job that leaves the ring other than by a lease: OLD's
-- key, from whichever slot holds it.
CREATE FUNCTION queue_ready_left() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET enable_seqscan = off
SET enable_bitmapscan = off
AS $$
BEGIN
    DELETE FROM job_ready r
    WHERE r.queue_name = OLD.queue_name AND r.priority = OLD.priority
      AND r.available_at = OLD.available_at AND r.id = OLD.id;
    RETURN NULL;
END
$$;

-- Updated out of the ring, or to another key, without a lease. (A lease
-- leaves the entry to queue_lease, which deletes it in one statement per
-- claim; the WHEN clause, evaluated without a function call, is false for
-- claims, heartbeats and acks.)
CREATE TRIGGER job_queue_ready_leave AFTER UPDATE ON job_queue
    FOR EACH ROW
    WHEN (OLD.lease_until IS NULL AND OLD.available_at <= OLD.updated_at
          AND OLD.attempts < OLD.max_attempts
          AND NEW.lease_until IS NULL
          AND (NEW.available_at > NEW.updated_at OR NEW.attempts >= NEW.max_attempts
               OR OLD.available_at <> NEW.available_at OR OLD.priority <> NEW.priority
               OR OLD.queue_name <> NEW.queue_name))
    EXECUTE FUNCTION queue_ready_left();

-- Deleted while in the ring (a discard, a cancel). Acks delete leased
-- rows: the WHEN clause is false for them.
CREATE TRIGGER job_queue_ready_delete AFTER DELETE ON job_queue
    FOR EACH ROW
    WHEN (OLD.lease_until IS NULL AND OLD.available_at <= OLD.updated_at
          AND OLD.attempts < OLD.max_attempts)
    EXECUTE FUNCTION queue_ready_left();

-- Entries of exhausted jobs, which 0010's triggers wrote: gone.
DELETE FROM job_ready r USING job_queue j
WHERE j.id = r.id AND j.attempts >= j.max_attempts;

-- And every entry that is stale now (written before this migration by a
-- claim that passed no slots, or left by plain SQL), then the second of
-- any two entries of one job: from here on, one entry per job in the ring.
DELETE FROM job_ready r
WHERE NOT EXISTS (
    SELECT 1 FROM job_queue j
    WHERE j.id = r.id AND j.locked_by IS NULL
      AND j.queue_name = r.queue_name AND j.priority = r.priority
      AND j.available_at = r.available_at);
DELETE FROM job_ready r USING job_ready d
WHERE d.id = r.id AND (d.slot < r.slot OR (d.slot = r.slot AND d.ctid < r.ctid));
