-- Priority aging (issue 38, item 3): a queue's aging period, in
-- milliseconds. With it, the claim serves a pending job of the queue as if
-- one priority level higher per whole period waited since available_at
-- (queue_core::backend::aged_priority); the stored priority never changes.
-- NULL: no aging, the plain claim order. 1 s to 30 days, checked by
-- queue_core::QueueLimits::validate before any write.
ALTER TABLE queue_config ADD COLUMN priority_aging_ms INTEGER
    CHECK (priority_aging_ms BETWEEN 1000 AND 2592000000);
