-- Priority aging (issue 38, item 3): a queue's aging period P, in
-- milliseconds (1 s to 30 days, checked by queue_core::QueueLimits before
-- any write; NULL: no aging). With it, the claim orders the queue's
-- pending jobs by effective priority, priority + floor((now -
-- available_at) / P) saturating at 2147483647, then available_at, then
-- id (queue_core::backend::aged_priority); the stored priority never
-- changes. A nullable column added last: neither server rewrites the
-- table for it.
--
-- A queue with a period is a limited queue (sql::LIMITED_QUEUES): its
-- claims lock its config row and read each priority level's first jobs
-- from the ready ring and the scheduled jobs (queue-mysql/src/dequeue.rs,
-- "aging"). Workers of the previous release keep running beside the new
-- one but claim an aging queue in plain order: set a period once every
-- worker is upgraded.
ALTER TABLE queue_config
    ADD COLUMN priority_aging_ms BIGINT NULL,
    ADD CONSTRAINT queue_config_priority_aging_ms
        CHECK (priority_aging_ms BETWEEN 1000 AND 2592000000);
