-- Reclaim looks for two kinds of jobs on every maintenance tick; both must
-- be index range scans, whatever the size of the pending backlog.

-- Exhausted jobs (unleased, no attempts left): normally none, so this
-- partial index stays empty; without it the search read every unleased row.
CREATE INDEX job_queue_exhausted ON job_queue (id)
    WHERE lease_until IS NULL AND attempts >= max_attempts;

-- Stalled jobs, oldest lease first: (lease_until, id) is the reclaim order,
-- so no sort is needed.
DROP INDEX job_queue_lease_until;
CREATE INDEX job_queue_lease_until ON job_queue (lease_until, id)
    WHERE lease_until IS NOT NULL;
