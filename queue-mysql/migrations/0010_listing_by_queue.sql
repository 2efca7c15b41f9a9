-- A listing of one queue's jobs, newest first (list_jobs and the bulk
-- actions with a queue and no rarer filter): the range queue_name = ? of
-- this index, read backwards (InnoDB appends the primary key, id, to every
-- secondary index). Without it the listing read the primary key newest
-- first through every newer job of the other queues (59-94 ms for the
-- first page of a queue older than 150,000 jobs of others). Its only
-- column never changes, so claims, acks' deletes aside, do not write it.
ALTER TABLE job_queue ADD KEY job_queue_queue (queue_name);
