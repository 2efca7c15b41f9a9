//! The statements by lease: `ack`, `nack`, `release`, `heartbeat`, `snooze`.

/// Archives every input lease that is current as `completed`; returns the
/// leases that matched.
///
/// The statements by lease ([`ACK`], [`NACK`], [`RELEASE`], [`SNOOZE`],
/// [`HEARTBEAT`]) and the claim's lease ([`DEQUEUE_LEASE`](super::DEQUEUE_LEASE)) are functions
/// of migration 0009, whose settings leave the planner only the primary
/// key of `job_queue`: as plain statements, a connection's generic plan
/// made while the table was small (a new schema, or a table autovacuum had
/// just found empty) read the whole table on every call once it had grown
/// (docs/operations.md, "The first minute's stall"). A lease is fenced by
/// (id, locked_by, attempts): `locked_by` set means `lease_until` is set
/// (constraint `job_queue_lease_has_holder`), so they never say
/// `lease_until IS NOT NULL` (the predicate of `job_queue_leased`, whose
/// whole-index bitmap scan once priced like one row: "The ack that read
/// every lease").
pub(super) const ACK: &str = "
SELECT acked_id AS id, acked_by AS processed_by, acked_attempt AS attempts
FROM {s}.queue_ack($1::timestamptz, $2::bigint[], $3::text[], $4::int[], $5::jsonb[])";

/// Retries ($6 and attempts left, after $7 microseconds) or dead-letters
/// (error $5) the lease ($2, $3, $4) if current.
pub(super) const NACK: &str = "
SELECT retry_at, dead_lettered
FROM {s}.queue_nack($1::timestamptz, $2::bigint, $3::text, $4::int, $5::jsonb, $6::boolean,
                    $7::bigint)";

/// Gives a current lease back without counting its attempt (one row if it
/// was current).
pub(super) const RELEASE: &str = "
SELECT released_id FROM {s}.queue_release($1::timestamptz, $2::bigint, $3::text, $4::int)";

/// Extends every input lease that is current and unexpired by $5
/// microseconds; returns those.
pub(super) const HEARTBEAT: &str = "
SELECT beat_id, beat_by, beat_attempt
FROM {s}.queue_heartbeat($1::timestamptz, $2::bigint[], $3::text[], $4::int[], $5::bigint)";

/// Puts a current lease's job off by $5 microseconds without counting the
/// attempt; returns its new `available_at`.
pub(super) const SNOOZE: &str = "
SELECT snoozed_until
FROM {s}.queue_snooze($1::timestamptz, $2::bigint, $3::text, $4::int, $5::bigint)";
