-- The worker registry (issue 40): one row per running worker, written by
-- register_worker (at start and as its heartbeat, which moves last_seen),
-- deleted by deregister_worker at a clean exit, or by list_workers once
-- last_seen is older than the listing's forget_after. The queues it
-- consumes are the JSON text queue_core::WorkerInfo::queues_json writes.
CREATE TABLE queue_worker (
    worker_id  TEXT        PRIMARY KEY,
    host       TEXT        NOT NULL,
    pid        BIGINT      NOT NULL,
    version    TEXT        NOT NULL,
    queues     TEXT        NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    last_seen  TIMESTAMPTZ NOT NULL,
    CONSTRAINT queue_worker_id_length CHECK (octet_length(worker_id) BETWEEN 1 AND 191)
);
