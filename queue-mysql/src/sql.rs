//! Every statement `MySqlStorage` runs, in SQL that MySQL 8.0 and
//! MariaDB 10.6+ both accept, named after the contract operation it serves
//! (`DEQUEUE_*`, `ACK_*`, …). Fixed statements are constants; those whose
//! IN lists or VALUES rows depend on the input are functions of the list's
//! length, so the text of each still lives here.
//!
//! Every statement is SQL that both servers accept, reads "now" as
//! `COALESCE(?, UTC_TIMESTAMP(6))`, and reaches rows named by id through
//! the primary key. The dialect notes behind them: docs/design-notes.md,
//! "queue-mysql: the statements".

use queue_core::{JobFilter, JobState};

use crate::bind::{placeholders, tuples};
use crate::rows::{HISTORY_SELECT, JOB_SELECT};

/// `queue_core::waiting_at()` as a DATETIME(6) literal, for `concat!`
/// ([`WAITING_AT`] is the same text; its unit test checks it).
macro_rules! waiting_at {
    () => {
        "'9999-12-31 23:59:59.999999'"
    };
}

#[cfg(test)]
mod by_id_plans;
mod fair;
mod ready;
mod samples;
mod workflow;

pub(crate) use fair::*;
pub(crate) use ready::*;
pub(crate) use samples::*;
pub(crate) use workflow::*;

/// `job_queue` read through its primary key, for statements that name their
/// rows by id (`... WHERE id IN (...)`); see the module's dialect notes.
/// Both servers take the hint on SELECT and single-table UPDATE, not on
/// DELETE ([`delete_by_id`]).
pub(crate) const LIVE_BY_ID: &str = "job_queue FORCE INDEX (PRIMARY)";

/// The database's now (or the bound manual clock). Binds: now.
pub(crate) const NOW: &str = "SELECT COALESCE(?, UTC_TIMESTAMP(6)) AS now_ts";

/// One step of `next_due`'s skip-scan over the distinct priorities of a
/// queue's scheduled jobs (the unleased ones written not due yet: every
/// unleased job due later is one, and the claim finds the rest in the
/// ready ring): the next priority below a bound, and the earliest future
/// `available_at` at the previous step's priority. Two probes of
/// `job_queue_scheduled` (queue_name, is_scheduled, priority, ...), which
/// holds no entry of a job written due, so no job claimed since InnoDB's
/// purge last ran is stepped over unless it was scheduled. Shaped by the
/// servers' optimizers: a recursive CTE doing the same cannot range-scan
/// on a correlated priority (MariaDB read the whole queue that way), and
/// MAX(priority) is not optimised on a descending index, so the bounds are
/// bound values and the probes `ORDER BY ... LIMIT 1`. A waiting job
/// (its `available_at` at `queue_core::waiting_at()`) is never due.
/// Parameters: queue, bound, now, queue, previous priority (NULL at
/// first), now (now as `COALESCE(?, UTC_TIMESTAMP(6))`).
pub(crate) const NEXT_DUE_STEP: &str = concat!(
    r#"
SELECT
    (SELECT j.priority FROM job_queue j FORCE INDEX (job_queue_scheduled)
      WHERE j.queue_name = ? AND j.is_scheduled = 1 AND j.priority < ?
      ORDER BY j.priority DESC LIMIT 1) AS next_priority,
    TIMESTAMPDIFF(MICROSECOND, COALESCE(?, UTC_TIMESTAMP(6)),
        (SELECT j.available_at FROM job_queue j FORCE INDEX (job_queue_scheduled)
          WHERE j.queue_name = ? AND j.is_scheduled = 1 AND j.priority = ?
            AND j.available_at > COALESCE(?, UTC_TIMESTAMP(6))
            AND j.available_at < "#,
    waiting_at!(),
    r#"
          ORDER BY j.available_at LIMIT 1)) AS due_in_us"#
);

/// The history columns filled by archiving statements.
const HISTORY_COLUMNS: &str = "id, queue_name, priority, unique_key, payload, \
     status_final, result, last_error, attempts, max_attempts, processed_by, created_at, \
     started_at, finished_at, snoozes, trace_context, group_key";

/// Releases a current lease without counting its attempt.
/// Binds: now, now, id, worker, attempt.
pub(crate) const RELEASE: &str = "
UPDATE job_queue
SET lease_until = NULL, locked_by = NULL, attempts = attempts - 1,
    available_at = COALESCE(?, UTC_TIMESTAMP(6)), updated_at = COALESCE(?, UTC_TIMESTAMP(6))
WHERE id = ? AND locked_by = ? AND attempts = ? AND lease_until IS NOT NULL";

/// Stalled jobs, oldest lease first. Binds: now, limit.
pub(crate) const RECLAIM_STALLED_EXPIRED: &str = "
SELECT id, locked_by, attempts, max_attempts, dependants_linked FROM job_queue
WHERE lease_until <= ?
ORDER BY lease_until, id
LIMIT ?
FOR UPDATE SKIP LOCKED";

/// Exhausted jobs, by id, through the index on the generated column.
/// Binds: limit.
pub(crate) const RECLAIM_STALLED_EXHAUSTED: &str = "
SELECT id, locked_by, attempts, max_attempts, dependants_linked FROM job_queue
WHERE is_exhausted = 1
ORDER BY id
LIMIT ?
FOR UPDATE SKIP LOCKED";

/// Deletes up to a limit of history rows older than the retention.
/// Binds: now, retention µs, status, status, limit.
pub(crate) const PRUNE_HISTORY: &str = "
DELETE FROM job_history
WHERE finished_at < DATE_SUB(COALESCE(?, UTC_TIMESTAMP(6)), INTERVAL ? MICROSECOND)
  AND (? IS NULL OR status_final = ?)
ORDER BY finished_at, id
LIMIT ?";

/// Stats, first step: the queues with live jobs, a loose index scan of
/// `job_queue_unique_key` (one probe per queue). No binds.
pub(crate) const STATS_QUEUES: &str = "SELECT queue_name FROM job_queue GROUP BY queue_name";

/// Stats: the paused queues. No binds.
pub(crate) const STATS_PAUSED: &str = "SELECT queue_name FROM queue_config WHERE paused";

