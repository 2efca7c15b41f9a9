//! The statements of `Storage::dequeue` (the plain and the limited claim, over
//! one queue or several), of `next_due`, and the ready ring's rotation.

/// Up to `{cap}` claimable jobs of queue `{queue}` in claim order, locked
/// unless `{lock}` is FALSE: `queue_pick` (migration 0011, first written in
/// 0007). The jobs that were due when written come from the ready ring
/// (`job_ready`, one ordered scan over its slots, each entry checked
/// against its job by primary key), so a claim never steps over the index
/// entries of jobs claimed since the last VACUUM; the jobs written with a
/// future time come from `job_queue_scheduled`, priority by priority (a
/// skip-scan), each level's due jobs as a range scan that ends at the
/// first job not due yet. The two parts are merged in claim order. In a
/// function because its settings (no bitmap scan, no sequential scan, no
/// sort below the merge) leave the planner that one plan when the
/// statistics say the table is empty, as they often do for a queue (the
/// migrations say more).
///
/// The function's rows are in claim order and stop at `{cap}`. (The order
/// of the claimed jobs is restored after RETURNING anyway; the conformance
/// suite checks which are taken.) Each carries the ring slot its entry was
/// read from (NULL for a scheduled job: migration 0011), for the lease to
/// delete the entry from that partition alone.
pub(super) const DEQUEUE_PICK: &str = "
        SELECT p.pick_id AS id, p.pick_priority AS priority, p.pick_available_at AS available_at,
               p.pick_slot AS slot
        FROM {s}.{pick_function}({queue}, {cap}, COALESCE($1::timestamptz, now()), {lock}{group_args}) p";

/// The plain claim's pick function: [`DEQUEUE_PICK`] without group limits.
const PICK_PLAIN: (&str, &str) = ("queue_pick", "");

/// The limited claim's pick function: `queue_pick_limited` (its overload
/// of migration 0020), which is `queue_pick` for a queue without group
/// limits, aging or fair groups, otherwise keeps each group within its
/// slots, orders an aging queue's jobs by effective priority (its
/// `pick_priority`) and a fair queue's in its fair order, given whether
/// the queue has group limits (`{grouped}`), its group concurrency
/// (`{group_default}`), its aging period in ms (`{aging}`) and whether
/// its groups are fair (`{fair}`), all from `limits`.
const PICK_LIMITED: (&str, &str) = (
    "queue_pick_limited",
    ", {grouped}, {group_default}, {aging}, {fair}",
);

/// [`DEQUEUE_PICK`] with each job's place in its queue's claim order
/// (`rank`, from 1): the limited claim's, whose picks are not always in
/// the order of the contract's key (a fair queue's).
const DEQUEUE_PICK_RANKED: &str = "
        SELECT p.pick_id AS id, p.pick_priority AS priority, p.pick_available_at AS available_at,
               p.pick_slot AS slot, p.rank
        FROM {s}.{pick_function}({queue}, {cap}, COALESCE($1::timestamptz, now()), {lock}{group_args})
             WITH ORDINALITY AS p(pick_id, pick_priority, pick_available_at, pick_slot, rank)";

/// The one-queue claim's cap: $3 behind a subquery, so that the planner
/// prices every call alike and keeps the generic plan. Bound as such, a
/// small $3 (a worker with one or two free slots) makes each custom plan
/// look cheaper than the generic one, and the claim was planned again on
/// every call (0.5-0.7 ms of planning for a claim that runs in about as
/// much).
pub(super) const ONE_QUEUE_CAP: &str = "(SELECT $3::bigint)";

/// Picks up to $3 claimable jobs of the one queue in $2 ([`DEQUEUE_PICK`]).
pub(super) const DEQUEUE_ONE_QUEUE: &str = "
WITH {limits}picked AS (
    SELECT c.id, c.slot FROM ({pick}) c
    WHERE NOT EXISTS (SELECT 1 FROM {s}.queue_config p
                       WHERE p.queue_name = ($2::text[])[1] AND p.paused)
)";

