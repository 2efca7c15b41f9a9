-- Fair claiming between groups (issue 38, item 2): with fair_groups set,
-- a queue's claims take its jobs, within each (effective) priority level,
-- one group at a time: the next job is the best of the group whose turn
-- is lowest, and taking it gives its group a turn above every other
-- (queue_core::QueueLimits::fair_groups; queue_core::backend::pick_fair
-- walks the groups in queue-mysql/src/fair.rs). SQL shared by MySQL
-- 8.0.19+ and MariaDB 10.6+.
--
-- fair_groups makes a queue a limited queue (sql::LIMITED_QUEUES): its
-- claims lock its config row, which also orders them. claim_count: the
-- jobs claims have taken from the queue while it was fair, advanced under
-- that lock. Workers of the previous release keep running beside the new
-- one but claim a fair queue in plain order: set it once every worker is
-- upgraded.
ALTER TABLE queue_config
    ADD COLUMN fair_groups BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN claim_count BIGINT NOT NULL DEFAULT 0;

-- A group's turn in a fair queue: the queue's claim_count when a claim
-- last took one of its jobs; a group without a row has turn 0. The jobs
-- without a group key are one group, written ''.
CREATE TABLE job_group_turn (
    queue_name VARCHAR(191) NOT NULL,
    group_key  VARCHAR(255) NOT NULL,
    turn       BIGINT       NOT NULL,
    PRIMARY KEY (queue_name, group_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- job_queue_group_leased (migration 0009) gains the claim order after the
-- lease: besides the grouped claim's count of each group's leases, it now
-- serves the fair pick's reads of a group, its unleased jobs
-- (lease_until IS NULL) level by level, oldest first, and the skip scan
-- over the groups. Every job was in it already; its entries grow by the
-- priority and available_at, and a retry's new available_at now rewrites
-- its entry. The pick steps over the entries InnoDB's purge has not
-- removed yet of a group's jobs claimed lately (the ready ring's
-- guarantee does not hold for a fair queue).
-- Online (LOCK = NONE: enqueues, claims and acks go on while it builds;
-- a server that could not build it so refuses the statement).
ALTER TABLE job_queue
    DROP KEY job_queue_group_leased,
    ADD KEY job_queue_group_leased (queue_name, group_key, lease_until, priority DESC, available_at, id),
    ALGORITHM = INPLACE, LOCK = NONE;