/// Stats: running and stalled jobs per queue, from the leased rows of
/// `job_queue_lease_until` (as many as workers hold, so few). Binds: now, now.
pub(crate) const STATS_LEASED: &str = "
SELECT queue_name,
       CAST(SUM(lease_until > ?) AS SIGNED) AS running,
       CAST(SUM(lease_until <= ?) AS SIGNED) AS stalled
FROM job_queue WHERE lease_until IS NOT NULL
GROUP BY queue_name";

/// Stats: exhausted jobs per queue, and how many of them are due, from
/// `job_queue_exhausted` (normally empty: reclaim empties it). They sit in
/// the dequeue index among the pending and scheduled jobs, so
/// [`STATS_LEVEL`]'s counts include them and the caller subtracts them.
/// Binds: now.
pub(crate) const STATS_EXHAUSTED: &str = "
SELECT queue_name, CAST(COUNT(*) AS SIGNED) AS total,
       CAST(SUM(available_at <= ?) AS SIGNED) AS due
FROM job_queue WHERE is_exhausted = 1
GROUP BY queue_name";

/// Stats, one step of a walk over a queue's priority levels (as
/// [`NEXT_DUE_STEP`]'s): the next priority below a bound; at the previous
/// step's priority, the unleased jobs due and not yet due, each counted up
/// to a limit as a covering range of `job_queue_dequeue` (so a level of a
/// million jobs costs the limit, not the million), and the earliest
/// `available_at` of an unexhausted job; and the waiting jobs (not due,
/// at `queue_core::waiting_at()`) apart from the rest not yet due. Binds:
/// queue, bound; queue, previous, now, limit; queue, previous, now, limit;
/// queue, previous, limit; queue, previous.
pub(crate) const STATS_LEVEL: &str = concat!(
    r#"
SELECT
    (SELECT j.priority FROM job_queue j
      WHERE j.queue_name = ? AND j.lease_until IS NULL AND j.priority < ?
      ORDER BY j.priority DESC LIMIT 1) AS next_priority,
    (SELECT COUNT(*) FROM (
        SELECT 1 FROM job_queue j
        WHERE j.queue_name = ? AND j.lease_until IS NULL AND j.priority = ? AND j.available_at <= ?
        LIMIT ?) d) AS due,
    (SELECT COUNT(*) FROM (
        SELECT 1 FROM job_queue j
        WHERE j.queue_name = ? AND j.lease_until IS NULL AND j.priority = ? AND j.available_at > ?
          AND j.available_at < "#,
    waiting_at!(),
    r#"
        LIMIT ?) l) AS later,
    (SELECT COUNT(*) FROM (
        SELECT 1 FROM job_queue j
        WHERE j.queue_name = ? AND j.lease_until IS NULL AND j.priority = ?
          AND j.available_at = "#,
    waiting_at!(),
    r#"
        LIMIT ?) w) AS waiting,
    (SELECT j.available_at FROM job_queue j
      WHERE j.queue_name = ? AND j.lease_until IS NULL AND j.priority = ?
        AND j.attempts < j.max_attempts
      ORDER BY j.available_at LIMIT 1) AS oldest"#
);

/// Pauses a queue. Binds: queue, now, now.
pub(crate) const PAUSE_QUEUE: &str = "
INSERT INTO queue_config (queue_name, paused, updated_at)
VALUES (?, TRUE, COALESCE(?, UTC_TIMESTAMP(6)))
ON DUPLICATE KEY UPDATE paused = TRUE, updated_at = COALESCE(?, UTC_TIMESTAMP(6))";

/// Resumes a queue. Binds: now, queue.
pub(crate) const RESUME_QUEUE: &str = "
UPDATE queue_config SET paused = FALSE, updated_at = COALESCE(?, UTC_TIMESTAMP(6))
WHERE queue_name = ?";

/// Puts a current lease's job off without counting the attempt.
/// Binds: available_at, now, id, worker, attempt.
pub(crate) const SNOOZE: &str = "
UPDATE job_queue
SET lease_until = NULL, locked_by = NULL, attempts = attempts - 1, snoozes = snoozes + 1,
    available_at = ?, updated_at = ?
WHERE id = ? AND locked_by = ? AND attempts = ? AND lease_until IS NOT NULL";

/// The queues whose claims are limited (what `LimitedQueues` remembers).
pub(crate) const LIMITED_QUEUES: &str = "
SELECT c.queue_name FROM queue_config c
WHERE c.concurrency_limit IS NOT NULL OR c.rate_per_second IS NOT NULL
   OR c.group_concurrency_limit IS NOT NULL OR c.priority_aging_ms IS NOT NULL OR c.fair_groups
   OR EXISTS (SELECT 1 FROM queue_group_limit g WHERE g.queue_name = c.queue_name)";

/// The limited claim's first statement: locks the config rows of the
/// limited queues among `queues`, in name order (so concurrent claims over
/// several queues never deadlock), and reads their limits, buckets, the
/// claim's now, and the leases each holds (`held`). At READ COMMITTED a
/// statement's consistent reads share one read view, opened by the first
/// of them: with one queue named, the count of its row, after that row's
/// lock was granted, so the count sees every claim committed before the
/// lock; with several, a later row's lock may be awaited after the view
/// opened (at an earlier limited row's count, or at the subquery in the
/// WHERE of an unlimited one, a paused queue's row), so the claim counts
/// again ([`held`]). Only a queue with a concurrency limit counts its
/// leases (`held` is 0 for others: a correlated subquery in a CASE branch
/// not taken is not run), since the range of `job_queue_dequeue` it reads
/// also holds an entry per lease ended since InnoDB's purge last ran, about
/// a thousand at a few thousand jobs a second. It also reads each queue's
/// highest level of scheduled jobs (`top_priority`), the claim's first
/// [`SCHEDULED_LEVEL`] probe, one round trip fewer, and whether some group
/// has a limit of its own (`overridden`: only then [`GROUP_OVERRIDES`]; a
/// queue is grouped when it has a group concurrency or such a limit).
/// Binds: now, the queues.
pub(crate) fn limits_lock(queues: usize) -> String {
    format!(
        "SELECT c.queue_name, c.concurrency_limit, c.rate_per_second, c.rate_burst, c.tokens, \
                c.refilled_at, c.group_concurrency_limit, c.priority_aging_ms, \
                CAST(c.fair_groups AS SIGNED) AS fair_groups, c.claim_count, \
                CAST(EXISTS (SELECT 1 FROM queue_group_limit g WHERE g.queue_name = c.queue_name) \
                     AS SIGNED) AS overridden, \
                COALESCE(?, UTC_TIMESTAMP(6)) AS now_ts, \
                CASE WHEN c.concurrency_limit IS NULL THEN 0 ELSE \
                (SELECT CAST(COUNT(*) AS SIGNED) FROM job_queue j \
                 WHERE j.queue_name = c.queue_name AND j.lease_until IS NOT NULL) END AS held, \
                (SELECT j.priority FROM job_queue j FORCE INDEX (job_queue_scheduled) \
                 WHERE j.queue_name = c.queue_name AND j.is_scheduled = 1 \
                 ORDER BY j.priority DESC LIMIT 1) AS top_priority \
         FROM queue_config c \
         WHERE c.queue_name IN {} \
           AND (c.concurrency_limit IS NOT NULL OR c.rate_per_second IS NOT NULL \
                OR c.group_concurrency_limit IS NOT NULL OR c.priority_aging_ms IS NOT NULL \
                OR c.fair_groups OR EXISTS (SELECT 1 FROM queue_group_limit g WHERE g.queue_name = c.queue_name)) \
         ORDER BY c.queue_name \
         FOR UPDATE",
        placeholders(queues)
    )
}

