-- The claim no longer reads job_queue's indexes to find due jobs
-- (docs/operations.md, "MariaDB: a claim that does not wait for purge").
--
-- A claim moves a job out of job_queue_dequeue's unleased range, and an
-- ack deletes its row; InnoDB only delete-marks the index entries, and its
-- purge removes them later. While any transaction holds an old read view
-- (an idle session, a long report) purge removes nothing, and every claim
-- steps over the entries of every job claimed since: one idle transaction
-- took a queue running 2,000 jobs/s down to 109.
--
-- So claims find jobs written due in a ring of four small tables,
-- job_ready_0 to job_ready_3, emptied in turn by TRUNCATE, which drops a
-- table's delete-marked entries with the rest and waits for no purge. The
-- enqueue writes each due job's entry into the current slot
-- (queue_ready_ring.slot) in its own transaction; the claim that leases a
-- job deletes its entry. The rotation (MySqlStorage, ready_ring.rs) makes
-- the oldest slot current again once it is empty, or has moved its few
-- remaining entries to the slot made current before. A claim therefore
-- steps over the entries of the last few rotations at most.
--
-- Every other write that makes a job due (a release, a reclaim, a run-now,
-- a requeued dead letter, a periodic fire, an application's own INSERT or
-- UPDATE) goes through the triggers below into job_ready_inbox, which is
-- never truncated. They name only the inbox: a trigger's tables are locked
-- by every statement that fires it until its transaction ends, so a
-- trigger naming the ring's slots would let any open write transaction on
-- job_queue stop the rotation.
--
-- Jobs written with a future available_at never enter the ring: claims
-- read them through job_queue_scheduled, whose column is_scheduled marks
-- the unleased jobs written not due yet. An entry is only a pointer: the
-- claim locks and checks the job's row, and deletes an entry whose job is
-- gone, leased, exhausted or moved.
--
-- Every statement can run again after a partial failure (MySQL commits DDL
-- on its own).

-- The primary key is the claim order, so a claim reads a slot's clustered
-- index: each record there carries the id of the transaction that wrote or
-- deleted it, and a delete-marked one that every read view sees deleted is
-- stepped over in place. Through a secondary index every delete-marked
-- entry under a page newer than the oldest read view cost a visit to the
-- clustered index (two page reads): with 2,000 such entries per slot, a
-- claim read 4,000 pages and a queue at 2,000 jobs/s fell to 300 under an
-- idle transaction. Entries are deleted and moved by id (job_ready_id).
CREATE TABLE IF NOT EXISTS job_ready_0 (
    queue_name   VARCHAR(191) NOT NULL,
    priority     INT          NOT NULL,
    available_at DATETIME(6)  NOT NULL,
    id           BIGINT       NOT NULL,
    PRIMARY KEY (queue_name, priority DESC, available_at, id),
    UNIQUE KEY job_ready_id (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS job_ready_1 LIKE job_ready_0;
CREATE TABLE IF NOT EXISTS job_ready_2 LIKE job_ready_0;
CREATE TABLE IF NOT EXISTS job_ready_3 LIKE job_ready_0;
CREATE TABLE IF NOT EXISTS job_ready_inbox LIKE job_ready_0;

-- The current slot, when it became current, and job_queue's highest id
-- then (the rotation's measure of how many jobs were enqueued since).
CREATE TABLE IF NOT EXISTS queue_ready_ring (
    one_row    TINYINT     NOT NULL,
    slot       TINYINT     NOT NULL,
    rotated_at DATETIME(6) NOT NULL,
    rotated_id BIGINT      NOT NULL,
    PRIMARY KEY (one_row),
    CONSTRAINT queue_ready_ring_one_row CHECK (one_row = 0),
    CONSTRAINT queue_ready_ring_slot CHECK (slot BETWEEN 0 AND 3)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

INSERT IGNORE INTO queue_ready_ring (one_row, slot, rotated_at, rotated_id)
VALUES (0, 0, UTC_TIMESTAMP(6), 0);

-- ready_slot: the slot our enqueue wrote the job's entry into (the INSERT
-- trigger leaves such rows alone). is_scheduled: unleased and written not
-- due yet, the jobs claims read through job_queue_scheduled.
SET @queue_has_column = (SELECT COUNT(*) FROM information_schema.columns
    WHERE table_schema = DATABASE() AND table_name = 'job_queue' AND column_name = 'is_scheduled');
SET @queue_ddl = IF(@queue_has_column = 0,
    'ALTER TABLE job_queue ADD COLUMN ready_slot TINYINT NULL, ADD COLUMN is_scheduled BOOLEAN GENERATED ALWAYS AS (lease_until IS NULL AND available_at > updated_at) STORED, ADD KEY job_queue_scheduled (queue_name, is_scheduled, priority DESC, available_at, id)',
    'DO 0');
PREPARE queue_stmt FROM @queue_ddl;
EXECUTE queue_stmt;
DEALLOCATE PREPARE queue_stmt;

-- Every job already due when written, pending now: into the inbox.
INSERT IGNORE INTO job_ready_inbox (id, queue_name, priority, available_at)
SELECT id, queue_name, priority, available_at FROM job_queue
WHERE lease_until IS NULL AND available_at <= updated_at AND attempts < max_attempts;

-- The triggers test their condition in an IF: a statement that inserts
-- nothing (INSERT ... SELECT ... FROM DUAL WHERE ...) cost 9 us a row, an
-- IF 2 us, on every row every INSERT and UPDATE of job_queue writes. (The
-- migration runner ends a statement at a line ending in a semicolon: the
-- inner ones stay mid-line.)

-- A due job inserted by anything but our enqueue.
DROP TRIGGER IF EXISTS job_queue_ready_insert;
CREATE TRIGGER job_queue_ready_insert AFTER INSERT ON job_queue FOR EACH ROW
BEGIN
    IF NEW.ready_slot IS NULL AND NEW.lease_until IS NULL
       AND NEW.available_at <= NEW.updated_at AND NEW.attempts < NEW.max_attempts THEN
        INSERT INTO job_ready_inbox (id, queue_name, priority, available_at)
        VALUES (NEW.id, NEW.queue_name, NEW.priority, NEW.available_at)
        ON DUPLICATE KEY UPDATE queue_name = VALUES(queue_name), priority = VALUES(priority),
                                available_at = VALUES(available_at); END IF; END;

-- A job an UPDATE makes due-at-write and unleased (a release, a reclaim, a
-- retry without backoff, a run-now), or whose place in the claim order
-- changes while it is. Claims, heartbeats and acks fail the condition. An
-- entry the job already has in the inbox takes the new place (a stale
-- place would make the claim drop it).
DROP TRIGGER IF EXISTS job_queue_ready_update;
CREATE TRIGGER job_queue_ready_update AFTER UPDATE ON job_queue FOR EACH ROW
BEGIN
    IF NEW.lease_until IS NULL AND NEW.available_at <= NEW.updated_at
       AND NEW.attempts < NEW.max_attempts
       AND (OLD.lease_until IS NOT NULL OR OLD.available_at > OLD.updated_at
            OR OLD.attempts >= OLD.max_attempts
            OR OLD.available_at <> NEW.available_at OR OLD.priority <> NEW.priority
            OR OLD.queue_name <> NEW.queue_name) THEN
        INSERT INTO job_ready_inbox (id, queue_name, priority, available_at)
        VALUES (NEW.id, NEW.queue_name, NEW.priority, NEW.available_at)
        ON DUPLICATE KEY UPDATE queue_name = VALUES(queue_name), priority = VALUES(priority),
                                available_at = VALUES(available_at); END IF; END;
