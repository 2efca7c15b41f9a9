//! The statements of a queue's settings: `pause_queue`, `resume_queue`,
//! `configure_queue`, `queue_configs`, and the groups' own limits:
//! `set_group_limit`, `group_limits`.

pub(super) const PAUSE_QUEUE: &str = "
INSERT INTO {s}.queue_config (queue_name, paused, updated_at)
VALUES ($2, TRUE, COALESCE($1::timestamptz, now()))
ON CONFLICT (queue_name) DO UPDATE SET paused = TRUE, updated_at = EXCLUDED.updated_at";

pub(super) const RESUME_QUEUE: &str = "
WITH resumed AS (
    UPDATE {s}.queue_config SET paused = FALSE, updated_at = COALESCE($1::timestamptz, now())
    WHERE queue_name = $2 AND paused
    RETURNING queue_name
)
SELECT pg_notify('{chan}', queue_name)::text FROM resumed";

/// Sets a queue's limits ($3 concurrency, $4 rate, $5 burst, $6 lease ms,
/// $7-$10 backoff base, min, max ms and jitter, $11 group concurrency,
/// $12 priority aging ms; NULL: not set), keeping its
/// paused flag; a rate starts with a full bucket. Wakes the queue's
/// workers, whose next claim sees the change.
pub(super) const CONFIGURE_QUEUE: &str = "
WITH up AS (
    INSERT INTO {s}.queue_config (queue_name, paused, updated_at, concurrency_limit,
                                  rate_per_second, rate_burst, tokens, refilled_at, lease_ms,
                                  backoff_base_ms, backoff_min_ms, backoff_max_ms, backoff_jitter,
                                  group_concurrency_limit, priority_aging_ms, fair_groups)
    VALUES ($2, FALSE, COALESCE($1::timestamptz, now()), $3::int, $4::float8, $5::int,
            $5::int::float8,
            CASE WHEN $4::float8 IS NULL THEN NULL ELSE COALESCE($1::timestamptz, now()) END,
            $6::bigint, $7::bigint, $8::bigint, $9::bigint, $10::float8, $11::int, $12::bigint,
            $13::boolean)
    ON CONFLICT (queue_name) DO UPDATE
    SET concurrency_limit = EXCLUDED.concurrency_limit, rate_per_second = EXCLUDED.rate_per_second,
        rate_burst = EXCLUDED.rate_burst, tokens = EXCLUDED.tokens,
        refilled_at = EXCLUDED.refilled_at, lease_ms = EXCLUDED.lease_ms,
        backoff_base_ms = EXCLUDED.backoff_base_ms, backoff_min_ms = EXCLUDED.backoff_min_ms,
        backoff_max_ms = EXCLUDED.backoff_max_ms, backoff_jitter = EXCLUDED.backoff_jitter,
        group_concurrency_limit = EXCLUDED.group_concurrency_limit,
        priority_aging_ms = EXCLUDED.priority_aging_ms, fair_groups = EXCLUDED.fair_groups,
        updated_at = EXCLUDED.updated_at
    RETURNING queue_name
)
SELECT pg_notify('{chan}', queue_name)::text FROM up";

/// Every queue that is paused or has a setting.
pub(super) const QUEUE_CONFIGS: &str = "
SELECT queue_name, paused, concurrency_limit, rate_per_second, rate_burst, lease_ms,
       backoff_base_ms, backoff_min_ms, backoff_max_ms, backoff_jitter, group_concurrency_limit,
       priority_aging_ms, fair_groups
FROM {s}.queue_config
WHERE paused OR concurrency_limit IS NOT NULL OR rate_per_second IS NOT NULL
   OR lease_ms IS NOT NULL OR backoff_base_ms IS NOT NULL OR group_concurrency_limit IS NOT NULL
   OR priority_aging_ms IS NOT NULL OR fair_groups";

/// Whether the schema has a valid `job_queue_fair` (migration 0020: the
/// index a fair claim reads, made by the first `configure_queue` that
/// makes a queue fair).
pub(super) const FAIR_INDEX_EXISTS: &str = "
SELECT EXISTS (SELECT 1 FROM pg_index i
               WHERE i.indexrelid = to_regclass('{s}.job_queue_fair') AND i.indisvalid)";

