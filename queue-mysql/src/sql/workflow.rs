//! Workflows' statements (migration 0015; `workflow.rs`): the enqueue's
//! lock and record of a job's dependencies, what a finish does to the jobs
//! waiting on it, and `job_links`.

use super::{LIVE_BY_ID, placeholders, tuples};

/// `queue_core::waiting_at()` as a DATETIME(6) literal: the `available_at`
/// of a waiting job (unit-tested against queue-core's).
pub(crate) const WAITING_AT: &str = waiting_at!();

/// Locks the live jobs among the ids a batch depends on, so that an ack of
/// one waits for the enqueue to commit and then sees its edges; returns
/// those found. Binds: the ids.
pub(crate) fn lock_dependencies(ids: usize) -> String {
    format!(
        "SELECT id FROM {LIVE_BY_ID} WHERE id IN {} FOR UPDATE",
        placeholders(ids)
    )
}

/// The final status of the history rows among the ids. Binds: the ids.
pub(crate) fn dependency_history(ids: usize) -> String {
    format!(
        "SELECT id, status_final FROM job_history FORCE INDEX (PRIMARY) WHERE id IN {}",
        placeholders(ids)
    )
}

/// Counts one more enqueue linking dependants to each of the locked live
/// jobs (a finish then counts its dependants): always a change of the
/// row, which Galera certifies against a concurrent delete of it. Binds:
/// the ids (distinct).
pub(crate) fn mark_dependants(ids: usize) -> String {
    format!(
        "UPDATE {LIVE_BY_ID} SET dependants_linked = dependants_linked + 1 WHERE id IN {}",
        placeholders(ids)
    )
}

/// Records edges. Binds per row: job, dependency, unfinished (0 or 1).
pub(crate) fn insert_dependencies(rows: usize) -> String {
    format!(
        "INSERT INTO job_dependency (job_id, depends_on, unfinished) VALUES {}",
        tuples(rows, 3)
    )
}

/// Makes written jobs wait. Binds per row: job, remaining, run_at,
/// on_failure.
pub(crate) fn insert_waiting(rows: usize) -> String {
    format!(
        "INSERT INTO job_waiting (job_id, remaining, run_at, on_failure) VALUES {}",
        tuples(rows, 4)
    )
}

/// The edges still unfinished of jobs that have just left the live table:
/// (waiting job, finished dependency), in that order. Only the enqueue of
/// a dependant writes them, under the dependency's row lock, which the
/// finishing statement holds: a plain read sees them all. Binds: the ids.
pub(crate) fn unfinished_edges(ids: usize) -> String {
    format!(
        "SELECT job_id, depends_on FROM job_dependency FORCE INDEX (job_dependency_depends_on) \
         WHERE depends_on IN {} AND unfinished ORDER BY job_id, depends_on",
        placeholders(ids)
    )
}

/// Counts those edges finished. Binds: the ids.
pub(crate) fn finish_edges(ids: usize) -> String {
    format!(
        "UPDATE job_dependency FORCE INDEX (job_dependency_depends_on) SET unfinished = FALSE \
         WHERE depends_on IN {} AND unfinished",
        placeholders(ids)
    )
}

/// Locks waiting jobs' rows in id order (two finishes meet here) and
/// reads them. Binds: the ids.
pub(crate) fn lock_waiting(ids: usize) -> String {
    format!(
        "SELECT job_id, remaining, on_failure FROM job_waiting \
         WHERE job_id IN {} ORDER BY job_id FOR UPDATE",
        placeholders(ids)
    )
}

/// Locks the waiting rows of batch callbacks jobs join, in id order;
/// returns those still waiting (the batches still open). Binds: the ids.
pub(crate) fn lock_callbacks(ids: usize) -> String {
    format!(
        "SELECT job_id AS id FROM job_waiting WHERE job_id IN {} ORDER BY job_id FOR UPDATE",
        placeholders(ids)
    )
}

