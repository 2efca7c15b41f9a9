-- Optional, PostgreSQL: keep jobs without a unique key out of the
-- unique-key index. Not a migration: the storage works with either form,
-- and `keyless_jobs_indexed.sql` goes back. Why and what it costs:
-- docs/operations.md, "Keyless jobs out of the unique-key index".
--
-- The migrated index (0001) is plain, so that the design's own
-- `INSERT ... ON CONFLICT (queue_name, unique_key) DO NOTHING` infers it.
-- It then holds an entry for every job, and every new row version of a
-- keyless job adds one more (an enqueue, a claim, a heartbeat, a retry,
-- a snooze: each writes an indexed column, so none is a HOT update).
-- Partial, it holds the keyed jobs only, which is all uniqueness needs.
-- After this, an application's own upsert must name the predicate, as the
-- storage's statements do:
--     ON CONFLICT (queue_name, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
-- and the bare form fails ("no unique or exclusion constraint matching").
--
-- Run each statement on its own (psql -f does), with search_path set to
-- the queue's schema. CONCURRENTLY: enqueues and claims go on meanwhile,
-- and a unique index on the key exists at every moment. Stopped midway:
-- during the CREATE, it leaves an invalid job_queue_unique_key_partial
-- (drop it, then run the file again); after the DROP, only the RENAME is
-- left to run.
CREATE UNIQUE INDEX CONCURRENTLY job_queue_unique_key_partial ON job_queue (queue_name, unique_key)
    WHERE unique_key IS NOT NULL;
DROP INDEX CONCURRENTLY job_queue_unique_key;
ALTER INDEX job_queue_unique_key_partial RENAME TO job_queue_unique_key;
