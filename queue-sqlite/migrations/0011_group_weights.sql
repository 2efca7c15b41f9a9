-- Weights between a fair queue's groups (issue 38, item 2): a group of
-- weight w takes w jobs in a row each time its turn comes (queue_core's
-- Storage::dequeue states the order).
--
-- One group's own weight in one queue (Storage::set_group_weight); a group
-- without a row has weight 1. Written only for a queue that has a
-- queue_config row.
CREATE TABLE queue_group_weight (
    queue_name TEXT    NOT NULL,
    group_key  TEXT    NOT NULL CHECK (length(CAST(group_key AS BLOB)) BETWEEN 1 AND 255),
    weight     INTEGER NOT NULL CHECK (weight BETWEEN 1 AND 1000),
    PRIMARY KEY (queue_name, group_key)
) WITHOUT ROWID;

-- The jobs a group has taken since its turn last moved (fewer than its
-- weight; always 0 for a group of weight 1): its turn moves when the
-- count reaches its weight (queue_core::backend::FairTurn).
ALTER TABLE job_group_turn ADD COLUMN taken INTEGER NOT NULL DEFAULT 0 CHECK (taken >= 0);
