-- job_queue_dequeue goes: every unleased job was an entry in it and, when
-- due when written, an entry in the ready ring too (migration 0010), so
-- each enqueue wrote two index entries in claim order where one serves.
-- Nothing of the queue reads it any more: claims and next_due read the
-- ring and job_queue_scheduled since 0010, and stats counts from them
-- since this migration (queue-postgres/src/sql.rs, STATS). Plain-SQL
-- claims written against it (docs/sql-interop.md) still run, reading
-- job_queue by another path: docs/sql-interop.md says what to call
-- instead.
DROP INDEX job_queue_dequeue;
