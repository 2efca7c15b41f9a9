//! The `Storage` trait: the required core and the optional capabilities
//! ([`crate::Capability`]), each method with its contract.
//!
//! Each `# Contract` bullet is checked by a named case of `queue-testkit`'s
//! conformance suite. "Now" always means the storage's clock
//! ([`crate::Clock`]): the database's, or a manual one in tests.
//!
//! A lease is *current* while the live row still carries it: same job id,
//! `locked_by` equal to its worker id, `attempts` equal to its attempt, and
//! a `lease_until` set. Ack, nack and release need a current lease, even one
//! past its `lease_until` that no reclaim or other claim has taken yet: the
//! work is done and nobody else holds the job, so it is not thrown away.
//! Heartbeat needs a current lease that has not expired.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::{
    Ack, Capabilities, Capability, DequeueRequest, EnqueueOutcome, FinalStatus, GroupKey,
    GroupLimit, GroupWeight, HistoryFilter, HistoryPage, HistoryRecord, Job, JobFilter, JobId,
    JobLinks, JobPage, Lease, NackOutcome, NewJob, PeriodicFire, PruneRequest, QueueConfig,
    QueueLimits, QueueName, QueueSample, QueueStats, ReclaimOutcome, Result, Retry, ScheduleRecord,
    Throughput, Wakeups, WorkerId, WorkerInfo, WorkerRecord,
};