/// The leases held by the jobs of each of `queues`, a range of
/// `job_queue_dequeue` per queue (queue_name, lease_until IS NOT NULL); run
/// after [`limits_lock`] when it locked several queues, so it reads every
/// claim committed before the last lock was granted. Binds: the queues.
pub(crate) fn held(queues: usize) -> String {
    format!(
        "SELECT queue_name, CAST(COUNT(*) AS SIGNED) AS held FROM job_queue \
         WHERE queue_name IN {} AND lease_until IS NOT NULL \
         GROUP BY queue_name",
        placeholders(queues)
    )
}

/// The leases each group of a queue holds (expired ones too, until
/// reclaim): the whole range of the queue's rows with a group in
/// `job_queue_group_leased`, so it reads an entry per job of the queue.
/// A fair queue's claim, which walks every group, counts them so after its
/// lock on the queue's config row, and so sees every claim committed
/// before the lock was granted; other grouped claims count only the groups
/// they meet ([`group_held_of`]). Binds: queue.
pub(crate) const GROUP_HELD: &str = "
SELECT group_key, CAST(COUNT(*) AS SIGNED) AS held
FROM job_queue FORCE INDEX (job_queue_group_leased)
WHERE queue_name = ? AND group_key IS NOT NULL AND lease_until IS NOT NULL
GROUP BY group_key";

/// The leases held by the jobs of `groups` groups of a queue (expired ones
/// too, until reclaim), for the groups a grouped claim meets in its
/// candidates: one short range of `job_queue_group_leased` per group
/// (queue, group, lease_until IS NOT NULL), whose entries are that group's
/// leases and those ended since InnoDB's purge last ran. Counted after the
/// claim's lock on the queue's config row, like [`GROUP_HELD`]. A group
/// without leases has no row. Binds: queue, the groups.
pub(crate) fn group_held_of(groups: usize) -> String {
    format!(
        "SELECT group_key, CAST(COUNT(*) AS SIGNED) AS held \
         FROM job_queue FORCE INDEX (job_queue_group_leased) \
         WHERE queue_name = ? AND group_key IN {} AND lease_until IS NOT NULL \
         GROUP BY group_key",
        placeholders(groups)
    )
}

/// The groups of a queue with their own limit. Binds: queue.
pub(crate) const GROUP_OVERRIDES: &str = "
SELECT queue_name, group_key, concurrency_limit FROM queue_group_limit WHERE queue_name = ?";

/// Locks a queue's config row, if it has one (`set_group_limit` needs
/// it). Binds: queue.
pub(crate) const QUEUE_CONFIGURED: &str =
    "SELECT queue_name FROM queue_config WHERE queue_name = ? FOR UPDATE";

/// Gives a group of a queue its own limit. Binds: queue, group, limit.
pub(crate) const SET_GROUP_LIMIT: &str = "
INSERT INTO queue_group_limit (queue_name, group_key, concurrency_limit) VALUES (?, ?, ?)
ON DUPLICATE KEY UPDATE concurrency_limit = VALUES(concurrency_limit)";

/// Removes a group's own limit. Binds: queue, group.
pub(crate) const DELETE_GROUP_LIMIT: &str =
    "DELETE FROM queue_group_limit WHERE queue_name = ? AND group_key = ?";

/// Gives a group of a queue its own weight. Binds: queue, group, weight.
pub(crate) const SET_GROUP_WEIGHT: &str = "
INSERT INTO queue_group_weight (queue_name, group_key, weight) VALUES (?, ?, ?)
ON DUPLICATE KEY UPDATE weight = VALUES(weight)";

/// Removes a group's own weight. Binds: queue, group.
pub(crate) const DELETE_GROUP_WEIGHT: &str =
    "DELETE FROM queue_group_weight WHERE queue_name = ? AND group_key = ?";

/// Every group's own weight, by queue, then group (byte order).
pub(crate) const GROUP_WEIGHTS: &str = "
SELECT queue_name, group_key, weight FROM queue_group_weight ORDER BY queue_name, group_key";

/// Every group's own limit, by queue, then group (byte order: the
/// columns' binary collation).
pub(crate) const GROUP_LIMITS: &str = "
SELECT queue_name, group_key, concurrency_limit FROM queue_group_limit
ORDER BY queue_name, group_key";

/// Writes the config rows of the limited queues a claim locked, on a
/// Galera cluster: row locks hold on one node only there, so two nodes'
/// claims of one limited queue would both count and lease; with both
/// writing its row, the second to certify is rolled back and retried.
/// Binds: the queues.
pub(crate) fn claim_seq_bump(queues: usize) -> String {
    format!(
        "UPDATE queue_config SET claim_seq = claim_seq + 1 WHERE queue_name IN {}",
        placeholders(queues)
    )
}

/// Stores a rate-limited queue's bucket after a claim.
/// Binds: tokens, refilled_at, queue.
pub(crate) const BUCKET_STORE: &str = "
UPDATE queue_config SET tokens = ?, refilled_at = ? WHERE queue_name = ?";

