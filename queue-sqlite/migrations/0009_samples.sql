-- Samples for the operator's charts (issue 40), as PostgreSQL's migration
-- 0019 and MySQL's 0012 keep them: what workers observed per queue and
-- UTC minute (microseconds since the epoch, as every time here).
-- job_sample_lag holds how many jobs started after waiting how long (one
-- row per lag bucket, queue_core::lag_bucket; writers add to jobs);
-- job_sample_depth the queue's depth at one moment of the minute (the
-- last writer's). Rows older than 7 days are deleted as new ones are
-- recorded. The minute leads both keys: the window's reads and the prune
-- are ranges of it.
CREATE TABLE job_sample_lag (
    minute     INTEGER NOT NULL,
    queue_name TEXT    NOT NULL,
    bucket     INTEGER NOT NULL,
    jobs       INTEGER NOT NULL,
    PRIMARY KEY (minute, queue_name, bucket)
) WITHOUT ROWID;

CREATE TABLE job_sample_depth (
    minute     INTEGER NOT NULL,
    queue_name TEXT    NOT NULL,
    pending    INTEGER NOT NULL,
    scheduled  INTEGER NOT NULL,
    running    INTEGER NOT NULL,
    PRIMARY KEY (minute, queue_name)
) WITHOUT ROWID;
