-- The worker registry (issue 40), as PostgreSQL's migration 0015 and
-- MySQL's 0008 keep it: one row per running worker, written by
-- register_worker (at start and as its heartbeat, which moves last_seen),
-- deleted by deregister_worker at a clean exit, or by list_workers once
-- last_seen is older than the listing's forget_after. Times are
-- microseconds since the epoch, as in every other table here; the queues
-- are the JSON text queue_core::WorkerInfo::queues_json writes.
CREATE TABLE queue_worker (
    worker_id  TEXT    PRIMARY KEY
               CHECK (length(CAST(worker_id AS BLOB)) BETWEEN 1 AND 191),
    host       TEXT    NOT NULL,
    pid        INTEGER NOT NULL,
    version    TEXT    NOT NULL,
    queues     TEXT    NOT NULL,
    started_at INTEGER NOT NULL,
    last_seen  INTEGER NOT NULL
);