/// Sets a queue's limits (NULL: not set), keeping its paused flag; a rate
/// starts with a full bucket (tokens = burst, refilled now).
/// Binds: queue, now, concurrency, rate, burst, tokens, refilled_at,
/// lease ms, backoff base, min, max ms, jitter, group concurrency, priority
/// aging ms, fair groups.
pub(crate) const CONFIGURE_QUEUE: &str = "
INSERT INTO queue_config (queue_name, paused, updated_at, concurrency_limit, rate_per_second,
                          rate_burst, tokens, refilled_at, lease_ms, backoff_base_ms,
                          backoff_min_ms, backoff_max_ms, backoff_jitter, group_concurrency_limit,
                          priority_aging_ms, fair_groups)
VALUES (?, FALSE, COALESCE(?, UTC_TIMESTAMP(6)), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    concurrency_limit = VALUES(concurrency_limit), rate_per_second = VALUES(rate_per_second),
    rate_burst = VALUES(rate_burst), tokens = VALUES(tokens), refilled_at = VALUES(refilled_at),
    lease_ms = VALUES(lease_ms), backoff_base_ms = VALUES(backoff_base_ms),
    backoff_min_ms = VALUES(backoff_min_ms), backoff_max_ms = VALUES(backoff_max_ms),
    backoff_jitter = VALUES(backoff_jitter),
    group_concurrency_limit = VALUES(group_concurrency_limit),
    priority_aging_ms = VALUES(priority_aging_ms), fair_groups = VALUES(fair_groups),
    updated_at = VALUES(updated_at)";

/// Every queue that is paused or has a setting.
pub(crate) const QUEUE_CONFIGS: &str = "
SELECT queue_name, CAST(paused AS SIGNED) AS paused, concurrency_limit, rate_per_second,
       rate_burst, lease_ms, backoff_base_ms, backoff_min_ms, backoff_max_ms, backoff_jitter,
       group_concurrency_limit, priority_aging_ms, CAST(fair_groups AS SIGNED) AS fair_groups
FROM queue_config
WHERE paused OR concurrency_limit IS NOT NULL OR rate_per_second IS NOT NULL
   OR lease_ms IS NOT NULL OR backoff_base_ms IS NOT NULL OR group_concurrency_limit IS NOT NULL
   OR priority_aging_ms IS NOT NULL OR fair_groups";

/// Locks a schedule's row and reads its latest fire. Binds: schedule.
pub(crate) const ENQUEUE_PERIODIC_LOCK: &str =
    "SELECT last_fire_at FROM queue_schedule WHERE schedule_name = ? FOR UPDATE";

/// Records a schedule's first fire; a concurrent first fire of the same
/// schedule fails it as a duplicate (the caller then reads the row again).
/// Binds: schedule, fire, next fire, now.
pub(crate) const ENQUEUE_PERIODIC_INSERT: &str = "
INSERT INTO queue_schedule (schedule_name, last_fire_at, next_fire_at, updated_at)
VALUES (?, ?, ?, COALESCE(?, UTC_TIMESTAMP(6)))";

/// Records a later fire of a schedule whose row [`ENQUEUE_PERIODIC_LOCK`] holds.
/// Binds: fire, next fire, now, schedule.
pub(crate) const ENQUEUE_PERIODIC_UPDATE: &str = "
UPDATE queue_schedule SET last_fire_at = ?, next_fire_at = ?, updated_at = COALESCE(?, UTC_TIMESTAMP(6))
WHERE schedule_name = ?";

/// Every schedule's latest recorded fire.
pub(crate) const SCHEDULES: &str =
    "SELECT schedule_name, last_fire_at, next_fire_at FROM queue_schedule";

/// Locks and reads the peeked candidates that are still claimable
/// (skipping those another claim holds), with the statement's "now".
/// Binds: now, the ids, now.
pub(crate) fn dequeue_lock_picked(ids: usize) -> String {
    format!(
        "SELECT {JOB_SELECT}, COALESCE(?, UTC_TIMESTAMP(6)) AS now_ts FROM {LIVE_BY_ID} \
         WHERE id IN {} AND lease_until IS NULL AND available_at <= COALESCE(?, UTC_TIMESTAMP(6)) \
         AND attempts < max_attempts FOR UPDATE SKIP LOCKED",
        placeholders(ids)
    )
}

/// Leases the picked rows. Binds: lease_until, worker, now, now, the ids.
pub(crate) fn dequeue_lease(ids: usize) -> String {
    format!(
        "UPDATE {LIVE_BY_ID} SET attempts = attempts + 1, lease_until = ?, locked_by = ?, \
         first_locked_at = COALESCE(first_locked_at, ?), updated_at = ? WHERE id IN {}",
        placeholders(ids)
    )
}

/// Locks the rows whose lease is one of `leases` (id, holder, attempt:
/// the fence is in the statement, so a stale lease locks and returns
/// nothing) and reads them; `unexpired`: only leases that have not run out.
/// Binds: the ids, then id, worker, attempt per lease, then now when
/// `unexpired`.
pub(crate) fn lock_leased(leases: usize, unexpired: bool) -> String {
    format!(
        "SELECT id, locked_by, attempts, max_attempts, dependants_linked FROM {LIVE_BY_ID} \
         WHERE id IN {} AND (id, locked_by, attempts) IN ({}) AND lease_until IS NOT NULL{} \
         FOR UPDATE",
        placeholders(leases),
        tuples(leases, 3),
        if unexpired {
            " AND lease_until > ?"
        } else {
            ""
        }
    )
}

/// Extends the leases of the rows. Binds: lease_until, now, the ids.
pub(crate) fn heartbeat_extend(ids: usize) -> String {
    format!(
        "UPDATE {LIVE_BY_ID} SET lease_until = ?, updated_at = ? WHERE id IN {}",
        placeholders(ids)
    )
}

/// Archives acked rows as `completed` with their results, read from a
/// derived table of `rows` (id, result) pairs (portable to MySQL 8 and
/// MariaDB). Binds: finished_at (or NULL for the server's now), then id and
/// result per row.
pub(crate) fn ack_archive(rows: usize) -> String {
    let results = vec!["SELECT ? AS rid, ? AS result"; rows].join(" UNION ALL ");
    format!(
        "INSERT INTO job_history ({HISTORY_COLUMNS}) \
         SELECT j.id, j.queue_name, j.priority, j.unique_key, j.payload, 'completed', r.result, \
                j.last_error, j.attempts, j.max_attempts, j.locked_by, j.created_at, \
                j.first_locked_at, COALESCE(?, UTC_TIMESTAMP(6)), j.snoozes, j.trace_context, \
                j.group_key \
         FROM ({results}) r STRAIGHT_JOIN job_queue j ON j.id = r.rid"
    )
}

/// Deletes live rows already copied to history. Binds: the ids.
pub(crate) fn delete_live(ids: usize) -> String {
    delete_by_id("job_queue", ids)
}

/// Deletes rows of `table` by id, reaching each through the primary key:
/// the ids as a derived table joined first (`STRAIGHT_JOIN`), since neither
/// server takes an index hint on a single-table DELETE, and MariaDB plans
/// a one-table multi-table DELETE as a single-table one.
/// Binds: the ids.
pub(crate) fn delete_by_id(table: &str, ids: usize) -> String {
    let list = vec!["SELECT ? AS id"; ids].join(" UNION ALL ");
    format!("DELETE t FROM ({list}) d STRAIGHT_JOIN {table} t ON t.id = d.id")
}

/// Puts a nacked job back with its error, due later.
/// Binds: error, available_at, now, id.
pub(crate) const NACK_RETRY: &str = "
UPDATE job_queue SET lease_until = NULL, locked_by = NULL, last_error = ?,
    available_at = ?, updated_at = ?
WHERE id = ?";

/// Archives live rows as `dead_letter` with an error (a nack's, or none).
/// Binds: error, finished_at, the ids.
pub(crate) fn nack_dead_letter(ids: usize) -> String {
    archive_with_error("'dead_letter'", "locked_by", ids)
}

/// Archives live rows as `status` (an SQL literal) with one error and
/// `processed_by` (an SQL expression over the live row), no result.
/// Binds: error, finished_at, the ids.
fn archive_with_error(status: &str, processed_by: &str, ids: usize) -> String {
    format!(
        "INSERT INTO job_history ({HISTORY_COLUMNS}) \
         SELECT id, queue_name, priority, unique_key, payload, {status}, NULL, ?, attempts, \
                max_attempts, {processed_by}, created_at, first_locked_at, ?, snoozes, \
                trace_context, group_key \
         FROM {LIVE_BY_ID} WHERE id IN {}",
        placeholders(ids)
    )
}

/// The error a reclaimed stalled job records (also on MariaDB, where
/// JSON_OBJECT yields text): `{"kind":"lease_expired","worker_id":…,"attempt":…}`.
const LEASE_EXPIRED: &str =
    "JSON_OBJECT('kind', 'lease_expired', 'worker_id', locked_by, 'attempt', attempts)";

/// Requeues stalled jobs, recording the expired lease as their error
/// (`last_error` first: assignments run left to right and it reads
/// `locked_by`). Binds: available_at, now, the ids.
pub(crate) fn reclaim_requeue(ids: usize) -> String {
    format!(
        "UPDATE {LIVE_BY_ID} SET last_error = {LEASE_EXPIRED}, lease_until = NULL, \
         locked_by = NULL, available_at = ?, updated_at = ? WHERE id IN {}",
        placeholders(ids)
    )
}

/// Archives exhausted or stalled-and-exhausted jobs as `dead_letter`.
/// Binds: finished_at, the ids.
pub(crate) fn reclaim_dead_letter(ids: usize) -> String {
    format!(
        "INSERT INTO job_history ({HISTORY_COLUMNS}) \
         SELECT id, queue_name, priority, unique_key, payload, 'dead_letter', NULL, \
                CASE WHEN locked_by IS NULL THEN last_error ELSE {LEASE_EXPIRED} END, \
                attempts, max_attempts, NULL, created_at, first_locked_at, ?, snoozes, \
                trace_context, group_key \
         FROM {LIVE_BY_ID} WHERE id IN {}",
        placeholders(ids)
    )
}

/// Locks a live job. Binds: id.
pub(crate) const DISCARD_LOCK: &str = "SELECT id FROM job_queue WHERE id = ? FOR UPDATE";

/// Locks a dead letter. Binds: id.
pub(crate) const RETRY_DEAD_LETTER_LOCK: &str =
    "SELECT id FROM job_history WHERE id = ? AND status_final = 'dead_letter' FOR UPDATE";

/// One live job. Binds: id.
pub(crate) fn get_job() -> String {
    format!("SELECT {JOB_SELECT} FROM job_queue WHERE id = ?")
}

/// One history row. Binds: id.
pub(crate) fn get_history() -> String {
    format!("SELECT {HISTORY_SELECT} FROM job_history WHERE id = ?")
}

/// A page of `rows` history rows, newest first, with only the filters set
/// written and the limit in the text. As a prepared statement, `? IS NULL
/// OR queue_name = ?` is no index condition to MariaDB, and with `LIMIT ?`
/// it does not know the page is small: it merged two indexes and sorted
/// a queue's 10,000 dead letters behind its completions (17-30 ms) where
/// this reads 51 entries of `job_history_queue_status` (1 ms); with the
/// queue and the status bound it still merged them, so that index is
/// named, and so is `job_history_status` for a status alone: a later
/// page of completions (`id < ?`) read the status's every entry (20,011
/// rows for 10) in one run of the explain test and 20 in the next, as
/// the table's statistics came out. A queue alone has no index in id
/// order: each final status's
/// newest rows are read from `job_history_queue_status` and merged, a
/// page per status at most, where the primary key read newest first
/// passes every newer row of other queues. Binds: the queue, the status,
/// before, each when set (and for a queue alone, those once per status).
pub(crate) fn list_history(queue: bool, status: bool, before: bool, rows: u64) -> String {
    // `status_final`'s value as written: `?` when bound, a literal in one
    // branch of a queue alone.
    let page = |status_final: Option<String>| {
        let mut parts = vec!["TRUE".to_owned()];
        if queue {
            parts.push("queue_name = ?".to_owned());
        }
        if let Some(value) = &status_final {
            parts.push(format!("status_final = {value}"));
        }
        if before {
            parts.push("id < ?".to_owned());
        }
        let source = match (queue, status_final.is_some()) {
            (true, true) => "job_history FORCE INDEX (job_history_queue_status)",
            (false, true) => "job_history FORCE INDEX (job_history_status)",
            (_, false) => "job_history",
        };
        format!(
            "SELECT {HISTORY_SELECT} FROM {source} WHERE {} ORDER BY id DESC LIMIT {rows}",
            parts.join(" AND ")
        )
    };
    if queue && !status {
        let branches: Vec<String> = queue_core::FinalStatus::ALL
            .iter()
            .map(|final_status| format!("({})", page(Some(format!("'{}'", final_status.as_str())))))
            .collect();
        return format!(
            "SELECT * FROM ({}) page ORDER BY id DESC LIMIT {rows}",
            branches.join(" UNION ALL ")
        );
    }
    page(status.then(|| "?".to_owned()))
}

/// Inserts `rows` new jobs whose ready-ring entries the enqueue writes
/// into `slot` itself ([`ready_insert`]; `ready_slot` keeps the insert
/// trigger from writing them into the inbox too). Binds per row: queue,
/// priority, unique key, payload, max_attempts, available_at, created_at,
/// updated_at, trace context, group key.
pub(crate) fn enqueue_insert(rows: usize, slot: u8) -> String {
    let one = format!("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {slot})");
    format!(
        "INSERT INTO job_queue (queue_name, priority, unique_key, payload, max_attempts, \
         available_at, created_at, updated_at, trace_context, group_key, ready_slot) VALUES {}",
        vec![one; rows].join(", ")
    )
}

/// The id of a lone row just inserted on this connection.
pub(crate) const ENQUEUE_LAST_ID: &str = "SELECT LAST_INSERT_ID() AS id";

/// The first id of the multi-row INSERT just run on this connection and
/// the session's auto-increment step: with consecutive ids (see
/// [`SERVER_INSERT_TRAITS`]) its rows got `id + k * step`, in VALUES order.
pub(crate) const ENQUEUE_FIRST_ID: &str =
    "SELECT LAST_INSERT_ID() AS id, CAST(@@SESSION.auto_increment_increment AS SIGNED) AS step";

/// What a batch enqueue needs to know of the server, read once per
/// storage: InnoDB's auto-increment lock mode (0 "traditional" and 1
/// "consecutive" give the rows of a simple multi-row INSERT consecutive
/// ids; 2 "interleaved", MySQL 8's default, does not) and the largest
/// packet it accepts (a prepared INSERT's parameters travel in one);
/// and whether it is a node of a MariaDB Galera cluster (`wsrep_on` with
/// a provider loaded), asked in a MariaDB executable comment (`/*M!`)
/// that MySQL reads as a comment: `galera` is 0 there.
pub(crate) const SERVER_INSERT_TRAITS: &str = "SELECT CAST(@@GLOBAL.innodb_autoinc_lock_mode AS SIGNED) AS lock_mode, \
     CAST(@@SESSION.max_allowed_packet AS SIGNED) AS max_packet, \
     CAST(0 /*M! + (@@GLOBAL.wsrep_on = 1 AND @@GLOBAL.wsrep_provider <> 'none') */ AS SIGNED) AS galera";

/// Ids of live jobs by (queue, key), through the unique index.
/// Binds: queue and key per pair.
pub(crate) fn enqueue_find_keys(pairs: usize) -> String {
    format!(
        "SELECT id, queue_name, unique_key FROM job_queue WHERE (queue_name, unique_key) IN ({})",
        tuples(pairs, 2)
    )
}

/// Clears the temporary keys of keyless jobs of a batch. Binds: the ids.
pub(crate) fn enqueue_clear_markers(ids: usize) -> String {
    format!(
        "UPDATE {LIVE_BY_ID} SET unique_key = NULL WHERE id IN {}",
        placeholders(ids)
    )
}

/// The session's index and table reads so far (for `rows_read_by_next_due`).
/// `SHOW SESSION STATUS` rather than a status table: MySQL 8 moved those to
/// performance_schema, MariaDB keeps them in information_schema.
pub(crate) const SESSION_READS: &str = "SHOW SESSION STATUS LIKE 'Handler_read%'";

/// The rows this connection's transaction holds locks on (for
/// `rows_locked_by_claim`).
pub(crate) const ROWS_LOCKED: &str = "SELECT CAST(trx_rows_locked AS SIGNED) AS `rows` \
     FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = CONNECTION_ID()";

/// The state filter of a listing or bulk action. Running and stalled
/// jobs are the leased ones, a range of `job_queue_lease_until` (or of
/// `job_queue_dequeue` within a queue), and exhausted ones are
/// `job_queue_exhausted`: written so, a listing reads those few rows and
/// sorts them, where the derived-state CASE walked the whole queue newest
/// first (1.1 s for a page of running jobs among 250,000 pending ones).
/// Pending and scheduled jobs are most jobs: the derived state, which no
/// index serves, so that the listing reads `job_queue_queue` (within a
/// queue) or the primary key newest first and finds a page soonest (as
/// conditions an index could serve, the optimizer intersected three
/// indexes and sorted: 190 ms). Binds now once per `?`.
pub(crate) fn state_filter(state: JobState) -> &'static str {
    match state {
        JobState::Running => "j.lease_until > ?",
        JobState::Stalled => "j.lease_until <= ?",
        JobState::Exhausted => "j.is_exhausted = 1",
        JobState::Pending => DERIVED_PENDING,
        JobState::Scheduled => DERIVED_SCHEDULED,
        // A waiting job's `available_at` marks it (no bind).
        JobState::Waiting => concat!("j.lease_until IS NULL AND j.available_at = ", waiting_at!()),
    }
}

