-- Live jobs, finished-job history, and per-queue settings, for SQLite.
-- Job state is derived from these columns and the clock, never stored:
-- see docs/state-machine.md.
--
-- Times are INTEGER microseconds since the Unix epoch, UTC. SQLite has no
-- timestamp type: text timestamps compare correctly only while every writer
-- uses one exact format, and REAL seconds lose microseconds. Integers keep
-- the other backends' precision, compare and index exactly, and the default
-- below reads SQLite's own clock (unixepoch('subsec') is in seconds with
-- millisecond digits), so a plain INSERT that omits a time gets "now".

CREATE TABLE job_queue (
    -- AUTOINCREMENT: an id is never reused after its job moves to history
    -- (a plain rowid would hand out the largest id again). Explicit ids are
    -- still accepted, so retrying a dead letter keeps its id.
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    queue_name      TEXT    NOT NULL CHECK (length(CAST(queue_name AS BLOB)) BETWEEN 1 AND 191),
    priority        INTEGER NOT NULL DEFAULT 0,
    unique_key      TEXT             CHECK (length(CAST(unique_key AS BLOB)) BETWEEN 1 AND 191),
    payload         TEXT    NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts    INTEGER NOT NULL DEFAULT 20 CHECK (max_attempts >= 1),
    available_at    INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    lease_until     INTEGER,
    locked_by       TEXT,
    first_locked_at INTEGER,
    last_error      TEXT,
    created_at      INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    updated_at      INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    CHECK ((lease_until IS NULL) = (locked_by IS NULL))
);

-- Idempotent enqueue: NULL keys never conflict.
CREATE UNIQUE INDEX job_queue_unique_key ON job_queue (queue_name, unique_key);

-- Serves the claim: unleased jobs of a queue by priority, then due time, then id.
CREATE INDEX job_queue_dequeue ON job_queue (queue_name, priority DESC, available_at, id)
    WHERE lease_until IS NULL;

-- Serves next_due: the earliest unleased job of a queue.
CREATE INDEX job_queue_next_due ON job_queue (queue_name, available_at)
    WHERE lease_until IS NULL;

-- Serves reclaim of expired leases, oldest first.
CREATE INDEX job_queue_lease_until ON job_queue (lease_until, id)
    WHERE lease_until IS NOT NULL;

CREATE TABLE job_history (
    id            INTEGER PRIMARY KEY,
    queue_name    TEXT    NOT NULL,
    priority      INTEGER NOT NULL,
    unique_key    TEXT,
    payload       TEXT    NOT NULL,
    status_final  TEXT    NOT NULL CHECK (status_final IN ('completed', 'dead_letter', 'discarded')),
    result        TEXT,
    last_error    TEXT,
    attempts      INTEGER NOT NULL,
    max_attempts  INTEGER NOT NULL,
    processed_by  TEXT,
    created_at    INTEGER NOT NULL,
    started_at    INTEGER,
    finished_at   INTEGER NOT NULL
);

-- Listing newest first, by queue and/or status, keyset-paged on id.
CREATE INDEX job_history_queue_status ON job_history (queue_name, status_final, id);
CREATE INDEX job_history_status ON job_history (status_final, id);
-- Pruning by age.
CREATE INDEX job_history_finished_at ON job_history (finished_at);

CREATE TABLE queue_config (
    queue_name TEXT    PRIMARY KEY CHECK (length(CAST(queue_name AS BLOB)) BETWEEN 1 AND 191),
    paused     INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER))
);