/// Picks up to $3 claimable jobs of the queues in $2: per queue the best
/// (its cap in $6, aligned with $2) by [`DEQUEUE_PICK`], then the best $3
/// of those (a sort of at most the sum of the caps).
pub(super) const DEQUEUE_MANY_QUEUES: &str = "
WITH {limits}picked AS (
    SELECT c.id, c.slot
    FROM {queues}
    CROSS JOIN LATERAL ({pick}) c
    WHERE NOT EXISTS (SELECT 1 FROM {s}.queue_config p WHERE p.queue_name = q.name AND p.paused)
    ORDER BY c.priority DESC, c.available_at, c.id
    LIMIT $3
)";

/// [`DEQUEUE_MANY_QUEUES`] when the caps add up to more than $3: the
/// per-queue scans only read (a scan that locked its cap would hold locks
/// on jobs the final LIMIT drops, and a concurrent claim would skip them
/// for worse ones), and the best $3 still claimable are locked last.
pub(super) const DEQUEUE_MANY_QUEUES_OVER: &str = "
WITH {limits}candidates AS (
    SELECT c.id, c.slot
    FROM {queues}
    CROSS JOIN LATERAL ({pick_unlocked}) c
    WHERE NOT EXISTS (SELECT 1 FROM {s}.queue_config p WHERE p.queue_name = q.name AND p.paused)
),
picked AS (
    SELECT j.id, (SELECT c.slot FROM candidates c WHERE c.id = j.id LIMIT 1) AS slot
    FROM {s}.job_queue j
    WHERE j.id = ANY(ARRAY(SELECT id FROM candidates))
      AND j.lease_until IS NULL
      AND j.available_at <= COALESCE($1::timestamptz, now())
      AND j.attempts < j.max_attempts
    ORDER BY j.priority DESC, j.available_at, j.id
    LIMIT $3
    FOR UPDATE OF j SKIP LOCKED
)";

/// The limited claim of one queue: its pick ([`DEQUEUE_PICK_RANKED`]) in
/// its order.
const LIMITED_ONE_QUEUE: &str = "
WITH {limits}picked AS (
    SELECT c.id, c.slot, c.rank AS merge_rank, c.rank FROM ({pick}) c
    WHERE NOT EXISTS (SELECT 1 FROM {s}.queue_config p
                       WHERE p.queue_name = ($2::text[])[1] AND p.paused)
)";

/// The limited claim's candidates from the queues in `limits`, each
/// queue's ([`DEQUEUE_PICK_RANKED`], `{pick}` or `{pick_unlocked}`) in its
/// claim order, and `merged`: their merge, the contract's (the next job
/// is the best by effective priority, available_at, id of each queue's
/// next one), as `(merge_rank, rank)`. A job comes out of such a merge
/// when the worst key of its queue up to it is the best left, so
/// `merge_rank` is that worst key's place among all candidates (a queue
/// whose pick is in key order has each job's own place).
const LIMITED_CANDIDATES: &str = "candidates AS (
    SELECT c.id, c.slot, c.priority, c.available_at, c.rank, q.name
    FROM {queues}
    CROSS JOIN LATERAL ({pick}) c
    WHERE NOT EXISTS (SELECT 1 FROM {s}.queue_config p WHERE p.queue_name = q.name AND p.paused)
),
merged AS (
    SELECT k.id, k.slot, k.rank,
           max(k.key_rank) OVER (PARTITION BY k.name ORDER BY k.rank) AS merge_rank
    FROM (SELECT c.*, row_number() OVER (ORDER BY c.priority DESC, c.available_at, c.id)
                 AS key_rank
          FROM candidates c) k
)";

