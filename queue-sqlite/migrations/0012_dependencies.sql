-- Workflows (issue 39): a job may depend on other jobs and waits, with
-- available_at at queue_core::waiting_at() (253402300799999999, one
-- microsecond before the year 10000), until they have finished; every
-- claim passes such a job over without knowing why. queue_core's
-- Storage::enqueue_batch states the contract.
--
-- One row per dependency a job was enqueued with, kept after both finish
-- (Storage::job_links reads them); unfinished is 1 until depends_on
-- leaves the live table, when its finish is counted, once, for job_id.
CREATE TABLE job_dependency (
    job_id     INTEGER NOT NULL,
    depends_on INTEGER NOT NULL,
    unfinished INTEGER NOT NULL CHECK (unfinished IN (0, 1)),
    PRIMARY KEY (job_id, depends_on)
) WITHOUT ROWID;

-- A finishing job's dependants, and job_links' list of them.
CREATE INDEX job_dependency_depends_on ON job_dependency (depends_on, job_id);

-- The jobs waiting: how many dependencies have not finished, the
-- available_at the job was enqueued for, and what a failed dependency
-- does to it (queue_core::DependencyFailure).
CREATE TABLE job_waiting (
    job_id     INTEGER PRIMARY KEY,
    remaining  INTEGER NOT NULL CHECK (remaining > 0),
    run_at     INTEGER NOT NULL,
    on_failure TEXT    NOT NULL CHECK (on_failure IN ('cancel', 'run'))
);
