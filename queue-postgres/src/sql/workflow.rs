//! The statements of workflows (migration 0022): recording an enqueue's
//! dependencies, and `job_links`. What a finish does to the jobs waiting
//! on it is the migrations' triggers (`queue_dependency_noted`, counted at
//! commit by `queue_dependencies_finished`).

/// The `available_at` of a waiting job, `queue_core::waiting_at()`, as a
/// literal (`{waiting_at}` in the templates; migration 0022 writes it out).
pub(super) const WAITING_AT: &str = "'9999-12-31 23:59:59.999999+00'";

/// Locks the live jobs among $1 (ids) against deletion until the enqueue
/// commits, and marks those of them among $2 (the ones that get edges)
/// not yet marked as having dependants, so that the ack that finishes one
/// waits for this enqueue and then counts its edges (the trigger's `WHEN`
/// reads the mark). Their ids.
pub(super) const LOCK_DEPENDENCIES: &str = "
WITH locked AS MATERIALIZED (
    SELECT j.id, j.has_dependants FROM {s}.job_queue j
    WHERE j.id = ANY($1::bigint[])
    ORDER BY j.id
    FOR KEY SHARE
),
marked AS (
    UPDATE {s}.job_queue j SET has_dependants = true
    FROM locked l WHERE j.id = l.id AND NOT l.has_dependants AND j.id = ANY($2::bigint[])
    RETURNING j.id
)
SELECT l.id FROM locked l";

/// Locks the waiting rows of the batch callbacks among $1 (the batches
/// jobs join), in id order: a finish counting one down waits for the
/// enqueue's commit, then sees the joined jobs; one that released it first
/// deleted the row. Their ids (those still waiting).
pub(super) const LOCK_CALLBACKS: &str = "
SELECT w.job_id AS id FROM {s}.job_waiting w
WHERE w.job_id = ANY($1::bigint[])
ORDER BY w.job_id
FOR UPDATE";

/// Makes the waiting callbacks $1[i] wait for $2[i] more jobs (joined).
pub(super) const COUNT_UP_CALLBACKS: &str = "
UPDATE {s}.job_waiting w SET remaining = w.remaining + u.n
FROM UNNEST($1::bigint[], $2::int[]) AS u(id, n)
WHERE w.job_id = u.id";

/// The final status of each job among $1 that is in history.
pub(super) const DEPENDENCY_HISTORY: &str = "
SELECT h.id, h.status_final FROM {s}.job_history h WHERE h.id = ANY($1::bigint[])";

/// Records that job $1[i] depends on $2[i], unfinished while $3[i].
pub(super) const INSERT_DEPENDENCIES: &str = "
INSERT INTO {s}.job_dependency (job_id, depends_on, unfinished)
SELECT * FROM UNNEST($1::bigint[], $2::bigint[], $3::boolean[])
ON CONFLICT (job_id, depends_on) DO NOTHING";

/// Makes jobs $2 wait for $3 dependencies each, with the time each was
/// enqueued for ($4 delay in microseconds or $5 instant, as the enqueue's
/// columns) and its `on_failure` ($6).
pub(super) const INSERT_WAITING: &str = "
INSERT INTO {s}.job_waiting (job_id, remaining, run_at, on_failure)
SELECT u.id, u.remaining,
       COALESCE(u.run_at, COALESCE($1::timestamptz, now()) + COALESCE(u.delay_us, 0) * interval '1 microsecond'),
       u.on_failure
FROM UNNEST($2::bigint[], $3::int[], $4::bigint[], $5::timestamptz[], $6::text[])
    AS u(id, remaining, delay_us, run_at, on_failure)";

/// Gives jobs $2, written waiting, the time they were enqueued for ($3
/// delay or $4 instant): every dependency they named had finished.
pub(super) const SET_ENQUEUED_TIME: &str = "
UPDATE {s}.job_queue j
SET available_at = COALESCE(u.run_at,
                            COALESCE($1::timestamptz, now()) + COALESCE(u.delay_us, 0) * interval '1 microsecond'),
    updated_at = COALESCE($1::timestamptz, now())
FROM UNNEST($2::bigint[], $3::bigint[], $4::timestamptz[]) AS u(id, delay_us, run_at)
WHERE j.id = u.id";

/// Job $2's dependencies (`other`), then its dependants, with where each
/// stands: live columns, else history's, else neither; and whether $2
/// itself is live or in history (`found`, on every row and on one row of
/// its own when it has no links).
pub(super) const JOB_LINKS: &str = "
WITH l AS (
    SELECT 0 AS side, d.depends_on AS other FROM {s}.job_dependency d WHERE d.job_id = $2
    UNION ALL
    SELECT 1, d.job_id FROM {s}.job_dependency d WHERE d.depends_on = $2
),
found AS (
    SELECT EXISTS (SELECT 1 FROM {s}.job_queue WHERE id = $2)
        OR EXISTS (SELECT 1 FROM {s}.job_history WHERE id = $2) AS found
)
SELECT f.found, l.side, l.other,
       q.queue_name AS live_queue, q.available_at, q.lease_until, q.attempts, q.max_attempts,
       h.queue_name AS done_queue, h.status_final, h.result,
       COALESCE($1::timestamptz, now()) AS now
FROM found f
LEFT JOIN l ON TRUE
LEFT JOIN {s}.job_queue q ON q.id = l.other
LEFT JOIN {s}.job_history h ON h.id = l.other
ORDER BY l.side, l.other";

#[cfg(test)]
mod tests {
    #[test]
    fn the_waiting_literal_is_queue_cores_instant() {
        let literal = super::WAITING_AT.trim_matches('\'');
        let parsed = chrono::DateTime::parse_from_str(literal, "%Y-%m-%d %H:%M:%S%.f%#z")
            .expect("the literal parses");
        assert_eq!(parsed, queue_core::waiting_at());
        let migration = include_str!("../../migrations/0022_workflows.sql");
        assert!(migration.contains(super::WAITING_AT));
    }
}
