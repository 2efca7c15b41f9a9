-- Flow control and scheduling (issue 15): per-queue limits beside the
-- paused flag, a snooze counter, the `cancelled` final status, and the
-- record of periodic fires. See docs/sql-interop.md.

-- NULL in every limit column: not set. A queue whose concurrency_limit and
-- rate_per_second are both NULL takes the plain claim, which never reads
-- these columns. tokens/refilled_at are the rate limit's token bucket, on
-- the database clock, written by every claim of a rate-limited queue.
ALTER TABLE queue_config
    ADD COLUMN concurrency_limit INTEGER,
    ADD COLUMN rate_per_second   DOUBLE PRECISION,
    ADD COLUMN rate_burst        INTEGER,
    ADD COLUMN tokens            DOUBLE PRECISION,
    ADD COLUMN refilled_at       TIMESTAMPTZ,
    ADD COLUMN lease_ms          BIGINT,
    ADD COLUMN backoff_base_ms   BIGINT,
    ADD COLUMN backoff_min_ms    BIGINT,
    ADD COLUMN backoff_max_ms    BIGINT,
    ADD COLUMN backoff_jitter    DOUBLE PRECISION,
    ADD CONSTRAINT queue_config_concurrency_limit CHECK (concurrency_limit > 0),
    ADD CONSTRAINT queue_config_rate CHECK ((rate_per_second IS NULL) = (rate_burst IS NULL)
                                            AND rate_per_second > 0 AND rate_burst > 0);

-- Times a handler snoozed the job: each gave its attempt back.
ALTER TABLE job_queue ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE job_history ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0;

ALTER TABLE job_history DROP CONSTRAINT job_history_status_final;
ALTER TABLE job_history ADD CONSTRAINT job_history_status_final
    CHECK (status_final IN ('completed', 'dead_letter', 'discarded', 'cancelled'));

-- Each schedule's latest recorded fire: a fire enqueues its job only if no
-- fire at or after its time is recorded, so each fire time yields one job
-- however many workers try.
CREATE TABLE queue_schedule (
    schedule_name TEXT        PRIMARY KEY,
    last_fire_at  TIMESTAMPTZ NOT NULL,
    next_fire_at  TIMESTAMPTZ,
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT queue_schedule_name_length CHECK (octet_length(schedule_name) BETWEEN 1 AND 191)
);

-- Serves the limited claim's count of the leases a queue holds
-- (`queue_name = ANY(..) AND lease_until IS NOT NULL`). Without it the
-- planner answered the count from job_queue_unique_key, reading every job
-- of the queue: a limited queue with 50,000 jobs waiting drained at 16% of
-- an unlimited one (docs/benchmarks.md).
CREATE INDEX job_queue_held ON job_queue (queue_name) WHERE lease_until IS NOT NULL;
