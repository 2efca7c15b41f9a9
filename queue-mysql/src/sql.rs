//! The fixed statements of `MySqlStorage`, in SQL that MySQL 8.0 and
//! MariaDB 10.6+ both accept. Statements whose IN lists depend on the input
//! are assembled next to the code that runs them.
//!
//! Dialect notes that shaped them:
//! - no RETURNING (MySQL has none; MariaDB only on INSERT/DELETE): changed
//!   rows are selected `FOR UPDATE` first, in the same transaction;
//! - now is `COALESCE(?, UTC_TIMESTAMP(6))` (or a value read that way once
//!   per transaction): the bound manual clock, or
//!   the server's UTC time at microsecond precision, never the session time
//!   zone and never a second-precision `CURRENT_TIMESTAMP`;
//! - in a single-table UPDATE both servers assign left to right, so an
//!   assignment that reads a column comes before the one that clears it.

/// `SELECT {now}`.
pub(crate) const SELECT_NOW: &str = "SELECT COALESCE(?, UTC_TIMESTAMP(6)) AS now_ts";

/// One step of `next_due`'s skip-scan over the distinct priorities of a
/// queue's unleased jobs: the next priority below a bound, and the earliest
/// future `available_at` at the previous step's priority. The dequeue index
/// leads with (queue_name, lease_until, priority), so a plain
/// MIN(available_at) would read every waiting row; these are two index
/// probes. Shaped by the servers' optimizers: a recursive CTE doing the same
/// cannot range-scan on a correlated priority (MariaDB read the whole queue
/// that way), and MAX(priority) is not optimised on a descending index, so
/// the bounds are bound values and the probes `ORDER BY ... LIMIT 1`.
/// Parameters: queue, bound, now, queue, previous priority (NULL at
/// first), now (now as `COALESCE(?, UTC_TIMESTAMP(6))`).
pub(crate) const NEXT_DUE_STEP: &str = "
SELECT
    (SELECT j.priority FROM job_queue j
      WHERE j.queue_name = ? AND j.lease_until IS NULL AND j.priority < ?
      ORDER BY j.priority DESC LIMIT 1) AS next_priority,
    TIMESTAMPDIFF(MICROSECOND, COALESCE(?, UTC_TIMESTAMP(6)),
        (SELECT j.available_at FROM job_queue j
          WHERE j.queue_name = ? AND j.lease_until IS NULL AND j.priority = ?
            AND j.available_at > COALESCE(?, UTC_TIMESTAMP(6))
          ORDER BY j.available_at LIMIT 1)) AS due_in_us";

/// The history columns filled by archiving statements.
pub(crate) const HISTORY_COLUMNS: &str = "id, queue_name, priority, unique_key, payload, \
     status_final, result, last_error, attempts, max_attempts, processed_by, created_at, \
     started_at, finished_at";

/// The highest priority below a bound among the unleased jobs of a queue:
/// one step of the claim's walk over priority levels, one probe of
/// `job_queue_dequeue` however many jobs share a priority. The first step
/// binds a bound above every `INT`. Binds: queue, bound.
pub(crate) const CLAIM_LEVEL: &str = "
SELECT priority FROM job_queue
WHERE queue_name = ? AND lease_until IS NULL AND priority < ?
ORDER BY priority DESC
LIMIT 1";

/// Claimable jobs of one queue at one priority, in dequeue order: a range
/// scan of `job_queue_dequeue` on (queue_name, lease_until IS NULL,
/// priority, available_at <= now), which ends at the first job not due yet
/// and locks only the rows it returns. (Scanning the whole queue in claim
/// order with `available_at <= now` as a filter walked, and on MariaDB
/// stepped through, every job not yet due whenever fewer than the limit
/// were due: 1.9 s with a million jobs scheduled ahead.) The priority is a
/// bound value, not a correlated one: the servers range-scan only on that.
/// It reads whole rows and the statement's "now", so the claim needs no
/// separate clock read and no read-back after its UPDATE (no RETURNING on
/// MySQL): the claimed values are computed from these. Binds: now, queue,
/// priority, now, queue, limit.
pub(crate) const PICK: &str = "
SELECT id, queue_name, priority, unique_key,
       CAST(payload AS CHAR) AS payload, attempts, max_attempts, available_at, lease_until,
       locked_by, first_locked_at, CAST(last_error AS CHAR) AS last_error, created_at, updated_at,
       COALESCE(?, UTC_TIMESTAMP(6)) AS now_ts
