-- Samples for the operator's charts (issue 40), as PostgreSQL's migration
-- 0019 keeps them: what workers observed per queue and UTC minute.
-- job_sample_lag holds how many jobs started after waiting how long (one
-- row per lag bucket, queue_core::lag_bucket; writers add to jobs);
-- job_sample_depth the queue's depth at one moment of the minute (the
-- last writer's). Rows older than 7 days are deleted after each
-- recording. The minute leads both keys: the window's reads and the prune
-- are ranges of it. SQL shared by MySQL 8.0 and MariaDB 10.6+.
CREATE TABLE IF NOT EXISTS job_sample_lag (
    minute     DATETIME(6)  NOT NULL,
    queue_name VARCHAR(191) NOT NULL,
    bucket     SMALLINT     NOT NULL,
    jobs       BIGINT       NOT NULL,
    PRIMARY KEY (minute, queue_name, bucket)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS job_sample_depth (
    minute     DATETIME(6)  NOT NULL,
    queue_name VARCHAR(191) NOT NULL,
    pending    BIGINT       NOT NULL,
    scheduled  BIGINT       NOT NULL,
    running    BIGINT       NOT NULL,
    PRIMARY KEY (minute, queue_name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
