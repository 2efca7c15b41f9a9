-- Samples for the operator's charts (issue 40): what workers observed per
-- queue and UTC minute, written by record_samples and read by samples.
-- job_sample_lag holds how many jobs started after waiting how long (one
-- row per lag bucket, queue_core::lag_bucket; writers add to jobs);
-- job_sample_depth the queue's depth at one moment of the minute (the last
-- writer's). Rows older than 7 days are deleted as new ones are recorded.
-- The minute leads both keys: the window's reads and the prune are ranges
-- of it.
CREATE TABLE job_sample_lag (
    minute     TIMESTAMPTZ NOT NULL,
    queue_name TEXT        NOT NULL,
    bucket     SMALLINT    NOT NULL,
    jobs       BIGINT      NOT NULL,
    PRIMARY KEY (minute, queue_name, bucket)
);

CREATE TABLE job_sample_depth (
    minute     TIMESTAMPTZ NOT NULL,
    queue_name TEXT        NOT NULL,
    pending    BIGINT      NOT NULL,
    scheduled  BIGINT      NOT NULL,
    running    BIGINT      NOT NULL,
    PRIMARY KEY (minute, queue_name)
);
