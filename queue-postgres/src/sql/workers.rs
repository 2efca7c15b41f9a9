//! The statements of the worker registry: `register_worker`,
//! `deregister_worker`, `list_workers`.

/// Inserts worker $2 or replaces every column of its row; `last_seen` is
/// now either way (the heartbeat).
pub(super) const REGISTER_WORKER: &str = "
INSERT INTO {s}.queue_worker (worker_id, host, pid, version, queues, started_at, last_seen)
VALUES ($2, $3, $4, $5, $6, $7, COALESCE($1::timestamptz, now()))
ON CONFLICT (worker_id) DO UPDATE
SET host = EXCLUDED.host, pid = EXCLUDED.pid, version = EXCLUDED.version,
    queues = EXCLUDED.queues, started_at = EXCLUDED.started_at, last_seen = EXCLUDED.last_seen";

/// Deletes worker $1's row.
pub(super) const DEREGISTER_WORKER: &str = "DELETE FROM {s}.queue_worker WHERE worker_id = $1";

/// Deletes the workers last seen $2 microseconds or more before now and
/// lists the others by id, each with the now it was judged at. The
/// listing reads the snapshot before the delete, hence its own filter.
pub(super) const LIST_WORKERS: &str = "
WITH clock AS (SELECT COALESCE($1::timestamptz, now()) AS now),
forgotten AS (
    DELETE FROM {s}.queue_worker w USING clock c
    WHERE w.last_seen <= c.now - $2 * interval '1 microsecond'
)
SELECT w.worker_id, w.host, w.pid, w.version, w.queues, w.started_at, w.last_seen, c.now
FROM {s}.queue_worker w, clock c
WHERE w.last_seen > c.now - $2 * interval '1 microsecond'
ORDER BY w.worker_id";
