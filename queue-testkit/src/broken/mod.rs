//! A catalogue of deliberately broken storages: what the conformance suite
//! and the model test guarantee to catch.
//!
//! Each [`Bug`] is one realistic backend mistake, planted in a
//! [`BrokenStorage`] that is otherwise [`MemoryStorage`]. The kit's own
//! tests run the suite and the model test against every one of them and
//! fail unless each is rejected, every run. Read the list as the promise the
//! kit makes to a backend author: a backend with any of these bugs does not
//! pass. A new contract bullet comes with its case and a bug here that only
//! that case catches.

mod storage;

use queue_core::Clock;

use crate::MemoryStorage;
use crate::suite::{Fixture, StorageFactory};

/// One planted bug; the case named in its docs is the one meant to catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Bug {
    /// Claims read the candidates, wait for the database, then write the
    /// lease without a lock or a re-check, so two workers get one job.
    /// Caught by `concurrency::dequeue_never_hands_a_held_job_to_a_second_worker`.
    UnlockedClaim,
    /// Claims ignore paused queues. Caught by `dequeue::dequeue_skips_paused_queues`.
    ClaimIgnoresPause,
    /// Claims take jobs by id, not by priority and `available_at`.
    /// Caught by `dequeue::dequeue_orders_by_priority_then_available_at_then_id`.
    ClaimOrdersById,
    /// Claims ignore per-queue limits. Caught by
    /// `dequeue::dequeue_takes_at_most_each_queues_limit`.
    ClaimIgnoresQueueLimits,
    /// Claims take jobs that are not due yet. Caught by
    /// `dequeue::dequeue_skips_delayed_jobs_until_due`.
    ClaimTakesDelayedJobs,
    /// Every claim overwrites `first_locked_at`. Caught by
    /// `dequeue::dequeue_keeps_first_locked_at_on_later_claims`.
    ClaimResetsFirstLockedAt,
    /// Claims answer each job with the `updated_at` it had before the
    /// claim, which the claim moved (a backend that builds the claimed row
    /// from what it read, and misses one field the claim wrote).
    /// Caught by `dequeue::dequeue_answers_each_job_as_stored`.
    ClaimAnswersAStaleRow,
    /// Stats find the oldest pending job among the best priority's jobs
    /// only (a backend walking its ready index and stopping at the first
    /// level). Caught by
    /// `inspect::stats_report_the_oldest_pending_age_across_priorities`.
    OldestFromTheBestPriority,
    /// `next_due` only looks at jobs never tried, missing one in backoff
    /// after a nack. Caught by `dequeue::next_due_counts_a_job_in_backoff_after_a_nack`.
    NextDueIgnoresRetries,
    /// `next_due` only looks at the first named queue. Caught by
    /// `dequeue::next_due_is_the_time_until_the_earliest_scheduled_job`.
    NextDueOnlyFirstQueue,
    /// Ack checks the job id and attempt but not the worker. Caught by
    /// `ack::ack_by_another_worker_is_lease_lost`.
    AckIgnoresWorker,
    /// Ack checks the job id and worker but not the attempt, so a reclaimed
    /// and reclaimed-again job is acked by its old lease. Caught by
    /// `ack::ack_with_stale_lease_is_lease_lost_and_changes_nothing`.
    AckIgnoresAttempt,
    /// A lease repeated within one `ack_batch` is reported acked twice.
    /// Caught by `ack::ack_batch_acks_a_repeated_lease_once`.
    AckBatchAcksRepeatsTwice,
    /// Nack refuses a lease past its end that nobody took. Caught by
    /// `nack::nack_on_an_expired_lease_nobody_took_succeeds`.
    NackRefusesExpiredLease,
    /// Nack retries while `attempts <= max_attempts` (one attempt too many).
    /// Caught by `nack::nack_at_max_attempts_dead_letters`.
    NackRetriesOnceTooOften,
    /// A retrying nack clears `lease_until` but leaves `locked_by`. Caught by
    /// `nack::nack_with_attempts_left_schedules_a_retry`.
    NackKeepsLockedBy,
    /// Release refuses a lease past its end that nobody took. Caught by
    /// `release::release_on_an_expired_lease_nobody_took_succeeds`.
    ReleaseRefusesExpiredLease,
    /// Release keeps the attempt counted. Caught by
    /// `release::release_returns_job_without_burning_an_attempt`.
    ReleaseBurnsAnAttempt,
    /// Heartbeat extends a lease that already expired. Caught by
    /// `heartbeat::heartbeat_on_expired_lease_returns_false`.
    HeartbeatRevivesExpiredLease,
    /// Heartbeat does not check the worker. Caught by
    /// `heartbeat::heartbeat_on_foreign_lease_returns_false`.
    HeartbeatIgnoresWorker,
    /// Reclaim picks stalled jobs by id instead of by lease end. Caught by
    /// `reclaim::reclaim_picks_the_earliest_lease_end_not_the_lowest_id`.
    ReclaimOrdersById,
    /// Reclaim ignores its batch limit. Caught by
    /// `reclaim::reclaim_respects_its_batch_limit_oldest_lease_first`.
    ReclaimIgnoresLimit,
    /// Reclaim does not note why the attempt ended. Caught by
    /// `reclaim::reclaim_returns_stalled_jobs_to_pending`.
    ReclaimForgetsLastError,
    /// Unique keys collide across queues. Caught by
    /// `enqueue::enqueue_same_key_in_another_queue_is_a_new_job`.
    UniqueKeyAcrossQueues,
    /// A finished job's unique key keeps blocking new jobs. Caught by
    /// `enqueue::enqueue_key_is_free_again_once_job_is_archived`.
    UniqueKeyHeldByHistory,
    /// A batch with an invalid job writes the valid jobs before it. Caught
    /// by `enqueue::enqueue_batch_with_an_invalid_job_writes_nothing`.
    BatchWritesUntilTheInvalidJob,
    /// Discarding an unknown id succeeds. Caught by
    /// `admin::discard_of_an_unknown_job_is_not_found`.
    DiscardOfUnknownSucceeds,
    /// A retried dead letter keeps its attempts. Caught by
    /// `admin::retry_dead_letter_requeues_it_under_its_id`.
    RetryKeepsAttempts,
    /// Prune ignores its status filter. Caught by
    /// `admin::prune_respects_status_and_limit`.
    PruneIgnoresStatus,
    /// Stats leave out queues without live jobs, paused ones included.
    /// Caught by `inspect::stats_list_paused_queues_without_jobs`.
    StatsSkipEmptyQueues,
    /// Stats count past the cap (exact counts, marked capped). Caught by
    /// `inspect::stats_capped_counts_each_state_up_to_the_cap`.
    StatsIgnoreCap,
    /// The pending age is measured from `created_at`, so a retrying job
    /// looks old. Caught by `inspect::stats_age_a_retrying_job_from_when_it_came_due`.
    AgeFromCreation,
    /// History lists by finish time instead of id. Caught by
    /// `inspect::list_history_orders_by_id_not_finish_time`.
    HistoryByFinishTime,
    /// A history page always offers a next page. Caught by
    /// `inspect::list_history_pages_by_keyset`.
    HistoryAlwaysHasNext,
    /// Claims read a queue's limits, wait for the database, then claim
    /// without holding the config row, so racing claims overrun the limit.
    /// Caught by `flow::concurrency_limit_holds_under_concurrent_claims`.
    ClaimChecksLimitsThenClaims,
    /// Snooze leaves the attempt counted. Caught by
    /// `snooze::snooze_puts_the_job_off_without_counting_an_attempt`.
    SnoozeCountsTheAttempt,
    /// Periodic fires are deduplicated against live jobs only (as a unique
    /// key would be), so a fire whose job finished fires again. Caught by
    /// `periodic::enqueue_periodic_enqueues_each_fire_time_once`.
    PeriodicFiresAgainAfterFinish,
    /// A claim on several queues locks each queue's best jobs as it scans
    /// them and holds those it does not take until it commits, so a racing
    /// claimer skips them and takes worse jobs. Caught by
    /// `concurrency::racing_claims_on_several_queues_take_only_the_best_jobs`.
    ClaimLocksWhatItDoesNotTake,
    /// Claims answer each job without its trace context (a claim statement
    /// that lists its columns and misses the new one). Caught by
    /// `trace::trace_context_round_trips_through_enqueue_claim_and_history`.
    ClaimDropsTheTraceContext,
    /// Claims count a queue's held leases among the jobs this handle
    /// claimed only (a limiter kept in the process's memory), so two hosts
    /// together hold more than the limit. Caught by
    /// `handles::concurrency_limit_holds_across_handles`.
    ConcurrencyCountedPerHandle,
    /// Run-now drops the queue from its filter (a backend whose bulk
    /// statement forgot one condition). Caught by
    /// `bulk::run_now_moves_only_what_every_part_of_its_filter_selects`.
    RunNowIgnoresQueue,
    /// The job listing sets `next` whenever a page is full, even when no
    /// more jobs match. Caught by
    /// `listing::list_jobs_sets_next_only_when_more_jobs_match`.
    ListJobsNextOnFullPage,
    /// Snooze clears `last_error`, losing the error of the failed attempt
    /// before it. Caught by
    /// `snooze::snooze_keeps_the_error_of_the_last_failed_attempt`.
    SnoozeClearsLastError,
    /// A claim takes a token for every job its request allowed, not for
    /// every job it claimed. Caught by
    /// `flow::a_claim_takes_one_token_per_job_it_claims`.
    RateChargedForTheRequest,
    /// Claims check the pause only of queues without limits (a backend
    /// whose limited path reads the config row but not its paused flag).
    /// Caught by `flow::a_paused_queue_with_limits_yields_nothing`.
    PauseIgnoredWhenLimited,
    /// A snoozed job's concurrency slot is never given back (a tally that
    /// ack, nack and release decrement, and snooze forgets). Caught by
    /// `flow::every_way_a_lease_ends_gives_its_slot_back`.
    SnoozeKeepsTheSlot,
    /// Enqueue looks for a live job with the key, awaits the database, then
    /// inserts without a unique index or lock, so racing producers make two
    /// jobs of one key. Caught by
    /// `concurrency::concurrent_enqueues_of_one_key_make_one_job`.
    KeyChecksThenInserts,
    /// A periodic fire reads the schedule's last fire, awaits the database,
    /// then records and enqueues without a lock or a re-check, so racing
    /// workers enqueue one fire time twice. Caught by
    /// `periodic::concurrent_periodic_fires_make_one_job`.
    FireChecksThenRecords,
    /// A claim reads each queue's best two pages, awaits, and takes a
    /// queue's second page when a job of its first was taken meanwhile
    /// (a backend that moves past a contended page), leaving the first
    /// page's free jobs for worse ones. Caught by
    /// `concurrency::racing_claims_take_each_queues_jobs_in_order`.
    ClaimSkipsThePageOfATakenJob,
    /// A claim takes the right jobs and returns them by id (a backend that
    /// forgot that `RETURNING` has no order). Caught by
    /// `dequeue::dequeue_orders_by_priority_then_available_at_then_id`.
    ClaimReturnsInIdOrder,
    /// Registering a worker again replaces what it registered but keeps
    /// its old `last_seen` (an upsert that sets every column but that
    /// one), so a worker heartbeating on time goes silent and is then
    /// forgotten. Caught by
    /// `workers::registering_again_replaces_the_record_and_moves_last_seen`.
    WorkerHeartbeatKeepsLastSeen,
    /// Claims count a group's held leases among the jobs this handle
    /// claimed only (a per-process tally of each group's running jobs),
    /// so two hosts together run more of one group than its limit. Caught
    /// by `groups::group_limit_holds_across_handles`.
    GroupLimitCountedPerHandle,
    /// A fair queue's claims order each round's groups by their jobs' age,
    /// never by when each group was last served (turns not kept), so the
    /// group whose jobs are oldest is served at every claim. Caught by
    /// `fairness::fair_claims_serve_each_group_in_turn`.
    FairTurnsForgotten,
    /// A fair queue's turns are kept per handle (a per-process round
    /// robin), so claims through two hosts serve one group twice while
    /// another waits. Caught by
    /// `fairness::fair_turns_bind_claims_through_another_handle`.
    FairTurnsPerHandle,
    /// A fair queue's turns are stored but not the jobs a weighted group
    /// has taken towards its weight, so each claim starts its count again:
    /// claims of one job each serve a group of weight 2 or more forever.
    /// Caught by `weights::a_weighted_group_takes_its_weight_each_turn`.
    WeightCountForgotten,
    /// Recording a queue's lags for a minute replaces what the minute held
    /// (an upsert that sets the count rather than adding to it), so two
    /// workers' samples keep only the last one's. Caught by
    /// `samples::recorded_lags_add_up_per_queue_and_minute`.
    LagSamplesOverwritten,
    /// `samples` answers every recorded minute, whatever the window (a
    /// query that forgot its `WHERE minute > ...`). Caught by
    /// `samples::samples_answer_their_window_by_queue_then_minute`.
    SamplesIgnoreTheWindow,
}

