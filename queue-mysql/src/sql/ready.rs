//! The ready ring's statements (migration 0006; `ready_ring.rs` and
//! `dequeue.rs`): the claim's reads of the ring and of the scheduled jobs,
//! the entries an enqueue writes and a claim deletes, and the rotation.

use super::placeholders;

/// The ring's tables by source number: the four slots, then the inbox
/// (what the triggers write). [`SCHEDULED_SOURCE`] names job_queue itself.
const READY_TABLES: [&str; 5] = [
    "job_ready_0",
    "job_ready_1",
    "job_ready_2",
    "job_ready_3",
    "job_ready_inbox",
];

/// How many slots the ring has.
pub(crate) const SLOTS: u8 = 4;

/// The source number of the inbox.
pub(crate) const INBOX_SOURCE: u8 = 4;

/// The source number of candidates read from `job_queue_scheduled`.
pub(crate) const SCHEDULED_SOURCE: u8 = 5;

/// The table of a ring source (a slot or the inbox).
pub(crate) fn ready_table(source: u8) -> &'static str {
    READY_TABLES[usize::from(source.min(INBOX_SOURCE))]
}

/// One source's best entries of a queue, in claim order.
macro_rules! ready_branch {
    ($source:literal, $table:literal) => {
        concat!(
            "(SELECT ",
            $source,
            " AS src, id, queue_name, priority, available_at FROM ",
            $table,
            " FORCE INDEX (PRIMARY) WHERE queue_name = ? ORDER BY priority DESC, available_at, id LIMIT ?)"
        )
    };
}

/// One source's best entries of one priority level of a queue, in claim
/// order.
macro_rules! ready_level_branch {
    ($source:literal, $table:literal) => {
        concat!(
            "(SELECT ",
            $source,
            " AS src, id, queue_name, priority, available_at FROM ",
            $table,
            " FORCE INDEX (PRIMARY) WHERE queue_name = ? AND priority = ? ORDER BY available_at, id LIMIT ?)"
        )
    };
}

/// One source's highest priority level of a queue below a bound.
macro_rules! ready_next_level {
    ($table:literal) => {
        concat!(
            "(SELECT priority FROM ",
            $table,
            " FORCE INDEX (PRIMARY) WHERE queue_name = ? AND priority < ? ORDER BY priority DESC LIMIT 1)"
        )
    };
}