/// A place jobs live: the operations the worker, operators and tests use.
///
/// The core is required: `now`, `enqueue_batch`, `dequeue`, `next_due`,
/// `ack_batch`, `nack`, `release`, `heartbeat_batch`, `reclaim_stalled`,
/// `stats_capped`, `get_job`, `get_history` and `list_history`. The few
/// core methods with a default body (`enqueue`, `ack`, `heartbeat`, `stats`,
/// `list_dead_letters`) are correct compositions of required ones, not
/// placeholders: a backend may keep them, and overrides them only to save a
/// round trip.
///
/// Everything else belongs to a [`Capability`]. Its methods default to
/// [`crate::QueueError::NotSupported`]; a backend that implements one
/// overrides its methods and lists it in [`Storage::capabilities`]. A
/// capability added in a later release arrives the same way, so a backend
/// keeps compiling and keeps passing the conformance suite, which runs only
/// the cases of what [`Storage::capabilities`] declares.
#[async_trait]
pub trait Storage: Send + Sync + 'static {
    /// The optional capabilities this storage implements.
    ///
    /// # Contract
    /// - Every capability listed is implemented in full: its methods keep
    ///   their contract and never return `NotSupported`.
    /// - The same answer for the life of the storage.
    ///
    /// The default is [`Capabilities::CORE`]: nothing beyond the core.
    fn capabilities(&self) -> Capabilities {
        Capabilities::CORE
    }

    /// The storage's current time.
    ///
    /// # Contract
    /// - Returns the manual clock's time when one is set, else the database's.
    async fn now(&self) -> Result<DateTime<Utc>>;

    /// Adds one job.
    ///
    /// # Contract
    /// - Returns a new id; the job is pending (or scheduled when delayed) with
    ///   attempts 0, and its payload reads back equal as JSON.
    /// - A unique key already live in the same queue returns that job's id
    ///   with `existed = true` and writes nothing.
    /// - The same key in another queue, or no key, never collides.
    /// - A key is free again once its job is archived to history.
    /// - Invalid input returns [`crate::QueueError::InvalidInput`] naming the
    ///   field, and writes nothing.
    /// - The group key is stored with the job, read back by `get_job`,
    ///   `dequeue` and `list_jobs`, and kept in history. A storage that does
    ///   not declare [`Capability::GroupLimits`] refuses a job with a group
    ///   key with [`crate::QueueError::NotSupported`] and writes nothing.
    ///
    /// The default runs [`Storage::enqueue_batch`] with one job: correct as
    /// it is; override only to save work.
    async fn enqueue(&self, job: NewJob) -> Result<EnqueueOutcome> {
        self.enqueue_batch(vec![job])
            .await?
            .pop()
            .ok_or_else(|| crate::QueueError::backend("enqueue_batch returned no outcome"))
    }

    /// Adds many jobs in one round trip.
    ///
    /// # Contract
    /// - Returns one outcome per job, in input order, as if each were enqueued
    ///   in turn: a key repeated inside the batch yields the first job's id
    ///   with `existed = true` for the later ones.
    /// - If any job is invalid, returns the error and writes nothing.
    /// - With [`Capability::Dependencies`], a job naming dependencies
    ///   ([`crate::NewJob::depends_on`]: ids, or earlier jobs of the batch)
    ///   waits for those that are live (in any state, waiting included):
    ///   it is [`crate::JobState::Waiting`], with `available_at` at
    ///   [`crate::waiting_at`], and no claim takes it. A dependency in
    ///   history that completed counts as finished; one that finished
    ///   otherwise counts as finished if the job runs anyway
    ///   ([`crate::DependencyFailure::Run`]) and is refused otherwise
    ///   ([`crate::failed_dependency`]); an id neither live nor in history
    ///   is refused ([`crate::unknown_dependency`]); a dependency on a job
    ///   of the batch that does not come before it (the only way to make a
    ///   cycle), or more than [`crate::MAX_DEPENDENCIES`] in one call, is
    ///   refused: each `InvalidInput` (`depends_on`), nothing written. A job
    ///   with nothing left to wait for is enqueued as without dependencies.
    /// - When a waiting job's last dependency finishes, in the same
    ///   transaction as that finish (ack, nack, reclaim, discard, cancel,
    ///   through any handle), it gets `available_at` = the later of now and
    ///   the time it was enqueued for, and wakes workers as an enqueue
    ///   does. When a dependency finishes without completing and the job's
    ///   [`crate::DependencyFailure`] is `Cancel`, the job is archived as
    ///   `cancelled` with last error [`crate::dependency_failed`], and its
    ///   own dependants learn of it in the same transaction. Each finish of
    ///   a dependency counts once for each job waiting on it, however the
    ///   finishes race; a dead letter retried and finished again counts no
    ///   more.
    /// - With [`Capability::Batches`], a job joining a batch
    ///   ([`crate::NewJob::joins`]: the id of the batch's callback, see
    ///   [`crate::batch`]) that is written becomes one more dependency of
    ///   that callback, counted like the others, in the same transaction;
    ///   one that existed under its key does not join. A callback that is
    ///   not live and waiting (its jobs have all finished, so it was
    ///   released, or it never existed) refuses the call with
    ///   [`crate::batch_closed`], nothing written; a join racing the last
    ///   finish of a batch's jobs either joins first (the callback then
    ///   waits for it) or is refused, never neither.
    /// - A storage that does not declare [`Capability::Dependencies`]
    ///   refuses a job with a dependency with
    ///   [`crate::QueueError::NotSupported`] and writes nothing; one that
    ///   does not declare [`Capability::Batches`] refuses a job joining a
    ///   batch the same way.
    async fn enqueue_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<EnqueueOutcome>>;

    /// Claims up to `request.limit()` pending jobs.
    ///
    /// # Contract
    /// - Claims only pending jobs of the named, unpaused queues, ordered by
    ///   priority descending, then `available_at`, then id; returns them in
    ///   that order.
    /// - With [`Capability::PriorityAging`], on a queue whose
    ///   [`QueueLimits::priority_aging`] is a period `P`, "priority" in
    ///   that order (and in every bullet below) is the job's effective
    ///   priority `priority + floor((now - available_at) / P)`, saturating
    ///   at `i32::MAX` ([`crate::backend::aged_priority`]): `now` is the
    ///   storage's now at the claim (its clock, the manual one in tests),
    ///   `P` as stored (to the millisecond), and the wait counts from
    ///   `available_at`, so a retried, snoozed, released or reclaimed job
    ///   ages from when it last became due, not from its enqueue. A job
    ///   that has waited `k` whole periods is claimed before a job of `k`
    ///   levels more that became due later; ties of effective priority go
    ///   by `available_at`, then id. The stored priority never changes
    ///   (the claim answers it as stored). Queues without aging keep their
    ///   plain priority, in the same order, so jobs of an aging and a plain
    ///   queue named together compare by effective priority. Lifting the
    ///   setting restores the plain order at the next claim.
    /// - With [`Capability::FairGroups`], on a queue whose
    ///   [`QueueLimits::fair_groups`] is set, the queue's jobs are taken
    ///   as by claims of one job each, in turn: the next is the first, in
    ///   the order above, of the best priority's jobs of the group whose
    ///   *turn* is lowest (the first in the order above on a tie), skipping
    ///   full groups ([`crate::backend::fair_order`]). Jobs without a group
    ///   key are one group. A group's turn is 0 until a job of it is
    ///   claimed from the queue; each job a claim takes from the queue, in
    ///   the order the claim returns them, advances the queue's claim
    ///   count by one and sets its group's turn to it, through every
    ///   handle. So the groups with jobs waiting at the best priority are
    ///   served one job each, the one served longest ago first, then again
    ///   in the same turn; a group with nothing waiting keeps its old turn
    ///   and is served first when a job of it arrives; a group's first
    ///   waiting job is claimed after at most one job of each other group
    ///   at its priority. With [`Capability::GroupWeights`], a group given
    ///   a weight `w` ([`crate::GroupWeight`]) keeps its turn until it has
    ///   taken `w` jobs (counted across claims, [`crate::backend::FairTurn`]),
    ///   and the `w`-th sets its turn to the claim count as above: the
    ///   groups waiting at the best priority are then served `w` jobs each
    ///   per round, and a group's first waiting job is claimed after at
    ///   most the weights of the other groups at its priority (a changed
    ///   weight applies from the group's next job on). A claim naming several queues takes, job by job,
    ///   from the queue whose next job in its own order comes first in the
    ///   order of the first bullet (without fair groups, that is the first
    ///   bullet's order).
    /// - Takes at most `request.queue_limit(q)` jobs from each queue `q`
    ///   and at most `request.limit()` in all: the best jobs within those
    ///   caps.
    /// - Takes no more from a queue than its [`QueueLimits`] allow at now
    ///   ([`QueueLimits::allowance`]: its concurrency limit less the leases
    ///   its jobs hold, and its bucket's whole tokens), atomically with the
    ///   claim, and takes a token per claimed job from the bucket.
    /// - With [`Capability::GroupLimits`]: never leases a job whose group
    ///   already has its limit of jobs holding a lease in the queue (the
    ///   group's [`GroupLimit`], else the queue's
    ///   [`QueueLimits::group_concurrency`]), counting the leases taken
    ///   through every handle and the jobs of the claim itself, atomically
    ///   with the claim. It skips such a job and takes the next eligible
    ///   one, so a full group never stalls the other groups or the jobs
    ///   without a group.
    /// - Each claimed job gets `lease_until = now + lease`, `locked_by`,
    ///   `attempts + 1`, and `first_locked_at = now` only on its first claim.
    /// - Concurrent dequeuers never receive the same job while its lease is live.
    /// - Racing claims, on one handle or many, take each queue's jobs in
    ///   order: a claim never leaves a free job of a queue for a worse one
    ///   of the same queue. Across queues a claim looks at each queue's best
    ///   `request.queue_limit(q)` jobs (fewer when its limits allow fewer):
    ///   while other claims are taking all of those, it may take a worse
    ///   job of another queue, and the better one goes to the next claim.
    ///   (A claim that locked jobs it does not take would make racers skip
    ///   them for worse ones: [`DequeueRequest::over_subscribed`].)
    /// - Scheduled, running, stalled and exhausted jobs are not claimed.
    async fn dequeue(&self, request: &DequeueRequest) -> Result<Vec<Job>>;

    /// How long until the earliest scheduled job of `queues` is due: an
    /// idle worker sleeps that long instead of polling, so a delayed job
    /// starts within milliseconds of its time.
    ///
    /// # Contract
    /// - Considers the jobs of the named queues (paused ones included) that
    ///   nobody holds and whose `available_at` is later than now; jobs due
    ///   already are [`Storage::dequeue`]'s business and do not count.
    /// - Returns `available_at - now` of the earliest of them, whatever its
    ///   priority, or `None` when there is none.
    /// - Answers from an index in a few lookups, however many jobs wait.
    ///
    /// Required: a wrapper or backend that left this out would make every
    /// worker poll, and a default could not know the backend's index.
    async fn next_due(&self, queues: &[QueueName]) -> Result<Option<Duration>>;

    /// Completes a job: archives it as `completed` and deletes the live row.
    ///
    /// # Contract
    /// - Succeeds only for the current lease; otherwise (reclaimed, claimed
    ///   again, even by the same worker id, finished or discarded) returns
    ///   [`crate::QueueError::LeaseLost`] and changes nothing.
    /// - The history row holds `result`, attempts, `processed_by`,
    ///   `started_at` and `finished_at = now`.
    ///
    /// The default runs [`Storage::ack_batch`] with one ack: correct as it
    /// is; override only to save work.
    async fn ack(&self, lease: &Lease, result: Option<Value>) -> Result<()> {
        let acked = self
            .ack_batch(&crate::backend::one_ack(lease, result))
            .await?;
        crate::backend::acked_one(lease, &acked)
    }

    /// Completes many jobs in one round trip.
    ///
    /// # Contract
    /// - Returns, per input in order, true when acked and false when its
    ///   lease was lost (that job is left unchanged).
    async fn ack_batch(&self, acks: &[Ack]) -> Result<Vec<bool>>;

    /// Records a failed attempt.
    ///
    /// # Contract
    /// - Succeeds only for the current lease, else `LeaseLost`, nothing changed.
    /// - With attempts left and [`Retry::After`]`(d)`: releases the lease,
    ///   stores `error` as `last_error`, sets `available_at = now + d`.
    /// - With no attempts left, or [`Retry::Never`]: archives the job as
    ///   `dead_letter` with `error` as its last error.
    async fn nack(&self, lease: &Lease, error: Value, retry: Retry) -> Result<NackOutcome>;

    /// Puts a running job off for `delay` without counting the attempt: the
    /// handler's "not now".
    ///
    /// # Contract
    /// - For the current lease: clears the lease, decrements attempts, adds
    ///   one to `snoozes`, sets `available_at = now + delay`, keeps
    ///   `last_error`, and returns the new `available_at`.
    /// - For a lost lease: `LeaseLost`, nothing changed.
    /// - A delay above 100 years: `InvalidInput` (`delay`), nothing changed.
    ///
    /// Capability [`Capability::Snooze`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn snooze(&self, _lease: &Lease, _delay: Duration) -> Result<DateTime<Utc>> {
        Err(crate::QueueError::not_supported(
            Capability::Snooze,
            "snooze",
        ))
    }

    /// Gives a job back without counting the attempt (used at shutdown).
    ///
    /// # Contract
    /// - For the current lease: clears the lease, decrements attempts, makes
    ///   the job available now, and returns true.
    /// - For a lost lease: returns false and changes nothing.
    async fn release(&self, lease: &Lease) -> Result<bool>;

    /// Extends a live lease to `now + extend_by`.
    ///
    /// # Contract
    /// - Returns true and moves `lease_until` for the current, unexpired lease.
    /// - Returns false and changes nothing for an expired, foreign or
    ///   finished lease.
    ///
    /// The default runs [`Storage::heartbeat_batch`] with one lease: correct
    /// as it is; override only to save work.
    async fn heartbeat(&self, lease: &Lease, extend_by: Duration) -> Result<bool> {
        let alive = self
            .heartbeat_batch(std::slice::from_ref(lease), extend_by)
            .await?;
        Ok(alive.as_slice() == [true])
    }

    /// Extends many leases in one round trip.
    ///
    /// # Contract
    /// - Returns, per input in order, what [`Storage::heartbeat`] would.
    async fn heartbeat_batch(&self, leases: &[Lease], extend_by: Duration) -> Result<Vec<bool>>;

    /// Recovers jobs whose holder died.
    ///
    /// # Contract
    /// - Stalled jobs with attempts left return to pending (lease cleared,
    ///   available now, the expired attempt still counted).
    /// - Stalled jobs with no attempts left, and exhausted jobs, become dead letters.
    /// - A reclaimed stalled job's `last_error` becomes
    ///   `{"kind": "lease_expired", "worker_id": <holder>, "attempt": <n>}`;
    ///   an exhausted job keeps its own.
    /// - Oldest leases first (`lease_until`, then id); exhausted jobs after them.
    /// - Touches at most `limit` jobs per call (`1..=MAX_BATCH`).
    async fn reclaim_stalled(&self, limit: u32) -> Result<ReclaimOutcome>;

    /// Removes a live job, in any state, into history as `discarded`.
    ///
    /// # Contract
    /// - A holder's later ack, nack or heartbeat gets `LeaseLost` / false.
    /// - An unknown id returns [`crate::QueueError::NotFound`].
    ///
    /// Capability [`Capability::Discard`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn discard(&self, _id: JobId) -> Result<()> {
        Err(crate::QueueError::not_supported(
            Capability::Discard,
            "discard",
        ))
    }

    /// Cancels a live job, in any state: it moves into history as
    /// `cancelled`, and a worker running it is told to stop.
    ///
    /// # Contract
    /// - The job is in history with status `cancelled`, its key free again.
    /// - A holder's later ack, nack, snooze or heartbeat gets `LeaseLost` /
    ///   false and changes nothing.
    /// - Subscribers ([`Storage::subscribe`]) get
    ///   [`crate::Wakeup::Cancelled`] with its id soon after the commit, where
    ///   the storage has wake-ups.
    /// - An id that is not live returns [`crate::QueueError::NotFound`].
    ///
    /// Capability [`Capability::Cancel`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn cancel(&self, _id: JobId) -> Result<()> {
        Err(crate::QueueError::not_supported(
            Capability::Cancel,
            "cancel",
        ))
    }

    /// Puts a dead letter back into its queue with attempts reset to 0.
    ///
    /// # Contract
    /// - The job keeps its id, payload, priority and key, is pending now, and
    ///   leaves history.
    /// - An id that is not a dead letter returns `NotFound`; a unique key
    ///   live again in the queue returns [`crate::QueueError::Conflict`].
    ///
    /// Capability [`Capability::RetryDeadLetter`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn retry_dead_letter(&self, _id: JobId) -> Result<()> {
        Err(crate::QueueError::not_supported(
            Capability::RetryDeadLetter,
            "retry_dead_letter",
        ))
    }

    /// Deletes history rows finished before `now - older_than`.
    ///
    /// # Contract
    /// - Deletes only older rows, only of the given status if one is set, at
    ///   most `limit` per call, and returns how many it deleted.
    ///
    /// Capability [`Capability::PruneHistory`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn prune_history(&self, _request: &PruneRequest) -> Result<u64> {
        Err(crate::QueueError::not_supported(
            Capability::PruneHistory,
            "prune_history",
        ))
    }

    /// Counts live jobs per queue by derived state, each count up to
    /// [`crate::DEFAULT_COUNT_CAP`]: [`Storage::stats_capped`] with that cap.
    ///
    /// The default is that composition, correct as it is.
    async fn stats(&self) -> Result<Vec<QueueStats>> {
        self.stats_capped(crate::DEFAULT_COUNT_CAP).await
    }

    /// Counts live jobs per queue by derived state, each count up to `cap`.
    ///
    /// # Contract
    /// - One entry per queue that has live jobs or is paused, sorted by queue name.
    /// - Each count is the number of the queue's live jobs in that state
    ///   ([`crate::derive_state`] at now), or `cap` when there are at least
    ///   `cap`; every entry's [`QueueStats::cap`] is `Some(cap)`.
    /// - The oldest pending age is exact, whatever the cap.
    /// - A cap of 0 is rejected and reads nothing.
    async fn stats_capped(&self, cap: u64) -> Result<Vec<QueueStats>>;

    /// Reads one live job.
    ///
    /// # Contract
    /// - Returns the live row, or `None` once the job is archived or never existed.
    async fn get_job(&self, id: JobId) -> Result<Option<Job>>;

    /// Reads one history row.
    ///
    /// # Contract
    /// - Returns the archived row, or `None` while the job is live or unknown.
    async fn get_history(&self, id: JobId) -> Result<Option<HistoryRecord>>;

    /// Lists history, newest first, filtered and keyset-paged.
    ///
    /// # Contract
    /// - Returns at most `limit` rows matching every filter, ids descending,
    ///   all below `before`; `next` is set exactly when more rows match.
    async fn list_history(&self, filter: &HistoryFilter) -> Result<HistoryPage>;

    /// Lists dead letters: [`Storage::list_history`] with that status.
    ///
    /// The default is that composition, correct as it is.
    async fn list_dead_letters(&self, filter: &HistoryFilter) -> Result<HistoryPage> {
        let filter = HistoryFilter {
            status: Some(FinalStatus::DeadLetter),
            ..filter.clone()
        };
        self.list_history(&filter).await
    }

    /// Lists live jobs, newest first, filtered and keyset-paged: what an
    /// operator searches by queue, state, id or unique key.
    ///
    /// # Contract
    /// - Returns at most `limit` jobs matching every filter (`state` as
    ///   [`crate::derive_state`] at now), ids descending, all below
    ///   `before`; `next` is set exactly when more jobs match.
    /// - An invalid limit is rejected and reads nothing.
    ///
    /// Capability [`Capability::ListJobs`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn list_jobs(&self, _filter: &JobFilter) -> Result<JobPage> {
        Err(crate::QueueError::not_supported(
            Capability::ListJobs,
            "list_jobs",
        ))
    }

    /// Makes the scheduled jobs the filter selects available now ("run
    /// now"): delayed jobs and jobs backing off after a failure.
    ///
    /// # Contract
    /// - Of the jobs matching `filter`, those scheduled at now (at most
    ///   `limit`, highest ids first) become pending with `available_at` =
    ///   now; attempts, lease and everything else stay. Jobs in other states
    ///   are left alone, so a second call changes nothing.
    /// - Returns how many jobs it moved; workers are woken as by an enqueue.
    ///
    /// Capability [`Capability::BulkActions`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn run_now(&self, _filter: &JobFilter) -> Result<u64> {
        Err(crate::QueueError::not_supported(
            Capability::BulkActions,
            "run_now",
        ))
    }

    /// Discards what the filter selects: [`Storage::discard`] for at most
    /// `limit` matching live jobs (highest ids first), in any state.
    ///
    /// # Contract
    /// - Each selected job goes to history as `discarded`; a running one's
    ///   holder gets `LeaseLost` later. Returns how many it discarded;
    ///   repeating the call discards the next ones, and 0 once none match.
    ///
    /// Capability [`Capability::BulkActions`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn discard_jobs(&self, _filter: &JobFilter) -> Result<u64> {
        Err(crate::QueueError::not_supported(
            Capability::BulkActions,
            "discard_jobs",
        ))
    }

    /// Retries dead letters in bulk: [`Storage::retry_dead_letter`] for at
    /// most `limit` dead letters matching `filter`'s queue and `before`
    /// (highest ids first; its status is ignored).
    ///
    /// # Contract
    /// - Each moved dead letter is pending now under its id with attempts
    ///   reset, and leaves history. Dead letters whose unique key is live
    ///   again are skipped (and stay), not an error. Returns how many moved;
    ///   repeating the call moves the next ones, and 0 once none can move.
    ///
    /// Capability [`Capability::BulkActions`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn retry_dead_letters(&self, _filter: &HistoryFilter) -> Result<u64> {
        Err(crate::QueueError::not_supported(
            Capability::BulkActions,
            "retry_dead_letters",
        ))
    }

    /// Completed and failed (dead-lettered) jobs per queue and minute over
    /// the `window` before now, from history.
    ///
    /// # Contract
    /// - One entry per queue and minute ([`crate::minute_of`] the
    ///   `finished_at`) with at least one completed or dead-lettered job
    ///   finished in `(now - window, now]`, sorted by queue, then minute.
    ///   Discarded jobs are not counted.
    /// - A window under a minute or over 7 days is rejected.
    ///
    /// Capability [`Capability::Throughput`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn throughput(&self, _window: Duration) -> Result<Vec<Throughput>> {
        Err(crate::QueueError::not_supported(
            Capability::Throughput,
            "throughput",
        ))
    }

    /// Records what workers observed per queue and minute: start lags
    /// and depths ([`QueueSample`]), for the operator's charts.
    ///
    /// # Contract
    /// - Lags add up: the jobs of each lag bucket of a queue and minute are
    ///   the sum of every call's (and every handle's, every host's).
    /// - A depth replaces the one the queue and minute held; within one
    ///   call, the last sample of a queue and minute with a depth wins.
    /// - A sample with no lag and no depth records nothing.
    /// - More than [`crate::MAX_SAMPLES_PER_CALL`] samples, a minute that is
    ///   not whole, or a bucket above [`crate::MAX_LAG_BUCKET`]:
    ///   `InvalidInput`, nothing recorded.
    /// - Samples older than [`crate::SAMPLE_RETENTION`] may be forgotten.
    ///
    /// Capability [`Capability::Samples`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn record_samples(&self, _samples: &[QueueSample]) -> Result<()> {
        Err(crate::QueueError::not_supported(
            Capability::Samples,
            "record_samples",
        ))
    }

    /// The samples of every queue whose minute is in `(now - window, now]`,
    /// sorted by queue, then minute; only minutes that recorded something.
    ///
    /// # Contract
    /// - What [`Storage::record_samples`] recorded, merged as it says.
    /// - A window under a minute or over 7 days is rejected, as for
    ///   [`Storage::throughput`].
    ///
    /// Capability [`Capability::Samples`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn samples(&self, _window: Duration) -> Result<Vec<QueueSample>> {
        Err(crate::QueueError::not_supported(
            Capability::Samples,
            "samples",
        ))
    }

    /// Sets `queue`'s limits in its `queue_config` row (its paused flag is
    /// left as it is).
    ///
    /// # Contract
    /// - From the next claim on, no claim takes a job of the queue while
    ///   `concurrency` of its jobs hold a lease, across every caller. A
    ///   storage may remember which queues have limits for up to
    ///   [`crate::backend::LimitedQueues::TTL`] (one second): a queue that
    ///   had none binds the claims of the handle that configured it at
    ///   once, and those of other handles (other hosts) within that second.
    /// - With a rate, the queue's bucket starts full (`burst` tokens), gains
    ///   `per_second` tokens per second of the storage's clock up to
    ///   `burst`, and every claimed job takes one; a claim never takes more
    ///   jobs than whole tokens.
    /// - [`QueueLimits::default`] removes every limit (the groups' own
    ///   limits, [`Storage::set_group_limit`], stay).
    /// - Invalid limits: `InvalidInput` naming the field, nothing changed.
    /// - A `group_concurrency` on a storage that does not declare
    ///   [`Capability::GroupLimits`]: `NotSupported`, nothing changed.
    /// - A `priority_aging` period applies from the next claim on (within
    ///   the TTL above for other handles), `None` removes it; outside 1 s
    ///   ..= 30 days: `InvalidInput` (`priority_aging`), nothing changed;
    ///   on a storage that does not declare [`Capability::PriorityAging`]:
    ///   `NotSupported`, nothing changed.
    /// - `fair_groups` applies from the next claim on (within the TTL above
    ///   for other handles); unset, the plain order returns and the
    ///   groups' turns are kept for when it is set again. On a storage
    ///   that does not declare [`Capability::FairGroups`]: `NotSupported`,
    ///   nothing changed.
    ///
    /// Capability [`Capability::FlowLimits`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn configure_queue(&self, _queue: &QueueName, _limits: &QueueLimits) -> Result<()> {
        Err(crate::QueueError::not_supported(
            Capability::FlowLimits,
            "configure_queue",
        ))
    }

    /// Gives `group` of `queue` its own concurrency limit (`Some`), or
    /// removes it (`None`, which leaves the queue's
    /// [`QueueLimits::group_concurrency`] to apply again).
    ///
    /// # Contract
    /// - From the next claim on, no claim leases a job of `group` in
    ///   `queue` while `limit` of them hold a lease, whatever the queue's
    ///   group concurrency (higher or lower, or none); within
    ///   [`crate::backend::LimitedQueues::TTL`] for other handles, as for
    ///   `configure_queue`.
    /// - [`Storage::group_limits`] reads it back; removing a limit that is
    ///   not set does nothing.
    /// - A limit of 0 or above [`crate::MAX_FLOW_LIMIT`]: `InvalidInput`
    ///   (`limit`), nothing written.
    /// - A queue without a `queue_config` row (never configured nor
    ///   paused): [`crate::QueueError::NotFound`] naming it, nothing
    ///   written.
    ///
    /// Capability [`Capability::GroupLimits`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn set_group_limit(
        &self,
        _queue: &QueueName,
        _group: &GroupKey,
        _limit: Option<u32>,
    ) -> Result<()> {
        Err(crate::QueueError::not_supported(
            Capability::GroupLimits,
            "set_group_limit",
        ))
    }

    /// Every group's own limit, sorted by queue, then group.
    ///
    /// # Contract
    /// - Lists exactly what [`Storage::set_group_limit`] set and did not
    ///   remove, through every handle on the database.
    ///
    /// Capability [`Capability::GroupLimits`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn group_limits(&self) -> Result<Vec<GroupLimit>> {
        Err(crate::QueueError::not_supported(
            Capability::GroupLimits,
            "group_limits",
        ))
    }

    /// Gives `group` of fair `queue` its own weight (`Some`), or removes it
    /// (`None`: weight 1 again): each time its turn comes, claims take up
    /// to `weight` of its jobs in a row (see [`Storage::dequeue`]).
    ///
    /// # Contract
    /// - Applies from the next claim on, within
    ///   [`crate::backend::LimitedQueues::TTL`] for other handles; stored
    ///   whether or not the queue is fair yet, and used while it is.
    /// - [`Storage::group_weights`] reads it back; removing a weight that
    ///   is not set does nothing.
    /// - A weight of 0 or above [`crate::MAX_GROUP_WEIGHT`]:
    ///   `InvalidInput` (`weight`), nothing written.
    /// - A queue without a `queue_config` row (never configured nor
    ///   paused): [`crate::QueueError::NotFound`] naming it, nothing
    ///   written.
    ///
    /// Capability [`Capability::GroupWeights`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn set_group_weight(
        &self,
        _queue: &QueueName,
        _group: &GroupKey,
        _weight: Option<u32>,
    ) -> Result<()> {
        Err(crate::QueueError::not_supported(
            Capability::GroupWeights,
            "set_group_weight",
        ))
    }

    /// Every group's own weight, sorted by queue, then group.
    ///
    /// # Contract
    /// - Lists exactly what [`Storage::set_group_weight`] set and did not
    ///   remove, through every handle on the database.
    ///
    /// Capability [`Capability::GroupWeights`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn group_weights(&self) -> Result<Vec<GroupWeight>> {
        Err(crate::QueueError::not_supported(
            Capability::GroupWeights,
            "group_weights",
        ))
    }

    /// A job's dependencies and dependants, each with where it stands and,
    /// once completed, the result its handler acked it with: what a
    /// handler reads its inputs from.
    ///
    /// # Contract
    /// - Lists the distinct dependencies the job was enqueued with (those
    ///   written: a job that existed already under its unique key keeps
    ///   its own), and every job enqueued depending on it, by ascending id,
    ///   whether live or finished, through every handle.
    /// - A job in history whose row was pruned shows as
    ///   [`crate::LinkStatus::Gone`].
    /// - An id neither live nor in history returns
    ///   [`crate::QueueError::NotFound`].
    ///
    /// Capability [`Capability::Dependencies`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn job_links(&self, _id: JobId) -> Result<JobLinks> {
        Err(crate::QueueError::not_supported(
            Capability::Dependencies,
            "job_links",
        ))
    }

    /// Every queue with a `queue_config` row (paused, or given limits),
    /// sorted by name.
    ///
    /// # Contract
    /// - Reads back what [`Storage::configure_queue`] and
    ///   [`Storage::pause_queue`] set, durations to the millisecond.
    ///
    /// Capability [`Capability::FlowLimits`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn queue_configs(&self) -> Result<Vec<QueueConfig>> {
        Err(crate::QueueError::not_supported(
            Capability::FlowLimits,
            "queue_configs",
        ))
    }

    /// Enqueues a schedule's fire unless that fire time, or a later one of
    /// the same schedule, was already recorded: what makes periodic jobs
    /// leaderless.
    ///
    /// # Contract
    /// - The first call for a fire time enqueues its job, records the fire
    ///   and returns the outcome; every later call for that fire time or an
    ///   earlier one returns `None` and writes nothing, however many callers
    ///   race.
    /// - Recording the fire and enqueueing its job commit together.
    /// - Invalid input: `InvalidInput` naming the field, nothing recorded.
    ///
    /// Capability [`Capability::Periodic`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn enqueue_periodic(&self, _fire: &PeriodicFire) -> Result<Option<EnqueueOutcome>> {
        Err(crate::QueueError::not_supported(
            Capability::Periodic,
            "enqueue_periodic",
        ))
    }

    /// Every schedule that has fired, sorted by name.
    ///
    /// # Contract
    /// - Lists each schedule's latest recorded fire and the next fire time
    ///   that fire reported.
    ///
    /// Capability [`Capability::Periodic`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn schedules(&self) -> Result<Vec<ScheduleRecord>> {
        Err(crate::QueueError::not_supported(
            Capability::Periodic,
            "schedules",
        ))
    }

    /// Stops dequeue from claiming jobs of `queue`.
    ///
    /// # Contract
    /// - Dequeue claims nothing from a paused queue; its jobs stay as they
    ///   are and can still be enqueued, acked and nacked.
    /// - Pausing twice is the same as once.
    ///
    /// Capability [`Capability::Pause`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn pause_queue(&self, _queue: &QueueName) -> Result<()> {
        Err(crate::QueueError::not_supported(
            Capability::Pause,
            "pause_queue",
        ))
    }

    /// Subscribes to this storage's wake-ups, so that a worker starts a job
    /// as soon as it is committed instead of at its next poll.
    ///
    /// # Contract
    /// - `Ok(None)`: the storage has no wake-ups; workers poll.
    /// - `Ok(Some(stream))`: after the stream is returned, every enqueue that
    ///   commits a claimable job to a queue, every resume of a queue and
    ///   every retried dead letter yields a [`crate::Wakeup`] naming its
    ///   queue (or [`crate::Wakeup::All`]) soon after the commit, never for a
    ///   rolled-back transaction. Several commits may share one wake-up.
    /// - Signals that may have been missed (a reconnect) yield
    ///   [`crate::Wakeup::All`].
    ///
    /// The worker subscribes by itself when it starts. Capability
    /// [`Capability::Wakeups`]; the default returns `Ok(None)`.
    async fn subscribe(&self) -> Result<Option<Wakeups>> {
        Ok(None)
    }

    /// Lets dequeue claim from `queue` again.
    ///
    /// # Contract
    /// - After resume the queue's pending jobs are claimed as before.
    /// - Resuming a queue that is not paused does nothing.
    ///
    /// Capability [`Capability::Pause`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn resume_queue(&self, _queue: &QueueName) -> Result<()> {
        Err(crate::QueueError::not_supported(
            Capability::Pause,
            "resume_queue",
        ))
    }

    /// Registers `worker`, or replaces what it registered before under the
    /// same id, and sets its `last_seen` to now: a worker calls it when it
    /// starts and again as its heartbeat.
    ///
    /// # Contract
    /// - [`Storage::list_workers`] then lists exactly what was registered
    ///   (`started_at` to the microsecond), `last_seen` now, through every
    ///   handle on the database.
    /// - Registering an id again replaces the whole record and moves its
    ///   `last_seen` to now.
    /// - Invalid input ([`WorkerInfo::validate`]): `InvalidInput` naming the
    ///   field, nothing written.
    ///
    /// Capability [`Capability::Workers`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn register_worker(&self, _worker: &WorkerInfo) -> Result<()> {
        Err(crate::QueueError::not_supported(
            Capability::Workers,
            "register_worker",
        ))
    }

    /// Removes worker `id` from the registry, as a worker does when it
    /// shuts down cleanly.
    ///
    /// # Contract
    /// - Returns whether it was registered; afterwards no listing has it.
    /// - Other workers are left as they are.
    ///
    /// Capability [`Capability::Workers`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn deregister_worker(&self, _id: &WorkerId) -> Result<bool> {
        Err(crate::QueueError::not_supported(
            Capability::Workers,
            "deregister_worker",
        ))
    }

    /// Every registered worker, sorted by id, each [`crate::WorkerStatus::Live`]
    /// or `Silent` by its `last_seen`; first deletes those gone quiet too
    /// long.
    ///
    /// # Contract
    /// - A worker whose `last_seen` is `forget_after` or more before now is
    ///   deleted and not listed (a killed worker disappears).
    /// - Of the others, one seen `silent_after` or more before now is
    ///   `Silent`, the rest `Live` ([`crate::WorkerAges`]).
    /// - Invalid ages (zero, `forget_after < silent_after`): `InvalidInput`
    ///   naming the field, nothing deleted.
    ///
    /// Capability [`Capability::Workers`]: the default returns
    /// [`crate::QueueError::NotSupported`].
    async fn list_workers(
        &self,
        _silent_after: Duration,
        _forget_after: Duration,
    ) -> Result<Vec<WorkerRecord>> {
        Err(crate::QueueError::not_supported(
            Capability::Workers,
            "list_workers",
        ))
    }
}