/// [`queue_core::derive_state`] in SQL, up to its last two states.
macro_rules! derived_state {
    ($state:literal) => {
        concat!(
            "(CASE WHEN j.lease_until > ? THEN 'running' ",
            "WHEN j.lease_until IS NOT NULL THEN 'stalled' ",
            "WHEN j.available_at = ",
            waiting_at!(),
            " THEN 'waiting' ",
            "WHEN j.attempts >= j.max_attempts THEN 'exhausted' ",
            "WHEN j.available_at <= ? THEN 'pending' ",
            "ELSE 'scheduled' END) = '",
            $state,
            "'"
        )
    };
}

/// Pending, as [`queue_core::derive_state`] words it. Binds: now, now.
const DERIVED_PENDING: &str = derived_state!("pending");

/// Scheduled, as [`queue_core::derive_state`] words it. Binds: now, now.
const DERIVED_SCHEDULED: &str = derived_state!("scheduled");

/// The conditions of a `JobFilter` on `job_queue j`: only those it sets
/// (`? IS NULL OR j.queue_name = ?` cannot use an index, so a listing of
/// one queue read every newer job of the others). A unique key without a
/// queue is looked up in each queue (`job_queue_unique_key` leads with
/// the queue; the queues are found by a loose index scan). Binds (see
/// `bind::job_filter`): queue, the state's now, id, key, before, each
/// when set.
fn job_filter(filter: &JobFilter) -> String {
    let mut parts = vec!["TRUE"];
    if filter.queue.is_some() {
        parts.push("j.queue_name = ?");
    }
    if let Some(state) = filter.state {
        parts.push(state_filter(state));
    }
    if filter.id.is_some() {
        parts.push("j.id = ?");
    }
    match (&filter.unique_key, &filter.queue) {
        (Some(_), Some(_)) => parts.push("j.unique_key = ?"),
        (Some(_), None) => parts.push(
            "j.queue_name IN (SELECT n.queue_name FROM \
             (SELECT DISTINCT q.queue_name FROM job_queue q) n) AND j.unique_key = ?",
        ),
        (None, _) => {}
    }
    if filter.before.is_some() {
        parts.push("j.id < ?");
    }
    parts.join(" AND ")
}

