-- Optional, PostgreSQL: undoes `keyless_jobs_unindexed.sql`, giving back
-- the plain unique-key index of migration 0001 (an application's bare
-- `ON CONFLICT (queue_name, unique_key)` infers it again). Run as that
-- file says (each statement on its own, search_path set to the schema; if
-- stopped midway, as there, with job_queue_unique_key_plain).
CREATE UNIQUE INDEX CONCURRENTLY job_queue_unique_key_plain ON job_queue (queue_name, unique_key);
DROP INDEX CONCURRENTLY job_queue_unique_key;
ALTER INDEX job_queue_unique_key_plain RENAME TO job_queue_unique_key;