/// The limited claim of several queues whose caps add up to at most $3:
/// each pick locks what it returns, and the merge keeps them all.
const LIMITED_MANY_QUEUES: &str = "
WITH {limits}{candidates},
picked AS (
    SELECT m.id, m.slot, m.merge_rank, m.rank FROM merged m
    ORDER BY m.merge_rank, m.rank
    LIMIT $3
)";

/// [`LIMITED_MANY_QUEUES`] when the caps add up to more than $3: the
/// picks only read, and the best $3 of the merge still claimable are
/// locked last (as [`DEQUEUE_MANY_QUEUES_OVER`]).
const LIMITED_MANY_QUEUES_OVER: &str = "
WITH {limits}{candidates},
picked AS (
    SELECT j.id,
           (SELECT m.slot FROM merged m WHERE m.id = j.id LIMIT 1) AS slot,
           (SELECT m.merge_rank FROM merged m WHERE m.id = j.id LIMIT 1) AS merge_rank,
           (SELECT m.rank FROM merged m WHERE m.id = j.id LIMIT 1) AS rank
    FROM {s}.job_queue j
    WHERE j.id = ANY(ARRAY(SELECT id FROM merged))
      AND j.lease_until IS NULL
      AND j.available_at <= COALESCE($1::timestamptz, now())
      AND j.attempts < j.max_attempts
    ORDER BY merge_rank, rank
    LIMIT $3
    FOR UPDATE OF j SKIP LOCKED
)";

/// Leases the picked jobs for $4 microseconds to worker $5, through
/// `queue_lease` (migration 0011, first written in 0009), which reads them
/// by primary key however small the statistics say `job_queue` is, and
/// deletes their ring entries from the slots the pick read them in; the
/// ids and slots go in as arrays, built from `picked`. `{commit}` is [`ASYNC_COMMIT`] for a storage
/// with asynchronous claims, else nothing.
pub(super) const DEQUEUE_LEASE: &str = "
SELECT {job}
FROM {s}.queue_lease(ARRAY(SELECT id FROM picked), $1::timestamptz, $4::bigint, $5::text,
                     ARRAY(SELECT DISTINCT slot FROM picked WHERE slot IS NOT NULL)){commit}";

/// Makes the claim's transaction commit without waiting for its WAL to
/// reach the disk (`SET LOCAL synchronous_commit = off`, as a join the
/// statement evaluates once): `PgStorage::with_async_claims`.
pub(super) const ASYNC_COMMIT: &str = "
CROSS JOIN (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit";

/// Microseconds until the earliest unleased job of the queues in $2 that is
/// not due yet: per queue `queue_next_due` (migration 0007), a skip-scan
/// from one distinct priority to the next (one index probe each) and the
/// first future available_at within each (one more probe), a few lookups
/// whatever the backlog (a plain min(available_at) would read every
/// waiting row of the queue, the index ordering by priority first). In a
/// function, as the claim's pick, so that statistics saying the table is
/// empty cannot turn the probes into a scan and sort of the whole queue.
pub(super) const NEXT_DUE: &str = "
SELECT (EXTRACT(EPOCH FROM min({s}.queue_next_due(q.name, COALESCE($1::timestamptz, now())))
                - COALESCE($1::timestamptz, now())) * 1000000)::bigint
FROM unnest($2::text[]) AS q(name)";

/// The queues whose claims are limited (what `LimitedQueues` remembers),
/// each with whether its only limits are its groups' ([`GROUPS_ONLY`]).
pub(super) const LIMITED_QUEUES: &str = "
SELECT queue_name, {groups_only} AS groups_only FROM {s}.queue_config c
WHERE {limited}";

/// The config rows whose only claim limits are their groups': a group
/// concurrency or a group's own limit, and no concurrency, rate, aging
/// period or fair groups. [`DEQUEUE_GROUPED_ONE_QUEUE`] claims such a
/// queue.
pub(super) const GROUPS_ONLY: &str = "(c.concurrency_limit IS NULL AND c.rate_per_second IS NULL
       AND c.priority_aging_ms IS NULL AND NOT c.fair_groups
       AND (c.group_concurrency_limit IS NOT NULL OR c.group_limits > 0))";