/// The table a listing or bulk action reads, with the index it must
/// read. Left to itself the optimizer reads the primary key newest first
/// for any `ORDER BY id DESC LIMIT` (a queue older than 150,000 jobs of
/// others: 78 ms a page), or the queue's whole range for its running
/// jobs. An id or a unique key is a lookup it finds by itself.
fn job_source(filter: &JobFilter) -> &'static str {
    if filter.id.is_some() || filter.unique_key.is_some() {
        return "job_queue j";
    }
    match (filter.state, filter.queue.is_some()) {
        (Some(JobState::Running | JobState::Stalled), true) => {
            "job_queue j FORCE INDEX (job_queue_dequeue)"
        }
        (Some(JobState::Running | JobState::Stalled), false) => {
            "job_queue j FORCE INDEX (job_queue_lease_until)"
        }
        (Some(JobState::Exhausted), _) => "job_queue j FORCE INDEX (job_queue_exhausted)",
        (_, true) => "job_queue j FORCE INDEX (job_queue_queue)",
        (_, false) => "job_queue j",
    }
}

/// A page of live jobs, newest first. Binds: the filter, limit.
pub(crate) fn list_jobs(filter: &JobFilter) -> String {
    format!(
        "SELECT {JOB_SELECT} FROM {} WHERE {} ORDER BY j.id DESC LIMIT ?",
        job_source(filter),
        job_filter(filter)
    )
}