/// Serializes the builds of `job_queue_fair` of one schema (a transaction
/// lock), and gives up waiting for `job_queue`'s lock after 5 s.
pub(super) const FAIR_INDEX_LOCK: &str = "
SELECT pg_advisory_xact_lock(hashtext('{s}.job_queue_fair')::bigint),
       set_config('lock_timeout', '5s', true)";

/// Drops a `job_queue_fair` left invalid (by a concurrent build an
/// operator started and that failed).
pub(super) const FAIR_INDEX_DROP: &str = "DROP INDEX IF EXISTS {s}.job_queue_fair";

/// Builds `job_queue_fair` (migration 0020 says what it serves).
pub(super) const FAIR_INDEX_CREATE: &str = "
CREATE INDEX job_queue_fair ON {s}.job_queue
    (queue_name, (COALESCE(group_key, '')), priority DESC, available_at, id)
    WHERE lease_until IS NULL";

/// Gives group $2 of queue $1 its own limit $3 if the queue has a config
/// row, or removes the group's limit when $3 is NULL. One row, `configured`:
/// whether the queue has a config row (nothing is written when it has
/// not). Wakes the queue's workers: a raised or lifted limit may make
/// jobs claimable.
pub(super) const SET_GROUP_LIMIT: &str = "
WITH queue AS (SELECT queue_name FROM {s}.queue_config WHERE queue_name = $1 FOR UPDATE),
written AS (
    INSERT INTO {s}.queue_group_limit (queue_name, group_key, concurrency_limit)
    SELECT queue_name, $2, $3::int FROM queue WHERE $3::int IS NOT NULL
    ON CONFLICT (queue_name, group_key) DO UPDATE SET concurrency_limit = EXCLUDED.concurrency_limit
    RETURNING queue_name
),
removed AS (
    DELETE FROM {s}.queue_group_limit g USING queue q
    WHERE $3::int IS NULL AND g.queue_name = q.queue_name AND g.group_key = $2
    RETURNING g.queue_name
)
SELECT EXISTS (SELECT 1 FROM queue) AS configured,
       (SELECT count(pg_notify('{chan}', queue_name)) FROM queue) AS notified";

/// Gives group $2 of queue $1 its own weight $3 if the queue has a config
/// row, or removes the group's weight when $3 is NULL, under the config
/// row's lock (which fair claims of the queue hold). One row,
/// `configured`: whether the queue has a config row (nothing is written
/// when it has not).
pub(super) const SET_GROUP_WEIGHT: &str = "
WITH queue AS (SELECT queue_name FROM {s}.queue_config WHERE queue_name = $1 FOR UPDATE),
written AS (
    INSERT INTO {s}.queue_group_weight (queue_name, group_key, weight)
    SELECT queue_name, $2, $3::int FROM queue WHERE $3::int IS NOT NULL
    ON CONFLICT (queue_name, group_key) DO UPDATE SET weight = EXCLUDED.weight
    RETURNING queue_name
),
removed AS (
    DELETE FROM {s}.queue_group_weight g USING queue q
    WHERE $3::int IS NULL AND g.queue_name = q.queue_name AND g.group_key = $2
    RETURNING g.queue_name
)
SELECT EXISTS (SELECT 1 FROM queue) AS configured";

/// Every group's own weight, by queue, then group (byte order).
pub(super) const GROUP_WEIGHTS: &str = "
SELECT queue_name, group_key, weight FROM {s}.queue_group_weight
ORDER BY queue_name COLLATE \"C\", group_key COLLATE \"C\"";

/// Every group's own limit, by queue, then group (byte order, as
/// `QueueName` and `GroupKey` sort).
pub(super) const GROUP_LIMITS: &str = "
SELECT queue_name, group_key, concurrency_limit FROM {s}.queue_group_limit
ORDER BY queue_name COLLATE \"C\", group_key COLLATE \"C\"";