/// The claim of one queue whose only limits are its groups' (as the
/// handle remembers them, [`GROUPS_ONLY`]): its config row locked, which
/// makes the queue's claims take turns (as the limited claim's
/// [`LOCKED`]), then `queue_pick_grouped` (migration 0024), whose own
/// snapshot, taken after the lock, counts each group's leases, then
/// [`DEQUEUE_LEASE`]. None of the limited claim's caps, buckets, turns or
/// merge: this is what makes a grouped drain cost little more than a plain
/// one. The row is locked only while it is still groups only; otherwise
/// nothing is claimed and the one row returned says `stale` (the handle
/// remembered a config another handle changed since), and the caller
/// takes the limited claim instead. Every other outcome returns the
/// claimed jobs, or one row of NULLs when there is none, with `stale`
/// false.
pub(super) const DEQUEUE_GROUPED_ONE_QUEUE: &str = "
WITH locked AS MATERIALIZED (
    SELECT c.group_concurrency_limit, c.paused
    FROM {s}.queue_config c
    WHERE c.queue_name = ($2::text[])[1]
      AND {groups_only}
    FOR UPDATE OF c
),
picked AS (
    SELECT g.pick_id AS id, g.pick_slot AS slot
    FROM locked l
    CROSS JOIN LATERAL {s}.queue_pick_grouped(($2::text[])[1], {cap},
                                              COALESCE($1::timestamptz, now()),
                                              l.group_concurrency_limit) g
    WHERE NOT l.paused
)
SELECT k.*, o.stale
FROM (SELECT NOT EXISTS (SELECT 1 FROM locked) AS stale) o
LEFT JOIN ({lease}) k ON TRUE";

/// The config rows that make a queue's claims limited: a concurrency, a
/// rate, a group concurrency, a group's own limit (`group_limits`, the
/// count of the queue's rows in `queue_group_limit`, kept by a trigger:
/// migration 0016), a priority aging period (migration 0018) or fair
/// groups (migration 0020): the last two change the claim's order. Columns of the row alone: a subquery here made the
/// limited claim's generic plan look dearer than its custom ones, and it
/// was planned again on every call.
pub(super) const LIMITED: &str = "(c.concurrency_limit IS NOT NULL OR c.rate_per_second IS NOT NULL
       OR c.group_concurrency_limit IS NOT NULL OR c.group_limits > 0
       OR c.priority_aging_ms IS NOT NULL OR c.fair_groups)";

/// The queues a claim takes from and their caps: $2 and $6 as given, for
/// the plain claim ([`DEQUEUE_MANY_QUEUES`], [`DEQUEUE_MANY_QUEUES_OVER`]),
/// through `queue_claim_queues` (migration 0006: `unnest` planned as one
/// row, so that the statement's generic plan is kept).
pub(super) const QUEUES_AS_GIVEN: &str =
    "{s}.queue_claim_queues($2::text[], $6::bigint[]) AS q(name, cap)";

/// The limited claim's caps: [`LIMITS_MANY`]' `limits`.
pub(super) const QUEUES_LIMITED: &str =
    "limits AS q(name, cap, grouped, group_default, aging, fair)";