/// The most scheduled jobs a listing sorts by id ([`scheduled_ids`]);
/// past that many it reads newest first.
pub(crate) const SCHEDULED_SORTED: i64 = 10_000;

/// The scheduled jobs' source for [`count_scheduled`] and
/// [`list_scheduled_sorted`]: `job_queue_scheduled`, which leads with the
/// queue, read by queue (every queue's found by a loose index scan when
/// the filter names none).
fn scheduled_source(filter: &JobFilter) -> &'static str {
    if filter.queue.is_some() {
        "job_queue j FORCE INDEX (job_queue_scheduled)"
    } else {
        "(SELECT DISTINCT q.queue_name FROM job_queue q) n \
         STRAIGHT_JOIN job_queue j FORCE INDEX (job_queue_scheduled) \
         ON j.queue_name = n.queue_name"
    }
}

/// The ids of the scheduled (or, for that state, waiting) candidates of
/// the filter's queue or of every queue, up to [`SCHEDULED_SORTED`] + 1,
/// in no order: the unleased jobs
/// written due later (`is_scheduled`: every scheduled job is one) and
/// not due yet, below `before` when set, read from `job_queue_scheduled`
/// alone (no row is read: 7,900 candidates in 4 ms, where reading their
/// rows to test the derived state took 20). Binds: now, the queue and
/// before when set.
pub(crate) fn scheduled_ids(filter: &JobFilter) -> String {
    let queue = if filter.queue.is_some() {
        " AND j.queue_name = ?"
    } else {
        ""
    };
    let before = if filter.before.is_some() {
        " AND j.id < ?"
    } else {
        ""
    };
    // Waiting jobs are scheduled ones at the waiting instant.
    let waiting = if filter.state == Some(JobState::Waiting) {
        concat!(" AND j.available_at = ", waiting_at!())
    } else {
        concat!(" AND j.available_at < ", waiting_at!())
    };
    format!(
        "SELECT j.id FROM {} WHERE j.is_scheduled = 1 AND j.available_at > ?{waiting}{queue}\
         {before} LIMIT {}",
        scheduled_source(filter),
        SCHEDULED_SORTED + 1
    )
}

/// The rows among `ids` ids (the newest candidates of
/// [`scheduled_ids`]) that the filter lists, newest first, looked up by
/// id (left to itself, the optimizer reads the queue's whole range of
/// `job_queue_queue` and tests each row against the list). Binds: the
/// filter, then the ids.
pub(crate) fn list_jobs_among(filter: &JobFilter, ids: usize) -> String {
    format!(
        "SELECT {JOB_SELECT} FROM job_queue j FORCE INDEX (PRIMARY) WHERE {} AND j.id IN ({}) \
         ORDER BY j.id DESC",
        job_filter(filter),
        vec!["?"; ids].join(", ")
    )
}

/// Locks the ids of the jobs a filter selects, newest first.
/// Binds: the filter, limit.
pub(crate) fn lock_selected(filter: &JobFilter) -> String {
    format!(
        "SELECT j.id FROM {} WHERE {} ORDER BY j.id DESC LIMIT ? FOR UPDATE",
        job_source(filter),
        job_filter(filter)
    )
}

