//! Redis storage for the job queue (seed 004's delay-queue design): every
//! operation on a queue is one Lua script over sorted sets and hashes, so
//! it is atomic; the server's `TIME` is the clock; every key of a queue
//! carries the hash tag `{<queue>}`, so a queue's scripts run on one slot
//! of a Redis Cluster.
//!
//! # Key layout
//!
//! With namespace `ns` (default `queue`, see
//! [`RedisStorage::with_namespace`]) and `P` = `ns:{<queue>}` (the queue
//! name with `%`, `{`, `}` percent-escaped, so the tag is the whole name):
//!
//! | key | type | holds |
//! |---|---|---|
//! | `P:job:<id>` | hash | a live job: priority, payload, attempts, max_attempts, available_at, lease_until, locked_by, first_locked_at, last_error, unique_key, created_at, updated_at |
//! | `P:ready` | sorted set | pending jobs: score `-priority`, member `<available_at>:<id>` (19 zero-padded digits each), so rank order is priority descending, then available_at, then id, and each priority level's first member is its oldest pending job |
//! | `P:levels` | sorted set | the priority levels of `P:ready`: member the level's score, score its oldest available_at (kept by every script that adds to or takes from `P:ready`; stats read the oldest pending job from its first entry) |
//! | `P:delayed` | sorted set | scheduled jobs by available_at; due ones move to `P:ready` at the next claim (at most 10,000 per claim) |
//! | `P:leased` | sorted set | held jobs by lease_until (running, and stalled once past it) |
//! | `P:unique` | hash | unique key -> id of the live job holding it |
//! | `P:paused` | string | present while the queue is paused |
//! | `P:config` | hash | the queue's limits (`configure_queue`): concurrency, rate, burst, lease_ms, backoff_base_ms, backoff_min_ms, backoff_max_ms, backoff_jitter, and the token bucket (tokens, refilled_at); absent without limits |
//! | `P:schedules` | hash | periodic schedule name -> `<last fire>:<next fire>` (microseconds; next may be empty), kept with the queue of the schedule's job so that recording a fire and enqueueing its job are one script |
//! | `P:hist:<id>` | hash | a history row: the job's hash renamed at archive time (`first_locked_at` is its `started_at`), plus status, finished_at, result, processed_by |
//! | `P:hist:ids:<status>` | sorted sets | history ids per final status (score 0, lexical = numeric order) for paging; listings without a status merge the four |
//! | `P:hist:fin:<status>` | sorted sets | history ids per final status by finished_at, for pruning |
//! | `{ns}:queues`, `{ns}:queue_names` | hashes | queue name <-> index (the registry) |
//! | `{ns}:queue_seq`, `{ns}:job_seq` | strings | the last queue index and job sequence number given |
//! | `{ns}:layout` | string | the key layout version ([`LAYOUT_VERSION`]), set by [`RedisStorage::migrate`] (which upgrades layout 1: it also kept `P:ready_at`, pending jobs by available_at) |
//! | channel `ns:wakeups` | pub/sub | queue names, published by enqueue, resume, retry and configure |
//! | channel `ns:cancels` | pub/sub | ids of jobs discarded or cancelled (a worker running one stops) |
//!
//! A job hash's `snoozes` field is absent until the first snooze; history
//! statuses are `completed`, `dead_letter`, `discarded` and `cancelled`.
//! `P:config`, `P:schedules`, `snoozes` and the `cancelled` status came
//! with flow control (issue 15) and are additive: layout 1 still holds,
//! and data written before reads as "no limits, no snoozes".
//! `trace_context` (issue 34) is additive too: a job hash holds it only
//! when its enqueuer gave one (the stored form of
//! `queue_core::TraceContext`), and history keeps it as it keeps every
//! field, by renaming the hash.
//!
//! # Flow control
//!
//! The dequeue script enforces a queue's `P:config` limits in the claim
//! itself: the concurrency limit less the queue's held leases (the size of
//! `P:leased`: running and stalled jobs until reclaim), and the bucket's
//! whole tokens refilled on the clock, taking a token per claimed job; the
//! same arithmetic as `queue_core::QueueLimits::allowance`. One script per
//! queue, so no check-then-claim race, on a cluster too. A change made
//! through any storage binds the next claim.
//!
//! A job id is `sequence << 20 | queue index`: ids grow with enqueue order
//! across queues, and an id names its queue without a global lookup table
//! (so `get_job`, `ack` and friends go straight to the queue's slot). A
//! namespace holds at most 2^20 - 1 queues.
//!
//! # What spans several slots
//!
//! Operations on one queue are one script, atomic. Those over several
//! queues are not one atomic step on a cluster: a dequeue over several
//! queues peeks each queue's best jobs, then claims its share from each,
//! none worse than the worst it chose there (when a racing dequeuer took
//! some first, it peeks again, a few rounds at most, so it never takes a
//! worse job in place of a better one); reclaim and prune peek and take
//! their share the same way, by lease end and finish time; a batch enqueue into several queues
//! writes each queue's jobs in one script (all jobs are validated before
//! anything is written). Stats and history listings read each queue in
//! turn and merge.
//!
//! Operator listings and bulk actions: `list_jobs` reads every live id of
//! the selected queues in one script per queue (filtering by state at
//! now), so its cost grows with the queue's live jobs unless it is given
//! an id or a unique key; `run_now`, `discard_jobs` and
//! `retry_dead_letters` act on what the listing selected, one script per
//! queue or per job (each atomic, the batch not). `throughput` counts the
//! history's finish-time index per queue and minute inside the script.
//!
//! No path leaves a job exhausted (attempts used up, no lease): nack and
//! reclaim dead-letter such a job in the same script, so `stats` always
//! reports 0 exhausted jobs. Wake-ups on a cluster are read from the first
//! seed node (cluster pub/sub reaches every node); while it is down the
//! stream yields errors and workers poll.
//!
//! # Durability
//!
//! Redis acknowledges a write before it reaches disk unless the server
//! runs with `appendonly yes` and `appendfsync always`. With the default
//! `appendfsync everysec`, a server crash (not a client's) can lose about
//! the last second of acknowledged enqueues, acks and claims; a lost claim
//! makes its job claimable again (at-least-once still holds), a lost ack
//! runs the job again. With `appendfsync always` nothing acknowledged is
//! lost, at the cost of an fsync per write.

#![warn(missing_docs)]

mod admin;
mod complete;
mod dequeue;
mod enqueue;
mod error;
mod flow;
mod heartbeat;
mod inspect;
mod keys;
mod operate;
mod periodic;
mod reclaim;
mod rows;
mod scripts;
mod storage;
mod wakeups;

pub use error::{NodeError, interpret_error};
pub use storage::{DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_NAMESPACE, LAYOUT_VERSION, RedisStorage};

// The README's examples, compiled (and the runnable ones run) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
