-- Flow control and scheduling (issue 15): per-queue limits beside the
-- paused flag, a snooze counter, the `cancelled` final status, and the
-- record of periodic fires. SQL shared by MySQL 8.0.19+ and MariaDB 10.6+.
-- See docs/sql-interop.md.

-- NULL in every limit column: not set. A queue whose concurrency_limit and
-- rate_per_second are both NULL takes the plain claim, which never reads
-- these columns. tokens/refilled_at are the rate limit's token bucket, on
-- the database clock, written by every claim of a rate-limited queue.
ALTER TABLE queue_config
    ADD COLUMN concurrency_limit INT         NULL,
    ADD COLUMN rate_per_second   DOUBLE      NULL,
    ADD COLUMN rate_burst        INT         NULL,
    ADD COLUMN tokens            DOUBLE      NULL,
    ADD COLUMN refilled_at       DATETIME(6) NULL,
    ADD COLUMN lease_ms          BIGINT      NULL,
    ADD COLUMN backoff_base_ms   BIGINT      NULL,
    ADD COLUMN backoff_min_ms    BIGINT      NULL,
    ADD COLUMN backoff_max_ms    BIGINT      NULL,
    ADD COLUMN backoff_jitter    DOUBLE      NULL,
    ADD CONSTRAINT queue_config_concurrency_limit CHECK (concurrency_limit > 0),
    ADD CONSTRAINT queue_config_rate CHECK ((rate_per_second IS NULL) = (rate_burst IS NULL)
                                            AND rate_per_second > 0 AND rate_burst > 0);

-- Times a handler snoozed the job: each gave its attempt back.
ALTER TABLE job_queue ADD COLUMN snoozes INT NOT NULL DEFAULT 0;

ALTER TABLE job_history
    ADD COLUMN snoozes INT NOT NULL DEFAULT 0,
    DROP CONSTRAINT job_history_status_final;
ALTER TABLE job_history ADD CONSTRAINT job_history_status_final
    CHECK (status_final IN ('completed', 'dead_letter', 'discarded', 'cancelled'));

-- Each schedule's latest recorded fire: a fire enqueues its job only if no
-- fire at or after its time is recorded, so each fire time yields one job
-- however many workers try.
CREATE TABLE IF NOT EXISTS queue_schedule (
    schedule_name VARCHAR(191) NOT NULL,
    last_fire_at  DATETIME(6)  NOT NULL,
    next_fire_at  DATETIME(6)  NULL,
    updated_at    DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    PRIMARY KEY (schedule_name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