impl Bug {
    /// Every bug in the catalogue.
    pub const ALL: [Bug; 57] = [
        Bug::UnlockedClaim,
        Bug::ClaimIgnoresPause,
        Bug::ClaimOrdersById,
        Bug::ClaimIgnoresQueueLimits,
        Bug::ClaimTakesDelayedJobs,
        Bug::ClaimResetsFirstLockedAt,
        Bug::ClaimAnswersAStaleRow,
        Bug::NextDueIgnoresRetries,
        Bug::NextDueOnlyFirstQueue,
        Bug::AckIgnoresWorker,
        Bug::AckIgnoresAttempt,
        Bug::AckBatchAcksRepeatsTwice,
        Bug::NackRefusesExpiredLease,
        Bug::NackRetriesOnceTooOften,
        Bug::NackKeepsLockedBy,
        Bug::ReleaseRefusesExpiredLease,
        Bug::ReleaseBurnsAnAttempt,
        Bug::HeartbeatRevivesExpiredLease,
        Bug::HeartbeatIgnoresWorker,
        Bug::ReclaimOrdersById,
        Bug::ReclaimIgnoresLimit,
        Bug::ReclaimForgetsLastError,
        Bug::UniqueKeyAcrossQueues,
        Bug::UniqueKeyHeldByHistory,
        Bug::BatchWritesUntilTheInvalidJob,
        Bug::DiscardOfUnknownSucceeds,
        Bug::RetryKeepsAttempts,
        Bug::PruneIgnoresStatus,
        Bug::StatsSkipEmptyQueues,
        Bug::StatsIgnoreCap,
        Bug::AgeFromCreation,
        Bug::OldestFromTheBestPriority,
        Bug::HistoryByFinishTime,
        Bug::HistoryAlwaysHasNext,
        Bug::ClaimChecksLimitsThenClaims,
        Bug::SnoozeCountsTheAttempt,
        Bug::PeriodicFiresAgainAfterFinish,
        Bug::ClaimLocksWhatItDoesNotTake,
        Bug::ClaimDropsTheTraceContext,
        Bug::ConcurrencyCountedPerHandle,
        Bug::RunNowIgnoresQueue,
        Bug::ListJobsNextOnFullPage,
        Bug::SnoozeClearsLastError,
        Bug::RateChargedForTheRequest,
        Bug::PauseIgnoredWhenLimited,
        Bug::SnoozeKeepsTheSlot,
        Bug::KeyChecksThenInserts,
        Bug::FireChecksThenRecords,
        Bug::ClaimSkipsThePageOfATakenJob,
        Bug::ClaimReturnsInIdOrder,
        Bug::WorkerHeartbeatKeepsLastSeen,
        Bug::GroupLimitCountedPerHandle,
        Bug::FairTurnsForgotten,
        Bug::FairTurnsPerHandle,
        Bug::WeightCountForgotten,
        Bug::LagSamplesOverwritten,
        Bug::SamplesIgnoreTheWindow,
    ];