/// The limited claim's first CTEs: lock the config rows of the limited
/// queues among $2 in name order (so concurrent claims over several
/// queues never deadlock); count each one's held leases up to its
/// concurrency limit with `queue_held_leases` (migration 0006: a VOLATILE
/// function's query takes its own snapshot, after the lock, so it sees
/// every claim that committed while this one waited; a query of this
/// statement would not); refill each rate-limited queue's bucket on the
/// database clock (`queue_core::Bucket::refill`: a missing bucket is
/// full, a clock that went back adds nothing). Then `limits`
/// ([`LIMITS_ONE`], [`LIMITS_MANY`]) narrows the caps to what both limits
/// allow (`queue_core::QueueLimits::allowance`).
pub(super) const LOCKED: &str = "locked AS MATERIALIZED (
    SELECT c.queue_name, c.concurrency_limit, c.rate_per_second, c.rate_burst, c.tokens,
           c.refilled_at, c.group_concurrency_limit, c.priority_aging_ms, c.fair_groups,
           c.claim_count, (c.group_concurrency_limit IS NOT NULL OR c.group_limits > 0) AS grouped
    FROM {s}.queue_config c
    WHERE c.queue_name = ANY($2::text[])
      AND {limited}
    ORDER BY c.queue_name COLLATE \"C\"
    FOR UPDATE OF c
),
buckets AS MATERIALIZED (
    SELECT l.queue_name, l.concurrency_limit, l.grouped, l.group_concurrency_limit,
           l.priority_aging_ms, l.fair_groups, l.claim_count,
           CASE WHEN l.concurrency_limit IS NOT NULL
                THEN {s}.queue_held_leases(l.queue_name, l.concurrency_limit) END AS held,
           CASE WHEN l.rate_per_second IS NULL THEN NULL
                WHEN l.tokens IS NULL OR l.refilled_at IS NULL THEN l.rate_burst::float8
                ELSE GREATEST(LEAST(l.tokens + l.rate_per_second * GREATEST(
                         EXTRACT(EPOCH FROM COALESCE($1::timestamptz, now()) - l.refilled_at)::float8, 0),
                     l.rate_burst::float8), 0) END AS tokens,
           GREATEST(COALESCE($1::timestamptz, now()), l.refilled_at) AS refilled_at
    FROM locked l
),
";

/// The one queue's cap: $3 narrowed by its limits (none when it has no
/// `buckets` row), never below 0.
pub(super) const LIMITS_ONE: &str = "limits AS MATERIALIZED (
    SELECT GREATEST(LEAST($3::bigint, b.concurrency_limit - b.held,
                          floor(b.tokens + 1e-9)::bigint), 0) AS cap,
           COALESCE(b.grouped, FALSE) AS grouped, b.group_concurrency_limit AS group_default,
           b.priority_aging_ms AS aging, COALESCE(b.fair_groups, FALSE) AS fair
    FROM (SELECT 1) o LEFT JOIN buckets b ON TRUE
),
";

/// Each queue's cap in $6 narrowed by its limits (queues without a
/// `buckets` row keep theirs), dropping the queues left with none (the
/// queues through `queue_claim_queues`, as in [`QUEUES_AS_GIVEN`]).
pub(super) const LIMITS_MANY: &str = "limits AS MATERIALIZED (
    SELECT name, cap, grouped, group_default, aging, fair FROM (
        SELECT q.name, LEAST(q.cap, b.concurrency_limit - b.held,
                             floor(b.tokens + 1e-9)::bigint) AS cap,
               COALESCE(b.grouped, FALSE) AS grouped, b.group_concurrency_limit AS group_default,
               b.priority_aging_ms AS aging, COALESCE(b.fair_groups, FALSE) AS fair
        FROM {s}.queue_claim_queues($2::text[], $6::bigint[]) AS q(name, cap)
        LEFT JOIN buckets b ON b.queue_name = q.name
    ) n
    WHERE cap > 0
),
";

