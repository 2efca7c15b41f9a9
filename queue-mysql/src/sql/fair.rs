//! The statements of fair claiming between groups (migration 0013,
//! `fair.rs`): the reads `queue_core::backend::pick_fair` makes of a fair
//! queue, all ranges of `job_queue_group_leased`, and the turns a claim
//! leaves.

use crate::bind::tuples;

/// Each group's turn in a fair queue ('' for the jobs without a group
/// key). Binds: queue.
pub(crate) const FAIR_TURNS: &str =
    "SELECT group_key, turn, taken FROM job_group_turn WHERE queue_name = ?";

/// A fair queue's groups with their own weight. Binds: queue.
pub(crate) const FAIR_WEIGHTS: &str =
    "SELECT group_key, weight FROM queue_group_weight WHERE queue_name = ?";

/// The least group key above ? among a queue's jobs ('' for the first):
/// one step of the skip scan that lists a fair queue's groups, one index
/// probe per group (a group whose jobs are all leased is listed too).
/// Binds: queue, the key.
pub(crate) const FAIR_NEXT_GROUP: &str = "
SELECT group_key FROM job_queue FORCE INDEX (job_queue_group_leased)
WHERE queue_name = ? AND group_key > ?
ORDER BY group_key
LIMIT 1";

/// The highest priority below ? among a group's unleased jobs: one step
/// of the walk over a group's levels. Binds: queue, group, bound.
pub(crate) const FAIR_GROUP_LEVEL: &str = "
SELECT priority FROM job_queue FORCE INDEX (job_queue_group_leased)
WHERE queue_name = ? AND group_key = ? AND lease_until IS NULL AND priority < ?
ORDER BY priority DESC
LIMIT 1";

/// [`FAIR_GROUP_LEVEL`] for the jobs without a group key.
/// Binds: queue, bound.
pub(crate) const FAIR_NO_GROUP_LEVEL: &str = "
SELECT priority FROM job_queue FORCE INDEX (job_queue_group_leased)
WHERE queue_name = ? AND group_key IS NULL AND lease_until IS NULL AND priority < ?
ORDER BY priority DESC
LIMIT 1";

/// Up to ? claimable jobs of one group at one priority, due at the
/// claim's now, after the job (available_at, id) the previous page ended
/// at, oldest first: a range of `job_queue_group_leased` that ends at the
/// first job not due yet. Binds: queue, group, priority, now, after's
/// available_at twice, after's id, queue, limit.
pub(crate) const FAIR_LEVEL_PICK: &str = concat!(
    "SELECT id, priority, available_at FROM job_queue FORCE INDEX (job_queue_group_leased)
WHERE queue_name = ? AND group_key = ?",
    fair_level_pick_tail!()
);

/// [`FAIR_LEVEL_PICK`] for the jobs without a group key. Binds: queue,
/// priority, now, after's available_at twice, after's id, queue, limit.
pub(crate) const FAIR_NO_GROUP_LEVEL_PICK: &str = concat!(
    "SELECT id, priority, available_at FROM job_queue FORCE INDEX (job_queue_group_leased)
WHERE queue_name = ? AND group_key IS NULL",
    fair_level_pick_tail!()
);

/// What [`FAIR_LEVEL_PICK`] and [`FAIR_NO_GROUP_LEVEL_PICK`] share after
/// the group.
macro_rules! fair_level_pick_tail {
    () => {
        "
  AND lease_until IS NULL AND priority = ? AND available_at <= ? AND attempts < max_attempts
  AND (available_at > ? OR (available_at = ? AND id > ?))
  AND NOT EXISTS (SELECT 1 FROM queue_config p WHERE p.queue_name = ? AND p.paused)
ORDER BY available_at, id
LIMIT ?"
    };
}
use fair_level_pick_tail;

/// Sets a fair queue's claim count, under the limited claim's lock of its
/// row. Binds: count, queue.
pub(crate) const FAIR_COUNT: &str = "UPDATE queue_config SET claim_count = ? WHERE queue_name = ?";

/// Sets the turns and the jobs taken towards their weights of `rows`
/// groups (queue, group, turn, taken each) of a fair queue: the groups
/// whose turn a claim moved.
pub(crate) fn fair_turns(rows: usize) -> String {
    format!(
        "INSERT INTO job_group_turn (queue_name, group_key, turn, taken) VALUES {}
         ON DUPLICATE KEY UPDATE turn = VALUES(turn), taken = VALUES(taken)",
        tuples(rows, 4)
    )
}

/// Sets the jobs taken towards their weights of `rows` groups (queue,
/// group, taken each) of a fair queue, keeping their turns (0 for a group
/// without one): the groups a claim served without moving their turn.
pub(crate) fn fair_taken(rows: usize) -> String {
    format!(
        "INSERT INTO job_group_turn (queue_name, group_key, taken, turn) VALUES {}
         ON DUPLICATE KEY UPDATE taken = VALUES(taken)",
        tuples_with_zero(rows)
    )
}

/// `rows` tuples `(?, ?, ?, 0)`.
fn tuples_with_zero(rows: usize) -> String {
    vec!["(?, ?, ?, 0)"; rows].join(", ")
}
