-- Flow control, snooze, cancel and periodic fires (issue 15), for SQLite.
-- The same columns as migration 0004 of PostgreSQL and MySQL: SQLite's
-- migrations were folded into one file when the backend was added, so its
-- versions count on their own (check_sequence wants them contiguous).

-- Per-queue limits beside the paused flag; NULL is "not set".
-- tokens / refilled_at: a rate-limited queue's token bucket (NULL: full).
ALTER TABLE queue_config ADD COLUMN concurrency_limit INTEGER CHECK (concurrency_limit > 0);
ALTER TABLE queue_config ADD COLUMN rate_per_second   REAL    CHECK (rate_per_second > 0);
ALTER TABLE queue_config ADD COLUMN rate_burst        INTEGER CHECK (rate_burst > 0);
ALTER TABLE queue_config ADD COLUMN tokens            REAL;
ALTER TABLE queue_config ADD COLUMN refilled_at       INTEGER;
ALTER TABLE queue_config ADD COLUMN lease_ms          INTEGER;
ALTER TABLE queue_config ADD COLUMN backoff_base_ms   INTEGER;
ALTER TABLE queue_config ADD COLUMN backoff_min_ms    INTEGER;
ALTER TABLE queue_config ADD COLUMN backoff_max_ms    INTEGER;
ALTER TABLE queue_config ADD COLUMN backoff_jitter    REAL;

-- Times a handler snoozed the job (its claim given back uncounted).
ALTER TABLE job_queue ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0;

-- job_history gains snoozes, and status_final accepts 'cancelled': SQLite
-- cannot change a column's CHECK, so the table is rebuilt (inside the
-- migration's transaction) and its indexes recreated.
CREATE TABLE job_history_0002 (
    id            INTEGER PRIMARY KEY,
    queue_name    TEXT    NOT NULL,
    priority      INTEGER NOT NULL,
    unique_key    TEXT,
    payload       TEXT    NOT NULL,
    status_final  TEXT    NOT NULL
        CHECK (status_final IN ('completed', 'dead_letter', 'discarded', 'cancelled')),
    result        TEXT,
    last_error    TEXT,
    attempts      INTEGER NOT NULL,
    max_attempts  INTEGER NOT NULL,
    processed_by  TEXT,
    created_at    INTEGER NOT NULL,
    started_at    INTEGER,
    finished_at   INTEGER NOT NULL,
    snoozes       INTEGER NOT NULL DEFAULT 0
);
INSERT INTO job_history_0002 (id, queue_name, priority, unique_key, payload, status_final,
    result, last_error, attempts, max_attempts, processed_by, created_at, started_at, finished_at)
SELECT id, queue_name, priority, unique_key, payload, status_final, result, last_error, attempts,
       max_attempts, processed_by, created_at, started_at, finished_at
FROM job_history;
DROP TABLE job_history;
ALTER TABLE job_history_0002 RENAME TO job_history;
CREATE INDEX job_history_queue_status ON job_history (queue_name, status_final, id);
CREATE INDEX job_history_status ON job_history (status_final, id);
CREATE INDEX job_history_finished_at ON job_history (finished_at);

-- Periodic schedules: each one's latest recorded fire (the fire time is
-- what makes a fire enqueue once across processes) and its next fire.
CREATE TABLE queue_schedule (
    schedule_name TEXT    PRIMARY KEY CHECK (length(CAST(schedule_name AS BLOB)) BETWEEN 1 AND 191),
    last_fire_at  INTEGER NOT NULL,
    next_fire_at  INTEGER
);