    /// The case, as `area::name`, that this bug is planted for: the kit's
    /// own test checks that this case fails on it (others may too).
    pub fn caught_by(self) -> &'static str {
        match self {
            Bug::UnlockedClaim => "concurrency::dequeue_never_hands_a_held_job_to_a_second_worker",
            Bug::ClaimIgnoresPause => "dequeue::dequeue_skips_paused_queues",
            Bug::ClaimOrdersById => "dequeue::dequeue_orders_by_priority_then_available_at_then_id",
            Bug::ClaimIgnoresQueueLimits => "dequeue::dequeue_takes_at_most_each_queues_limit",
            Bug::ClaimTakesDelayedJobs => "dequeue::dequeue_skips_delayed_jobs_until_due",
            Bug::ClaimResetsFirstLockedAt => {
                "dequeue::dequeue_keeps_first_locked_at_on_later_claims"
            }
            Bug::ClaimAnswersAStaleRow => "dequeue::dequeue_answers_each_job_as_stored",
            Bug::NextDueIgnoresRetries => "dequeue::next_due_counts_a_job_in_backoff_after_a_nack",
            Bug::NextDueOnlyFirstQueue => {
                "dequeue::next_due_is_the_time_until_the_earliest_scheduled_job"
            }
            Bug::AckIgnoresWorker => "ack::ack_by_another_worker_is_lease_lost",
            Bug::AckIgnoresAttempt => "ack::ack_with_stale_lease_is_lease_lost_and_changes_nothing",
            Bug::AckBatchAcksRepeatsTwice => "ack::ack_batch_acks_a_repeated_lease_once",
            Bug::NackRefusesExpiredLease => "nack::nack_on_an_expired_lease_nobody_took_succeeds",
            Bug::NackRetriesOnceTooOften => "nack::nack_at_max_attempts_dead_letters",
            Bug::NackKeepsLockedBy => "nack::nack_with_attempts_left_schedules_a_retry",
            Bug::ReleaseRefusesExpiredLease => {
                "release::release_on_an_expired_lease_nobody_took_succeeds"
            }
            Bug::ReleaseBurnsAnAttempt => "release::release_returns_job_without_burning_an_attempt",
            Bug::HeartbeatRevivesExpiredLease => {
                "heartbeat::heartbeat_on_expired_lease_returns_false"
            }
            Bug::HeartbeatIgnoresWorker => "heartbeat::heartbeat_on_foreign_lease_returns_false",
            Bug::ReclaimOrdersById => {
                "reclaim::reclaim_picks_the_earliest_lease_end_not_the_lowest_id"
            }
            Bug::ReclaimIgnoresLimit => {
                "reclaim::reclaim_respects_its_batch_limit_oldest_lease_first"
            }
            Bug::ReclaimForgetsLastError => "reclaim::reclaim_returns_stalled_jobs_to_pending",
            Bug::UniqueKeyAcrossQueues => "enqueue::enqueue_same_key_in_another_queue_is_a_new_job",
            Bug::UniqueKeyHeldByHistory => {
                "enqueue::enqueue_key_is_free_again_once_job_is_archived"
            }
            Bug::BatchWritesUntilTheInvalidJob => {
                "enqueue::enqueue_batch_with_an_invalid_job_writes_nothing"
            }
            Bug::DiscardOfUnknownSucceeds => "admin::discard_of_an_unknown_job_is_not_found",
            Bug::RetryKeepsAttempts => "admin::retry_dead_letter_requeues_it_under_its_id",
            Bug::PruneIgnoresStatus => "admin::prune_respects_status_and_limit",
            Bug::StatsSkipEmptyQueues => "inspect::stats_list_paused_queues_without_jobs",
            Bug::StatsIgnoreCap => "inspect::stats_capped_counts_each_state_up_to_the_cap",
            Bug::AgeFromCreation => "inspect::stats_age_a_retrying_job_from_when_it_came_due",
            Bug::OldestFromTheBestPriority => {
                "inspect::stats_report_the_oldest_pending_age_across_priorities"
            }
            Bug::HistoryByFinishTime => "inspect::list_history_orders_by_id_not_finish_time",
            Bug::HistoryAlwaysHasNext => "inspect::list_history_pages_by_keyset",
            Bug::ClaimChecksLimitsThenClaims => {
                "flow::concurrency_limit_holds_under_concurrent_claims"
            }
            Bug::SnoozeCountsTheAttempt => {
                "snooze::snooze_puts_the_job_off_without_counting_an_attempt"
            }
            Bug::PeriodicFiresAgainAfterFinish => {
                "periodic::enqueue_periodic_enqueues_each_fire_time_once"
            }
            Bug::ClaimLocksWhatItDoesNotTake => {
                "concurrency::racing_claims_on_several_queues_take_only_the_best_jobs"
            }
            Bug::ClaimDropsTheTraceContext => {
                "trace::trace_context_round_trips_through_enqueue_claim_and_history"
            }
            Bug::ConcurrencyCountedPerHandle => "handles::concurrency_limit_holds_across_handles",
            Bug::RunNowIgnoresQueue => {
                "bulk::run_now_moves_only_what_every_part_of_its_filter_selects"
            }
            Bug::ListJobsNextOnFullPage => "listing::list_jobs_sets_next_only_when_more_jobs_match",
            Bug::SnoozeClearsLastError => {
                "snooze::snooze_keeps_the_error_of_the_last_failed_attempt"
            }
            Bug::RateChargedForTheRequest => "flow::a_claim_takes_one_token_per_job_it_claims",
            Bug::PauseIgnoredWhenLimited => "flow::a_paused_queue_with_limits_yields_nothing",
            Bug::SnoozeKeepsTheSlot => "flow::every_way_a_lease_ends_gives_its_slot_back",
            Bug::KeyChecksThenInserts => "concurrency::concurrent_enqueues_of_one_key_make_one_job",
            Bug::FireChecksThenRecords => "periodic::concurrent_periodic_fires_make_one_job",
            Bug::ClaimSkipsThePageOfATakenJob => {
                "concurrency::racing_claims_take_each_queues_jobs_in_order"
            }
            Bug::ClaimReturnsInIdOrder => {
                "dequeue::dequeue_orders_by_priority_then_available_at_then_id"
            }
            Bug::WorkerHeartbeatKeepsLastSeen => {
                "workers::registering_again_replaces_the_record_and_moves_last_seen"
            }
            Bug::GroupLimitCountedPerHandle => "groups::group_limit_holds_across_handles",
            Bug::FairTurnsForgotten => "fairness::fair_claims_serve_each_group_in_turn",
            Bug::FairTurnsPerHandle => "fairness::fair_turns_bind_claims_through_another_handle",
            Bug::WeightCountForgotten => "weights::a_weighted_group_takes_its_weight_each_turn",
            Bug::LagSamplesOverwritten => "samples::recorded_lags_add_up_per_queue_and_minute",
            Bug::SamplesIgnoreTheWindow => {
                "samples::samples_answer_their_window_by_queue_then_minute"
            }
        }
    }
}

