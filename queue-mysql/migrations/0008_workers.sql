-- The worker registry (issue 40), as PostgreSQL's migration 0015 keeps
-- it: one row per running worker, written by register_worker (at start
-- and as its heartbeat, which moves last_seen), deleted by
-- deregister_worker at a clean exit, or by list_workers once last_seen is
-- older than the listing's forget_after. The queues are the JSON text
-- queue_core::WorkerInfo::queues_json writes. SQL shared by MySQL 8.0.19+
-- and MariaDB 10.6+.
CREATE TABLE IF NOT EXISTS queue_worker (
    worker_id  VARCHAR(191) NOT NULL,
    host       VARCHAR(191) NOT NULL,
    pid        BIGINT       NOT NULL,
    version    VARCHAR(191) NOT NULL,
    queues     MEDIUMTEXT   NOT NULL,
    started_at DATETIME(6)  NOT NULL,
    last_seen  DATETIME(6)  NOT NULL,
    PRIMARY KEY (worker_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
