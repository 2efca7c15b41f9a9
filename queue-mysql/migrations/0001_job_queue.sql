-- Live jobs, finished-job history, and per-queue settings, for MySQL 8.0+
-- and MariaDB 10.6+. Only SQL both accept.
--
-- Times are DATETIME(6) holding UTC: unlike TIMESTAMP they do not end in
-- 2038 and do not follow the session time zone. There are no time defaults
-- (CURRENT_TIMESTAMP would follow the session time zone); the backend always
-- writes UTC_TIMESTAMP(6) or a bound UTC value.
--
-- utf8mb4_bin compares names byte for byte, as PostgreSQL does. It ignores
-- trailing spaces, which is why queue-core rejects names that end in one.
--
-- JSON is a native type on MySQL and an alias of LONGTEXT with a json_valid
-- check on MariaDB; MariaDB keeps the text as written, MySQL normalises it.
--
-- MySQL commits each DDL statement on its own, so a migration cannot be
-- rolled back half-way; every statement here is safe to run again
-- (IF NOT EXISTS), and a failed migration is completed by rerunning it.

CREATE TABLE IF NOT EXISTS job_queue (
    id              BIGINT       NOT NULL AUTO_INCREMENT,
    queue_name      VARCHAR(191) NOT NULL,
    priority        INT          NOT NULL DEFAULT 0,
    unique_key      VARCHAR(191) NULL,
    payload         JSON         NOT NULL,
    attempts        INT          NOT NULL DEFAULT 0,
    max_attempts    INT          NOT NULL,
    available_at    DATETIME(6)  NOT NULL,
    lease_until     DATETIME(6)  NULL,
    locked_by       VARCHAR(191) NULL,
    first_locked_at DATETIME(6)  NULL,
    last_error      JSON         NULL,
    created_at      DATETIME(6)  NOT NULL,
    updated_at      DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    -- Idempotent enqueue; NULL keys never conflict.
    UNIQUE KEY job_queue_unique_key (queue_name, unique_key),
    -- Serves the claim's ORDER BY priority DESC, available_at, id as a range
    -- scan. No partial indexes on MySQL, so leased rows stay in it. MySQL 8
    -- and MariaDB 10.8+ store DESC; MariaDB 10.6/10.7 parse and ignore it
    -- and then sort the mixed-direction order.
    KEY job_queue_dequeue (queue_name, priority DESC, available_at, id),
    KEY job_queue_lease_until (lease_until),
    CONSTRAINT job_queue_attempts_range CHECK (attempts >= 0 AND max_attempts >= 1)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS job_history (
    id            BIGINT       NOT NULL,
    queue_name    VARCHAR(191) NOT NULL,
    priority      INT          NOT NULL,
    unique_key    VARCHAR(191) NULL,
    payload       JSON         NOT NULL,
    status_final  VARCHAR(16)  NOT NULL,
    result        JSON         NULL,
    last_error    JSON         NULL,
    attempts      INT          NOT NULL,
    max_attempts  INT          NOT NULL,
    processed_by  VARCHAR(191) NULL,
    created_at    DATETIME(6)  NOT NULL,
    started_at    DATETIME(6)  NULL,
    finished_at   DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    KEY job_history_queue_status (queue_name, status_final, id),
    KEY job_history_status (status_final, id),
    KEY job_history_finished_at (finished_at),
    CONSTRAINT job_history_status_final CHECK (status_final IN ('completed', 'dead_letter', 'discarded'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS queue_config (
    queue_name VARCHAR(191) NOT NULL,
    paused     BOOLEAN      NOT NULL DEFAULT FALSE,
    updated_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (queue_name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