/// [`MemoryStorage`] with one [`Bug`] planted.
#[derive(Debug)]
pub struct BrokenStorage {
    inner: MemoryStorage,
    bug: Bug,
    /// The jobs this handle claimed, for bugs that keep state per handle.
    claimed_here: std::sync::Mutex<std::collections::HashSet<queue_core::JobId>>,
    /// Slots snoozed jobs still take, per queue ([`Bug::SnoozeKeepsTheSlot`]).
    snoozed_slots: std::sync::Mutex<std::collections::HashMap<queue_core::QueueName, u64>>,
    /// This handle's own fair-queue claim counts and turns
    /// ([`Bug::FairTurnsPerHandle`]).
    turns_here: std::sync::Mutex<FairTurns>,
}

/// A memory storage's fair-queue claim counts and groups' turns.
type FairTurns = (
    std::collections::BTreeMap<queue_core::QueueName, u64>,
    std::collections::BTreeMap<
        (queue_core::QueueName, Option<queue_core::GroupKey>),
        queue_core::backend::FairTurn,
    >,
);

impl BrokenStorage {
    /// An empty storage reading `clock`, broken by `bug`.
    pub fn new(bug: Bug, clock: impl Into<Clock>) -> Self {
        Self {
            inner: MemoryStorage::with_clock(clock),
            bug,
            claimed_here: std::sync::Mutex::default(),
            snoozed_slots: std::sync::Mutex::default(),
            turns_here: std::sync::Mutex::default(),
        }
    }

    /// Another handle on the same jobs, with the same bug and state of
    /// its own ([`MemoryStorage::handle`]).
    pub fn handle(&self) -> Self {
        Self {
            inner: self.inner.handle(),
            bug: self.bug,
            claimed_here: std::sync::Mutex::default(),
            snoozed_slots: std::sync::Mutex::default(),
            turns_here: std::sync::Mutex::default(),
        }
    }
}

/// Makes a fresh [`BrokenStorage`] with its bug per case.
#[derive(Debug, Clone, Copy)]
pub struct BrokenFactory(pub Bug);

#[async_trait::async_trait]
impl StorageFactory for BrokenFactory {
    type Storage = BrokenStorage;

    async fn create(&self, clock: Clock) -> Fixture<BrokenStorage> {
        let storage = BrokenStorage::new(self.0, clock);
        let second = storage.handle();
        Fixture::new(storage).with_second_handle(async move { second })
    }
}
