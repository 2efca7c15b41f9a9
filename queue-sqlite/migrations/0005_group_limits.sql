-- Group concurrency (issue 38, item 1): a job's group key, a queue's
-- group concurrency and each group's own limit, enforced by the claim.
--
-- group_key: NULL for a job in no group; 1 to 255 bytes of UTF-8 (checked
-- by queue_core::GroupKey before any write). History keeps it, and a dead
-- letter sent back to the live table takes it along.
ALTER TABLE job_queue ADD COLUMN group_key TEXT
    CHECK (length(CAST(group_key AS BLOB)) BETWEEN 1 AND 255);
ALTER TABLE job_history ADD COLUMN group_key TEXT;

-- The most leased jobs of one group of the queue at once, for every group
-- without a row in queue_group_limit; NULL: not set.
ALTER TABLE queue_config ADD COLUMN group_concurrency_limit INTEGER
    CHECK (group_concurrency_limit > 0);

-- One group's own limit in one queue (Storage::set_group_limit): it
-- replaces the queue's group_concurrency_limit for that group. Written
-- only for a queue that has a queue_config row.
CREATE TABLE queue_group_limit (
    queue_name        TEXT    NOT NULL,
    group_key         TEXT    NOT NULL CHECK (length(CAST(group_key AS BLOB)) BETWEEN 1 AND 255),
    concurrency_limit INTEGER NOT NULL CHECK (concurrency_limit > 0),
    PRIMARY KEY (queue_name, group_key)
);

-- Serves the limited claim's count of the leases each group of a queue
-- holds: only leased rows with a group are in it, so the count never
-- visits waiting jobs.
CREATE INDEX job_queue_group_leased ON job_queue (queue_name, group_key)
    WHERE lease_until IS NOT NULL AND group_key IS NOT NULL;