/// The limited claim's end: [`DEQUEUE_LEASE`] as the CTE `claimed`, then,
/// under the lock taken in [`LOCKED`], the buckets of rate-limited queues
/// stored less what the claim took (`queue_core::Bucket::after`) and the
/// claim count of fair queues advanced by it, and each fair queue's
/// groups' turns (`queue_core::backend::FairTurn`): the `nth` job of a
/// group the claim took counts towards its weight `w` from `start` (the
/// jobs it had taken, at most `w - 1`), so it moves the group's turn to
/// the claim count at that job when `(start + nth) % w = 0` (every job,
/// at weight 1), and the group is left with `(start + n) % w` taken of
/// its `n` jobs; a turn not moved stays (`GREATEST`: a moved one is above
/// every stored one). `start` and `w` come from `queue_fair_state`
/// (migration 0021), whose own snapshot sees what the claim that held the
/// lock before this one wrote. Each claimed job comes with
/// `claim_rank`, its place in the claim's order (`picked`'s merge), by
/// which the caller puts the rows in order.
pub(super) const CHARGE: &str = ",
claimed AS ({claim}),
charged AS (
    UPDATE {s}.queue_config c
    SET tokens = CASE WHEN b.tokens IS NULL THEN c.tokens
                      ELSE GREATEST(b.tokens - (SELECT count(*) FROM claimed k
                                                 WHERE k.queue_name = b.queue_name), 0) END,
        refilled_at = CASE WHEN b.tokens IS NULL THEN c.refilled_at ELSE b.refilled_at END,
        claim_count = c.claim_count
                      + CASE WHEN b.fair_groups THEN (SELECT count(*) FROM claimed k
                                                      WHERE k.queue_name = b.queue_name)
                             ELSE 0 END
    FROM buckets b
    WHERE c.queue_name = b.queue_name AND (b.tokens IS NOT NULL OR b.fair_groups)
),
turned AS (
    INSERT INTO {s}.job_group_turn AS g (queue_name, group_key, turn, taken)
    SELECT f.queue_name, f.group_key,
           COALESCE(max(f.turn) FILTER (WHERE (f.start + f.nth) % f.weight = 0), 0),
           (max(f.start) + count(*)) % max(f.weight)
    FROM (SELECT k.queue_name, COALESCE(k.group_key, '') AS group_key,
                 b.claim_count + row_number() OVER (PARTITION BY k.queue_name ORDER BY p.rank)
                     AS turn,
                 row_number() OVER (PARTITION BY k.queue_name, COALESCE(k.group_key, '')
                                    ORDER BY p.rank) AS nth,
                 w.state_weight AS weight,
                 LEAST(w.state_taken, w.state_weight - 1) AS start
          FROM claimed k
          JOIN picked p ON p.id = k.id
          JOIN buckets b ON b.queue_name = k.queue_name AND b.fair_groups
          CROSS JOIN LATERAL {s}.queue_fair_state(k.queue_name, COALESCE(k.group_key, '')) w) f
    GROUP BY f.queue_name, f.group_key
    ON CONFLICT (queue_name, group_key) DO UPDATE
        SET turn = GREATEST(g.turn, EXCLUDED.turn), taken = EXCLUDED.taken
)
SELECT k.*, row_number() OVER (ORDER BY p.merge_rank, p.rank) AS claim_rank
FROM claimed k JOIN picked p ON p.id = k.id";

/// Makes the ready ring's next slot current if the current one is $1 ms
/// old and holds $3 bytes, or is $2 ms old, waiting $4 ms for the next
/// slot's lock and moving at most $5 entries (`queue_ready_rotate`,
/// migration 0013; `ready_ring.rs`).
pub(super) const ROTATE_READY: &str =
    "SELECT {s}.queue_ready_rotate($1::bigint, $2::bigint, $3::bigint, $4::bigint, $5::bigint)";

/// A claim: `template` with [`DEQUEUE_PICK`] for the queue
/// and cap expressions given, then [`DEQUEUE_LEASE`].
pub(super) fn dequeue_plain(template: &str, queue: &str, cap: &str) -> String {
    let body = dequeue_template(template, DEQUEUE_PICK, PICK_PLAIN, queue, cap)
        .replace("{limits}", "")
        .replace("{queues}", QUEUES_AS_GIVEN);
    format!("{body}{DEQUEUE_LEASE}")
}

/// The claim of one groups-only queue: [`DEQUEUE_GROUPED_ONE_QUEUE`].
pub(super) fn dequeue_grouped_one_queue() -> String {
    DEQUEUE_GROUPED_ONE_QUEUE
        .replace("{cap}", ONE_QUEUE_CAP)
        .replace("{lease}", DEQUEUE_LEASE)
}

