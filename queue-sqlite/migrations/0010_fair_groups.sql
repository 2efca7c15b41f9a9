-- Fair claiming between groups (issue 38, item 2): a queue's claims serve
-- its groups in turn within each priority level (queue_core's
-- Storage::dequeue states the order). fair_groups: 1 when set.
-- claim_count: the jobs claimed from the queue while it was fair, the
-- clock of its groups' turns.
ALTER TABLE queue_config ADD COLUMN fair_groups INTEGER NOT NULL DEFAULT 0
    CHECK (fair_groups IN (0, 1));
ALTER TABLE queue_config ADD COLUMN claim_count INTEGER NOT NULL DEFAULT 0;

-- Each group's turn in a fair queue: the queue's claim_count when a job of
-- the group was last claimed. '' stands for the jobs without a group key
-- (a group key is never empty). A group without a row has turn 0.
CREATE TABLE job_group_turn (
    queue_name TEXT    NOT NULL,
    group_key  TEXT    NOT NULL,
    turn       INTEGER NOT NULL,
    PRIMARY KEY (queue_name, group_key)
) WITHOUT ROWID;

-- A fair claim reads each group's waiting jobs level by level, best first:
-- the groups by a skip scan of this index, then each group's levels and
-- each level's due jobs as ranges of it.
CREATE INDEX job_queue_fair ON job_queue (queue_name, group_key, priority DESC, available_at, id)
    WHERE lease_until IS NULL;
