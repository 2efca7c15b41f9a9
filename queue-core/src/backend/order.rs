//! The order in which claims hand out due jobs.

use std::cmp::Reverse;

/// The sort key of the contract's claim order: higher priority first, then
/// earlier `available_at`, then lower id (enqueue order).
///
/// Backends sort what a claim statement returned with it (`RETURNING`
/// carries no order) and merge per-queue scans by it, so every backend and
/// `MemoryStorage` hand out jobs in the same order. `T` is however the
/// backend holds `available_at` (a timestamp, microseconds, …).
///
/// ```
/// use queue_core::backend::claim_order;
///
/// let mut due = vec![(0, 20, 1), (5, 30, 2), (0, 10, 3)]; // (priority, available_at, id)
/// due.sort_by_key(|&(priority, at, id)| claim_order(priority, at, id));
/// assert_eq!(due, vec![(5, 30, 2), (0, 10, 3), (0, 20, 1)]);
/// ```
pub fn claim_order<T: Ord>(priority: i32, available_at: T, id: i64) -> (Reverse<i32>, T, i64) {
    (Reverse(priority), available_at, id)
}
