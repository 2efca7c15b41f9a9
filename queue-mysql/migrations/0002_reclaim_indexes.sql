-- Indexes that keep claims and reclaims off the backlog.
--
-- Reclaim looks for exhausted jobs (unleased, no attempts left) on every
-- maintenance tick. MySQL has no partial indexes, so a stored generated
-- column marks them and a small index serves the search; without it the
-- search read every unleased row. (Stalled jobs are already served by
-- job_queue_lease_until, whose entries end with the primary key: the
-- order (lease_until, id) needs no sort.)
--
-- Written so that rerunning it after a partial failure is harmless on both
-- servers: the column is added only when missing.
SET @queue_has_column = (SELECT COUNT(*) FROM information_schema.columns
    WHERE table_schema = DATABASE() AND table_name = 'job_queue' AND column_name = 'is_exhausted');
SET @queue_ddl = IF(@queue_has_column = 0,
    'ALTER TABLE job_queue ADD COLUMN is_exhausted BOOLEAN GENERATED ALWAYS AS (lease_until IS NULL AND attempts >= max_attempts) STORED, ADD KEY job_queue_exhausted (is_exhausted, id)',
    'DO 0');
PREPARE queue_stmt FROM @queue_ddl;
EXECUTE queue_stmt;
DEALLOCATE PREPARE queue_stmt;

-- The claim's index, with the lease in it. MySQL has no partial index, so
-- with (queue_name, priority DESC, available_at, id) a claim walked past
-- every leased job at the head of its queue, locking each on the way (420
-- row locks for LIMIT 10 with 200 jobs running, measured here). With
-- `lease_until IS NULL` as an equality on the second column, leased jobs
-- are outside the range scanned, and the order still needs no sort.
ALTER TABLE job_queue
    DROP KEY job_queue_dequeue,
    ADD KEY job_queue_dequeue (queue_name, lease_until, priority DESC, available_at, id);
