-- Listings and stats at size (issue 40, item 6), as PostgreSQL's
-- migration 0017 and MySQL's 0010 serve them.
--
-- One queue's jobs, newest first: the listing of a queue (and of its
-- pending jobs) reads this index's range of the queue from its end, in
-- place of every newer job of the other queues; stats and the listings
-- of every queue walk the queues' names here, one probe each. Each entry
-- ends with the row's id (its rowid), so the range is in id order;
-- naming id as a column would store it twice (18% more pages).
CREATE INDEX job_queue_queue ON job_queue (queue_name);

-- Exhausted jobs (out of attempts, awaiting reclaim): normally none, so
-- their listing and their count read nothing. The claim's UPDATE only
-- evaluates the condition.
CREATE INDEX job_queue_exhausted ON job_queue (queue_name, id)
    WHERE lease_until IS NULL AND attempts >= max_attempts;