/// Makes waiting callbacks wait for `?` more jobs (joined). Binds: the
/// count, the ids.
pub(crate) fn count_up(ids: usize) -> String {
    format!(
        "UPDATE job_waiting SET remaining = remaining + ? WHERE job_id IN {}",
        placeholders(ids)
    )
}

/// Counts `?` finishes off waiting jobs. Binds: the count, the ids.
pub(crate) fn count_down(ids: usize) -> String {
    format!(
        "UPDATE job_waiting SET remaining = remaining - ? WHERE job_id IN {}",
        placeholders(ids)
    )
}

/// Releases waiting jobs whose last dependency finished: due at the later
/// of now and the time each was enqueued for (the ready ring's update
/// trigger gives a due one its entry). Binds: now, now, the ids.
pub(crate) fn release_waiting(ids: usize) -> String {
    format!(
        "UPDATE job_queue j JOIN job_waiting w ON w.job_id = j.id \
         SET j.available_at = GREATEST(w.run_at, ?), j.updated_at = ? \
         WHERE w.job_id IN {} AND j.lease_until IS NULL AND j.available_at = {WAITING_AT}",
        placeholders(ids)
    )
}

/// Forgets waiting jobs released, cancelled or gone. Binds: the ids.
pub(crate) fn delete_waiting(ids: usize) -> String {
    format!(
        "DELETE FROM job_waiting WHERE job_id IN {}",
        placeholders(ids)
    )
}

/// Locks waiting jobs a failed dependency cancels; returns those still
/// live and waiting. Binds: the ids.
pub(crate) fn lock_cancelled(ids: usize) -> String {
    format!(
        "SELECT id FROM {LIVE_BY_ID} WHERE id IN {} AND lease_until IS NULL \
         AND available_at = {WAITING_AT} FOR UPDATE",
        placeholders(ids)
    )
}

/// Archives waiting jobs as `cancelled` with one last error (the
/// dependency that failed them). Binds: last_error, finished_at, the ids.
pub(crate) fn archive_cancelled(ids: usize) -> String {
    super::archive_with_error("'cancelled'", "NULL", ids)
}

/// Of the ids, those of jobs that have dependants or wait: the ones whose
/// finish a discard or cancel must count. Binds: the ids.
pub(crate) fn linked_jobs(ids: usize) -> String {
    format!(
        "SELECT id FROM {LIVE_BY_ID} WHERE id IN {} \
         AND (dependants_linked > 0 OR available_at = {WAITING_AT})",
        placeholders(ids)
    )
}

/// Whether a job is live or in history. Binds: id, id.
pub(crate) const JOB_EXISTS: &str = "
SELECT CAST(EXISTS (SELECT 1 FROM job_queue WHERE id = ?)
         OR EXISTS (SELECT 1 FROM job_history WHERE id = ?) AS SIGNED) AS found";

/// A job's dependencies (side 0) and dependants (side 1), by ascending
/// id, each with its live row's state columns or its history row's status
/// and result. Binds: id, id.
pub(crate) const JOB_LINKS: &str = "
SELECT CAST(l.side AS SIGNED) AS side, l.other,
       q.queue_name AS live_queue, q.available_at, q.lease_until, q.attempts, q.max_attempts,
       h.queue_name AS done_queue, h.status_final, CAST(h.result AS CHAR) AS result
FROM (SELECT 0 AS side, depends_on AS other FROM job_dependency WHERE job_id = ?
      UNION ALL
      SELECT 1 AS side, job_id AS other FROM job_dependency FORCE INDEX (job_dependency_depends_on)
      WHERE depends_on = ?) l
LEFT JOIN job_queue q ON q.id = l.other
LEFT JOIN job_history h ON h.id = l.other
ORDER BY l.side, l.other";

#[cfg(test)]
mod tests {
    #[test]
    fn the_waiting_instant_is_queue_cores() {
        let at = queue_core::waiting_at()
            .naive_utc()
            .format("'%Y-%m-%d %H:%M:%S%.6f'")
            .to_string();
        assert_eq!(super::WAITING_AT, at);
    }
}
