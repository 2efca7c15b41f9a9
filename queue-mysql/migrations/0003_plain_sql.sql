-- Defaults for every column a hand-written statement may leave out, so that
-- the statements of the design document (shared/seeds 000, section 2) and an
-- application's own INSERT run against these tables as written. See
-- docs/sql-interop.md for which columns an application may write.
--
-- Times default to UTC_TIMESTAMP(6), never CURRENT_TIMESTAMP (which follows
-- the session time zone): the project keeps DATETIME(6) in UTC. Expression
-- defaults need MySQL 8.0.13+ or MariaDB 10.2+.
--
-- Each statement only sets defaults, so rerunning after a partial failure
-- is harmless.
ALTER TABLE job_queue
    ALTER COLUMN max_attempts SET DEFAULT 20,
    MODIFY available_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    MODIFY created_at   DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    MODIFY updated_at   DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6));

-- The design's archive statement records neither max_attempts nor
-- last_error. 0 in max_attempts means "not recorded" (our own archive
-- always writes the live row's value, at least 1).
ALTER TABLE job_history
    ALTER COLUMN max_attempts SET DEFAULT 0,
    ALTER COLUMN priority SET DEFAULT 0,
    ALTER COLUMN attempts SET DEFAULT 0,
    MODIFY created_at  DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    MODIFY finished_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6));

ALTER TABLE queue_config
    MODIFY updated_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6));
