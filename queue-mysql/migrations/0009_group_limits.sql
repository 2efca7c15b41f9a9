-- Group concurrency (issue 38, item 1): a job's group key, a queue's
-- group concurrency and each group's own limit, enforced by the limited
-- claim (queue-mysql/src/flow.rs). SQL shared by MySQL 8.0.19+ and
-- MariaDB 10.6+.
--
-- group_key: NULL for a job in no group; 1 to 255 bytes of UTF-8
-- (checked by queue_core::GroupKey before any write), compared byte by
-- byte as the table's other names are. Nullable columns added last:
-- neither server rewrites the table for them. History keeps the key, and
-- a dead letter sent back to the live table takes it along.
ALTER TABLE job_queue ADD COLUMN group_key VARCHAR(255) NULL;
ALTER TABLE job_history ADD COLUMN group_key VARCHAR(255) NULL;

-- Serves the grouped claim's count of the leases each group of a queue
-- holds: the range queue_name = ? of the rows with a group, then leased.
ALTER TABLE job_queue ADD KEY job_queue_group_leased (queue_name, group_key, lease_until);

-- The most leased jobs of one group of the queue at once, for every group
-- without a row in queue_group_limit; NULL: not set. claim_seq: on a
-- Galera cluster every limited claim adds one under the row's lock, so
-- that two nodes claiming from one limited queue at once write the same
-- row and the second to certify is rolled back (row locks hold on one
-- node only there); elsewhere it stays 0.
ALTER TABLE queue_config
    ADD COLUMN group_concurrency_limit INT NULL,
    ADD COLUMN claim_seq BIGINT NOT NULL DEFAULT 0,
    ADD CONSTRAINT queue_config_group_concurrency_limit CHECK (group_concurrency_limit > 0);

-- One group's own limit in one queue (Storage::set_group_limit): it
-- replaces the queue's group_concurrency_limit for that group. Written
-- only for a queue that has a queue_config row.
CREATE TABLE queue_group_limit (
    queue_name        VARCHAR(191) NOT NULL,
    group_key         VARCHAR(255) NOT NULL,
    concurrency_limit INT          NOT NULL,
    PRIMARY KEY (queue_name, group_key),
    CONSTRAINT queue_group_limit_concurrency_limit CHECK (concurrency_limit > 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
