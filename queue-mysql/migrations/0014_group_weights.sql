-- Weights between a fair queue's groups (issue 38, item 2): a group of
-- weight w takes w jobs in a row each time its turn comes
-- (queue_core::Storage::dequeue states the order;
-- queue_core::backend::pick_fair walks it in queue-mysql/src/fair.rs).
-- SQL shared by MySQL 8.0.19+ and MariaDB 10.6+.
--
-- One group's own weight in one queue (Storage::set_group_weight); a group
-- without a row has weight 1. Written only for a queue that has a
-- queue_config row, under that row's lock.
CREATE TABLE queue_group_weight (
    queue_name VARCHAR(191) NOT NULL,
    group_key  VARCHAR(255) NOT NULL,
    weight     INT          NOT NULL,
    PRIMARY KEY (queue_name, group_key),
    CONSTRAINT queue_group_weight_weight CHECK (weight BETWEEN 1 AND 1000)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The jobs a group has taken since its turn last moved (fewer than its
-- weight; always 0 for a group of weight 1): its turn moves when the
-- count reaches its weight (queue_core::backend::FairTurn). Instant on
-- both servers: a column with a constant default, added last.
ALTER TABLE job_group_turn ADD COLUMN taken INT NOT NULL DEFAULT 0;