/// The limited claim of several queues: [`LIMITED_MANY_QUEUES`], or
/// [`LIMITED_MANY_QUEUES_OVER`] when `over`, with [`LOCKED`] and
/// [`LIMITS_MANY`] first, [`CHARGE`] last.
pub(super) fn dequeue_limited(over: bool) -> String {
    let (template, pick) = if over {
        (LIMITED_MANY_QUEUES_OVER, "{pick_unlocked}")
    } else {
        (LIMITED_MANY_QUEUES, "{pick}")
    };
    let template = template.replace("{candidates}", &LIMITED_CANDIDATES.replace("{pick}", pick));
    limited(&template, "q.name", "q.cap")
        .replace("{limits}", &format!("{LOCKED}{LIMITS_MANY}"))
        .replace("{queues}", QUEUES_LIMITED)
        .replace("{grouped}", "q.grouped")
        .replace("{group_default}", "q.group_default")
        .replace("{aging}", "q.aging")
        .replace("{fair}", "q.fair")
}

/// The limited claim of one queue: [`LIMITED_ONE_QUEUE`] with [`LOCKED`] and
/// [`LIMITS_ONE`] first, [`CHARGE`] last.
pub(super) fn dequeue_limited_one_queue() -> String {
    limited(
        LIMITED_ONE_QUEUE,
        "($2::text[])[1]",
        "(SELECT cap FROM limits)",
    )
    .replace("{limits}", &format!("{LOCKED}{LIMITS_ONE}"))
    .replace("{grouped}", "(SELECT grouped FROM limits)")
    .replace("{group_default}", "(SELECT group_default FROM limits)")
    .replace("{aging}", "(SELECT aging FROM limits)")
    .replace("{fair}", "(SELECT fair FROM limits)")
}

/// A limited claim: `template` with [`DEQUEUE_PICK_RANKED`] through
/// [`PICK_LIMITED`] for the queue and cap expressions given, then
/// [`CHARGE`].
fn limited(template: &str, queue: &str, cap: &str) -> String {
    let body = dequeue_template(template, DEQUEUE_PICK_RANKED, PICK_LIMITED, queue, cap);
    format!("{body}{}", CHARGE.replace("{claim}", DEQUEUE_LEASE))
}

/// `template` with the pick (`pick`, [`DEQUEUE_PICK`] or
/// [`DEQUEUE_PICK_RANKED`], through `function`, [`PICK_PLAIN`] or
/// [`PICK_LIMITED`], locking and not) for the queue and cap expressions
/// given.
pub(super) fn dequeue_template(
    template: &str,
    pick: &str,
    (function, group_args): (&str, &str),
    queue: &str,
    cap: &str,
) -> String {
    let pick = pick
        .replace("{pick_function}", function)
        .replace("{group_args}", group_args);
    template
        .replace("{pick}", &pick.replace("{lock}", "TRUE"))
        .replace("{pick_unlocked}", &pick.replace("{lock}", "FALSE"))
        .replace("{queue}", queue)
        .replace("{cap}", cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_limited_claim_fills_each_placeholder() {
        for statement in [
            dequeue_limited(false),
            dequeue_limited(true),
            dequeue_limited_one_queue(),
        ] {
            for placeholder in [
                "{pick",
                "{queue",
                "{cap}",
                "{grouped}",
                "{group_default}",
                "{aging}",
                "{fair}",
                "{limits}",
                "{candidates}",
                "{claim}",
            ] {
                assert!(
                    !statement.contains(placeholder),
                    "{placeholder}: {statement}"
                );
            }
            assert!(statement.contains("WITH ORDINALITY"), "{statement}");
        }
        assert!(dequeue_limited(true).contains("FOR UPDATE OF j SKIP LOCKED"));
    }
}
