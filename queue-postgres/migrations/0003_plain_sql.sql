-- Defaults for every column a hand-written statement may leave out, so that
-- the statements of the design document (shared/seeds 000, section 2) and an
-- application's own INSERT run against these tables as written. See
-- docs/sql-interop.md for which columns an application may write.
--
-- job_queue already defaults priority, attempts, available_at, created_at
-- and updated_at (all times from the database clock, now()).
ALTER TABLE job_queue ALTER COLUMN max_attempts SET DEFAULT 20;

-- The design's archive statement records neither max_attempts nor
-- last_error. 0 in max_attempts means "not recorded" (our own archive
-- always writes the live row's value, at least 1).
ALTER TABLE job_history ALTER COLUMN max_attempts SET DEFAULT 0;
ALTER TABLE job_history ALTER COLUMN priority SET DEFAULT 0;
ALTER TABLE job_history ALTER COLUMN attempts SET DEFAULT 0;
ALTER TABLE job_history ALTER COLUMN created_at SET DEFAULT now();
ALTER TABLE job_history ALTER COLUMN finished_at SET DEFAULT now();