FROM job_queue
WHERE queue_name = ?
  AND lease_until IS NULL
  AND priority = ?
  AND available_at <= COALESCE(?, UTC_TIMESTAMP(6))
  AND attempts < max_attempts
  AND NOT EXISTS (SELECT 1 FROM queue_config p WHERE p.queue_name = ? AND p.paused)
ORDER BY available_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED";

/// Releases a current lease without counting its attempt.
/// Binds: now, now, id, worker, attempt.
pub(crate) const RELEASE: &str = "
UPDATE job_queue
SET lease_until = NULL, locked_by = NULL, attempts = attempts - 1,
    available_at = COALESCE(?, UTC_TIMESTAMP(6)), updated_at = COALESCE(?, UTC_TIMESTAMP(6))
WHERE id = ? AND locked_by = ? AND attempts = ? AND lease_until IS NOT NULL";

/// Stalled jobs, oldest lease first. Binds: now, limit.
pub(crate) const PICK_STALLED: &str = "
SELECT id, locked_by, attempts, max_attempts FROM job_queue
WHERE lease_until <= ?
ORDER BY lease_until, id
LIMIT ?
FOR UPDATE SKIP LOCKED";

/// Exhausted jobs, by id, through the index on the generated column.
/// Binds: limit.
pub(crate) const PICK_EXHAUSTED: &str = "
SELECT id, locked_by, attempts, max_attempts FROM job_queue
WHERE is_exhausted = 1
ORDER BY id
LIMIT ?
FOR UPDATE SKIP LOCKED";

/// Deletes up to a limit of history rows older than the retention.
/// Binds: now, retention µs, status, status, limit.
pub(crate) const PRUNE: &str = "
DELETE FROM job_history
WHERE finished_at < DATE_SUB(COALESCE(?, UTC_TIMESTAMP(6)), INTERVAL ? MICROSECOND)
  AND (? IS NULL OR status_final = ?)
ORDER BY finished_at, id
LIMIT ?";

/// Per-queue counts by derived state, paused queues included, one pass.
/// Binds: now, now.
pub(crate) const STATS: &str = "
SELECT t.queue_name,
       CAST(MAX(t.paused) AS SIGNED) AS paused,
       CAST(SUM(t.pending) AS SIGNED) AS pending,
       CAST(SUM(t.scheduled) AS SIGNED) AS scheduled,
       CAST(SUM(t.running) AS SIGNED) AS running,
       CAST(SUM(t.stalled) AS SIGNED) AS stalled,
       CAST(SUM(t.exhausted) AS SIGNED) AS exhausted,
       MIN(t.pending_since) AS oldest_pending,
       MAX(t.now_ts) AS now_ts
FROM (
    SELECT j.queue_name, 0 AS paused,
           (j.lease_until IS NULL AND j.attempts < j.max_attempts AND j.available_at <= n.now_ts) AS pending,
           (j.lease_until IS NULL AND j.attempts < j.max_attempts AND j.available_at > n.now_ts) AS scheduled,
           COALESCE(j.lease_until > n.now_ts, FALSE) AS running,
           COALESCE(j.lease_until <= n.now_ts, FALSE) AS stalled,
           (j.lease_until IS NULL AND j.attempts >= j.max_attempts) AS exhausted,
           CASE WHEN j.lease_until IS NULL AND j.attempts < j.max_attempts AND j.available_at <= n.now_ts
                THEN j.available_at END AS pending_since,
           n.now_ts
    FROM job_queue j CROSS JOIN (SELECT COALESCE(?, UTC_TIMESTAMP(6)) AS now_ts) n
    UNION ALL
    SELECT c.queue_name, 1, 0, 0, 0, 0, 0, NULL, n.now_ts
    FROM queue_config c CROSS JOIN (SELECT COALESCE(?, UTC_TIMESTAMP(6)) AS now_ts) n
    WHERE c.paused
) t
GROUP BY t.queue_name";

/// Pauses a queue. Binds: queue, now, now.
pub(crate) const PAUSE: &str = "
INSERT INTO queue_config (queue_name, paused, updated_at)
VALUES (?, TRUE, COALESCE(?, UTC_TIMESTAMP(6)))
ON DUPLICATE KEY UPDATE paused = TRUE, updated_at = COALESCE(?, UTC_TIMESTAMP(6))";

/// Resumes a queue. Binds: now, queue.
pub(crate) const RESUME: &str = "
UPDATE queue_config SET paused = FALSE, updated_at = COALESCE(?, UTC_TIMESTAMP(6))
WHERE queue_name = ?";
