-- One index of the leased jobs instead of two.
--
-- job_queue_lease_until (lease_until, id) served reclaim and
-- job_queue_held (queue_name) the limited claim's count of a queue's
-- leases; both hold exactly the leased jobs, so every claim, heartbeat
-- and reclaim (each writes lease_until: never a HOT update) inserted an
-- entry into each. Led by the queue, one index serves all of them:
-- - the held count: the range queue_name = $1 (queue_held_leases,
--   migration 0006, unchanged);
-- - reclaim, oldest lease first: a skip-scan over the queues that hold
--   leases, then per queue the range lease_until <= now in
--   (lease_until, id) order, merged (`RECLAIM` in queue-postgres/src/sql.rs);
-- - stats' running and stalled counts, and listings of running or
--   stalled jobs of one queue.
CREATE INDEX job_queue_leased ON job_queue (queue_name, lease_until, id)
    WHERE lease_until IS NOT NULL;
DROP INDEX job_queue_held;
DROP INDEX job_queue_lease_until;