/// Makes jobs available now. Binds: now, now, the ids.
pub(crate) fn run_now(ids: usize) -> String {
    format!(
        "UPDATE {LIVE_BY_ID} SET available_at = ?, updated_at = ? WHERE id IN {}",
        placeholders(ids)
    )
}

/// Archives live jobs, in any state, as a final status (`discarded` or
/// `cancelled`; one: `discard` and `cancel`, several: `discard_jobs`).
/// Binds: status, finished_at, the ids.
pub(crate) fn discard_jobs(ids: usize) -> String {
    format!(
        "INSERT INTO job_history ({HISTORY_COLUMNS}) \
         SELECT id, queue_name, priority, unique_key, payload, ?, NULL, last_error, \
                attempts, max_attempts, NULL, created_at, first_locked_at, ?, snoozes, \
                trace_context, group_key \
         FROM {LIVE_BY_ID} WHERE id IN {}",
        placeholders(ids)
    )
}

/// Locks dead letters of a queue below an id whose unique key is not live,
/// newest first, with their queue and key (two of one key are not both
/// moved: `retry_dead_letters` keeps the newest). Binds: queue, queue,
/// before, before, limit.
pub(crate) const RETRY_DEAD_LETTERS_LOCK: &str = "
SELECT h.id, h.queue_name, h.unique_key FROM job_history h
WHERE h.status_final = 'dead_letter'
  AND (? IS NULL OR h.queue_name = ?)
  AND (? IS NULL OR h.id < ?)
  AND NOT EXISTS (SELECT 1 FROM job_queue j
                  WHERE j.queue_name = h.queue_name AND j.unique_key = h.unique_key)
ORDER BY h.id DESC
LIMIT ?
FOR UPDATE SKIP LOCKED";

/// Copies dead letters back to the live table under their ids, due now
/// (one: `retry_dead_letter`, several: `retry_dead_letters`); a unique key
/// live again fails it as a duplicate. max_attempts 0 (archived by hand
/// without it) gets the default allowance (20). Binds: now, now, the ids.
pub(crate) fn retry_dead_letters_requeue(ids: usize) -> String {
    format!(
        "INSERT INTO job_queue (id, queue_name, priority, unique_key, payload, attempts, \
         max_attempts, available_at, last_error, created_at, updated_at, snoozes, trace_context, \
         group_key) \
         SELECT id, queue_name, priority, unique_key, payload, 0, \
                CASE WHEN max_attempts >= 1 THEN max_attempts ELSE 20 END, ?, last_error, \
                created_at, ?, snoozes, trace_context, group_key \
         FROM job_history FORCE INDEX (PRIMARY) WHERE id IN {}",
        placeholders(ids)
    )
}

/// Deletes requeued dead letters from history. Binds: the ids.
pub(crate) fn retry_dead_letters_delete(ids: usize) -> String {
    delete_by_id("job_history", ids)
}

/// Completed and dead-lettered jobs per queue and UTC minute finished in
/// `(since, now]`. Every minute after the first comes from
/// `job_throughput` (kept by triggers on history, see migration 0005; a
/// sum over each minute's shards), the current one included: nothing has
/// finished after now, so its counter holds exactly what finished in it up
/// to now. The first minute, which the window covers only in part, comes
/// from history through `job_history_finished_at`. So the cost is a row
/// per queue, minute and writer plus what finished in one minute a window
/// ago. Binds: first minute, last minute (the minutes of since and now),
/// since, first minute + 1 minute.
pub(crate) const THROUGHPUT: &str = "
SELECT queue_name, minute,
       CAST(SUM(completed) AS SIGNED) AS completed, CAST(SUM(failed) AS SIGNED) AS failed
FROM job_throughput
WHERE minute > ? AND minute <= ?
GROUP BY queue_name, minute
HAVING SUM(completed) <> 0 OR SUM(failed) <> 0
UNION ALL
SELECT queue_name,
       CAST(DATE_FORMAT(finished_at, '%Y-%m-%d %H:%i:00') AS DATETIME(6)) AS minute,
       CAST(SUM(status_final = 'completed') AS SIGNED) AS completed,
       CAST(SUM(status_final = 'dead_letter') AS SIGNED) AS failed
FROM job_history
WHERE finished_at > ? AND finished_at < ?
  AND status_final IN ('completed', 'dead_letter')
GROUP BY queue_name, CAST(DATE_FORMAT(finished_at, '%Y-%m-%d %H:%i:00') AS DATETIME(6))";

/// Deletes the `job_throughput` rows of minutes before the oldest history
/// row (all of them when history is empty): their shards sum to zero once
/// prune has deleted the rows they counted. No binds.
pub(crate) const PRUNE_COUNTERS: &str = "
DELETE FROM job_throughput
WHERE minute < COALESCE(
    (SELECT CAST(DATE_FORMAT(MIN(finished_at), '%Y-%m-%d %H:%i:00') AS DATETIME(6))
       FROM job_history),
    CAST('9999-12-31 23:59:59' AS DATETIME(6)))";

/// Inserts a worker or replaces every column of its row; `last_seen` is
/// now either way (the heartbeat). Binds: id, host, pid, version, queues,
/// started at, now.
pub(crate) const REGISTER_WORKER: &str = "
INSERT INTO queue_worker (worker_id, host, pid, version, queues, started_at, last_seen)
VALUES (?, ?, ?, ?, ?, ?, COALESCE(?, UTC_TIMESTAMP(6)))
ON DUPLICATE KEY UPDATE host = VALUES(host), pid = VALUES(pid), version = VALUES(version),
    queues = VALUES(queues), started_at = VALUES(started_at), last_seen = VALUES(last_seen)";

/// Deletes a worker's row. Binds: id.
pub(crate) const DEREGISTER_WORKER: &str = "DELETE FROM queue_worker WHERE worker_id = ?";

/// Deletes the workers last seen at or before the bound instant (now less
/// `forget_after`): the first statement of `list_workers`, after [`NOW`].
pub(crate) const LIST_WORKERS_FORGET: &str = "DELETE FROM queue_worker WHERE last_seen <= ?";

/// Every worker left, by id: the last statement of `list_workers`.
pub(crate) const LIST_WORKERS: &str = "SELECT worker_id, host, pid, version, queues, started_at, \
     last_seen FROM queue_worker ORDER BY worker_id";