/// The columns [`READY_PEEK`] and [`READY_PEEK_LEVEL`] read of each entry
/// and of its job, up to the union of the sources.
macro_rules! ready_peek_head {
    () => {
        "SELECT CAST(e.src AS SIGNED) AS src, e.id, e.priority, e.available_at, j.group_key,
       CAST(j.id IS NOT NULL AND j.lease_until IS NULL AND j.attempts < j.max_attempts
            AND j.available_at <= COALESCE(?, UTC_TIMESTAMP(6))
            AND j.queue_name = e.queue_name AND j.priority = e.priority
            AND j.available_at = e.available_at AS SIGNED) AS claimable,
       CAST(j.id IS NULL OR j.lease_until IS NOT NULL OR j.attempts >= j.max_attempts
            OR j.queue_name <> e.queue_name OR j.priority <> e.priority
            OR j.available_at <> e.available_at AS SIGNED) AS stale
FROM ("
    };
}

/// What follows the union of [`READY_PEEK`] and [`READY_PEEK_LEVEL`].
macro_rules! ready_peek_tail {
    () => {
        ") e
LEFT JOIN job_queue j FORCE INDEX (PRIMARY) ON j.id = e.id
WHERE NOT EXISTS (SELECT 1 FROM queue_config p WHERE p.queue_name = ? AND p.paused)"
    };
}

/// The best entries of one queue in each slot and in the inbox, each with
/// its source, its job's group (`group_key`), whether its job is claimable now (`claimable`), and whether
/// the entry is stale (`stale`: its job is gone, leased, out of attempts,
/// or has another place in the claim order, so the entry can go). An
/// entry whose job is neither (not due yet on a manual clock) stays. Each
/// source is one short range of its `job_ready_claim` index, and each
/// entry's job one primary-key read: no index of `job_queue` is scanned,
/// so nothing InnoDB's purge has not removed yet is stepped over, beyond
/// the deleted entries of the ring's own slots. Nothing on a paused queue.
/// Binds: now, then queue and limit for each of the five sources, then
/// queue.
pub(crate) const READY_PEEK: &str = concat!(
    ready_peek_head!(),
    ready_branch!("0", "job_ready_0"),
    "\n  UNION ALL ",
    ready_branch!("1", "job_ready_1"),
    "\n  UNION ALL ",
    ready_branch!("2", "job_ready_2"),
    "\n  UNION ALL ",
    ready_branch!("3", "job_ready_3"),
    "\n  UNION ALL ",
    ready_branch!("4", "job_ready_inbox"),
    ready_peek_tail!()
);

/// [`READY_PEEK`] within one priority level of the queue: what an aging
/// claim reads of each level (within a level the claim order is also the
/// order by effective priority). Binds: now, then queue, priority and
/// limit for each of the five sources, then queue.
pub(crate) const READY_PEEK_LEVEL: &str = concat!(
    ready_peek_head!(),
    ready_level_branch!("0", "job_ready_0"),
    "\n  UNION ALL ",
    ready_level_branch!("1", "job_ready_1"),
    "\n  UNION ALL ",
    ready_level_branch!("2", "job_ready_2"),
    "\n  UNION ALL ",
    ready_level_branch!("3", "job_ready_3"),
    "\n  UNION ALL ",
    ready_level_branch!("4", "job_ready_inbox"),
    ready_peek_tail!()
);

/// The highest priority level below a bound among a queue's ring entries
/// (stale ones included), over the five sources: one probe of each
/// source's primary key, a step of an aging claim's walk over the levels.
/// Binds: queue and bound for each of the five sources.
pub(crate) const READY_LEVEL: &str = concat!(
    "SELECT MAX(l.priority) AS priority FROM (",
    ready_next_level!("job_ready_0"),
    "\n  UNION ALL ",
    ready_next_level!("job_ready_1"),
    "\n  UNION ALL ",
    ready_next_level!("job_ready_2"),
    "\n  UNION ALL ",
    ready_next_level!("job_ready_3"),
    "\n  UNION ALL ",
    ready_next_level!("job_ready_inbox"),
    ") l"
);

/// The highest priority below a bound among a queue's scheduled jobs (the
/// unleased ones written not due yet): one step of the walk over their
/// priority levels, one probe of `job_queue_scheduled`. Binds: queue,
/// bound.
pub(crate) const SCHEDULED_LEVEL: &str = "
SELECT priority FROM job_queue FORCE INDEX (job_queue_scheduled)
WHERE queue_name = ? AND is_scheduled = 1 AND priority < ?
ORDER BY priority DESC
LIMIT 1";

/// A queue's due scheduled jobs at one priority, in claim order, shaped as
/// [`READY_PEEK`]'s rows: a range of `job_queue_scheduled` that ends at the
/// first job not due yet. Its only stepped-over entries are those of
/// scheduled jobs claimed since purge last ran. Nothing on a paused
/// queue. Binds: queue, priority, now, queue, limit.
pub(crate) const SCHEDULED_DUE: &str = "
SELECT CAST(5 AS SIGNED) AS src, id, priority, available_at, group_key,
       CAST(1 AS SIGNED) AS claimable, CAST(0 AS SIGNED) AS stale
FROM job_queue FORCE INDEX (job_queue_scheduled)
WHERE queue_name = ? AND is_scheduled = 1 AND priority = ?
  AND available_at <= COALESCE(?, UTC_TIMESTAMP(6))
  AND attempts < max_attempts
  AND NOT EXISTS (SELECT 1 FROM queue_config p WHERE p.queue_name = ? AND p.paused)
ORDER BY available_at, id
LIMIT ?";

/// Deletes a source's entries by job id (a claim's leased and stale ones).
/// Binds: the ids.
pub(crate) fn ready_delete(source: u8, ids: usize) -> String {
    format!(
        "DELETE FROM {} WHERE id IN {}",
        ready_table(source),
        placeholders(ids)
    )
}

/// The entries of jobs an enqueue wrote due, into `slot`.
/// Binds: id, queue, priority, available_at per row.
pub(crate) fn ready_insert(slot: u8, rows: usize) -> String {
    format!(
        "INSERT INTO {} (id, queue_name, priority, available_at) VALUES {}",
        ready_table(slot),
        super::tuples(rows, 4)
    )
}

/// The current slot.
pub(crate) const RING_SLOT: &str = "SELECT slot FROM queue_ready_ring WHERE one_row = 0";

/// What the rotation decides on: the current slot, how long it has been
/// current (ms, on the server's clock, whatever the storage's clock), and
/// how many jobs were inserted since (by id).
pub(crate) const RING_STATE: &str = "
SELECT r.slot, r.rotated_id,
       CAST(TIMESTAMPDIFF(MICROSECOND, r.rotated_at, UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS age_ms,
       (SELECT COALESCE(MAX(id), 0) FROM job_queue) AS max_id
FROM queue_ready_ring r WHERE r.one_row = 0";

/// One rotation per database at a time: a named lock, not waited for.
pub(crate) const RING_LOCK: &str =
    "SELECT CAST(GET_LOCK(CONCAT('queue_ready_rotate:', DATABASE()), 0) AS SIGNED) AS locked";

/// Releases [`RING_LOCK`].
pub(crate) const RING_UNLOCK: &str = "DO RELEASE_LOCK(CONCAT('queue_ready_rotate:', DATABASE()))";

/// The stale entries of a slot (see [`READY_PEEK`]), read without locks
/// before the rotation locks the slot. Binds: limit.
pub(crate) fn ring_stale(slot: u8) -> String {
    format!(
        "SELECT e.id FROM {} e LEFT JOIN job_queue j FORCE INDEX (PRIMARY) ON j.id = e.id \
         WHERE j.id IS NULL OR j.lease_until IS NOT NULL OR j.attempts >= j.max_attempts \
            OR j.queue_name <> e.queue_name OR j.priority <> e.priority \
            OR j.available_at <> e.available_at \
         LIMIT ?",
        ready_table(slot)
    )
}

/// Locks the slot to empty, and the slot its entries move to if any, for
/// the session (`LOCK TABLES`): it waits for the transactions that hold
/// either (an enqueue not yet committed that wrote there, a claim reading
/// them) and makes every new one wait until [`RING_TABLES_UNLOCK`].
/// MariaDB gives up at once (`NOWAIT`) if they are held; MySQL 8 has no
/// `NOWAIT` here and waits its session's `lock_wait_timeout`, which the
/// rotation sets to its minimum, a second.
pub(crate) fn ring_lock_tables(empty: u8, into: Option<u8>, mariadb: bool) -> String {
    format!(
        "LOCK TABLES {} WRITE{}{}",
        ready_table(empty),
        into.map(|into| format!(", {} WRITE", ready_table(into)))
            .unwrap_or_default(),
        if mariadb { " NOWAIT" } else { "" }
    )
}

/// Releases [`ring_lock_tables`].
pub(crate) const RING_TABLES_UNLOCK: &str = "UNLOCK TABLES";

/// How many entries a locked slot holds, counted up to a bound.
/// Binds: the bound.
pub(crate) fn ring_count(slot: u8) -> String {
    format!(
        "SELECT CAST(COUNT(*) AS SIGNED) AS n FROM (SELECT id FROM {} LIMIT ?) c",
        ready_table(slot)
    )
}

/// Moves a locked slot's entries into another locked slot (an entry the
/// job has there already wins: it is the newer).
pub(crate) fn ring_move(from: u8, into: u8) -> String {
    format!(
        "INSERT IGNORE INTO {} (id, queue_name, priority, available_at) \
         SELECT id, queue_name, priority, available_at FROM {}",
        ready_table(into),
        ready_table(from)
    )
}

/// Empties a locked slot, its deleted entries with the rest.
pub(crate) fn ring_truncate(slot: u8) -> String {
    format!("TRUNCATE TABLE {}", ready_table(slot))
}

/// On Galera (where the rotation neither locks tables nor truncates): a
/// slot's entries past an id, in id order (`job_ready_id`). Binds: the id,
/// the limit.
pub(crate) fn ring_entries_after(slot: u8) -> String {
    format!(
        "SELECT id FROM {} FORCE INDEX (job_ready_id) WHERE id > ? ORDER BY id LIMIT ?",
        ready_table(slot)
    )
}

/// On Galera: copies the named entries of a slot into another (an entry
/// the job has there already wins: it is the newer). Binds: the ids.
pub(crate) fn ring_move_ids(from: u8, into: u8, ids: usize) -> String {
    format!(
        "INSERT IGNORE INTO {} (id, queue_name, priority, available_at) \
         SELECT id, queue_name, priority, available_at FROM {} WHERE id IN {}",
        ready_table(into),
        ready_table(from),
        placeholders(ids)
    )
}

/// Makes a slot current. Binds: slot, the highest job id read before.
pub(crate) const RING_ROTATED: &str = "
UPDATE queue_ready_ring SET slot = ?, rotated_at = UTC_TIMESTAMP(6), rotated_id = ?
WHERE one_row = 0";

/// Whether the server is MariaDB (its `LOCK TABLES` takes `NOWAIT`).
pub(crate) const SERVER_IS_MARIADB: &str =
    "SELECT CAST(VERSION() LIKE '%MariaDB%' AS SIGNED) AS mariadb";
