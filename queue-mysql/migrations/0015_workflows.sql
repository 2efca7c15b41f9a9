-- Workflows (issue 39): a job may depend on other jobs and waits, with
-- available_at at queue_core::waiting_at() ('9999-12-31 23:59:59.999999'),
-- until they have finished. A waiting job is one more scheduled job
-- (is_scheduled: written not due), after every time an enqueue may ask
-- for, so every claim passes it over at the end of its priority level of
-- job_queue_scheduled without knowing why. queue_core's
-- Storage::enqueue_batch states the contract. SQL shared by MySQL 8.0.19+
-- and MariaDB 10.6+.
--
-- What finishing a job does to the jobs waiting on it lives in Rust
-- (queue-mysql/src/workflow.rs), in the transaction of each statement
-- that moves a job to history: neither server lets a trigger on job_queue
-- update job_queue, and the release and the cancellations do.

-- One row per dependency a job was enqueued with, kept after both finish
-- (Storage::job_links reads them); unfinished is true until depends_on
-- leaves the live table, when its finish is counted, once, for job_id.
CREATE TABLE IF NOT EXISTS job_dependency (
    job_id     BIGINT  NOT NULL,
    depends_on BIGINT  NOT NULL,
    unfinished BOOLEAN NOT NULL,
    PRIMARY KEY (job_id, depends_on),
    KEY job_dependency_depends_on (depends_on, unfinished, job_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The jobs waiting: how many dependencies have not finished (0 only
-- inside the transaction that releases the job, which deletes the row),
-- the available_at the job was enqueued for, and what a failed dependency
-- does to it (queue_core::DependencyFailure).
CREATE TABLE IF NOT EXISTS job_waiting (
    job_id     BIGINT      NOT NULL,
    remaining  INT         NOT NULL,
    run_at     DATETIME(6) NOT NULL,
    on_failure VARCHAR(8)  NOT NULL,
    PRIMARY KEY (job_id),
    CONSTRAINT job_waiting_remaining CHECK (remaining >= 0),
    CONSTRAINT job_waiting_on_failure CHECK (on_failure IN ('cancel', 'run'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- How many enqueues have linked a dependant to this job: each adds one,
-- under the row's lock, so that an ack deleting the row waits for that
-- enqueue to commit and then sees its edges; a job at 0 skips the count.
-- A count rather than PostgreSQL's flag: every such enqueue then changes
-- the row, so on a Galera cluster (whose locking reads lock one node
-- only) an enqueue and an ack of the same job through two nodes always
-- conflict at certification, and one of them runs again. Instant on both
-- servers: a column with a constant default, added last.
ALTER TABLE job_queue ADD COLUMN dependants_linked INT NOT NULL DEFAULT 0;
