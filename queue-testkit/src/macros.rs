//! The list of cases, and the macro that stamps them out as tests.

/// Calls the macro named in brackets with `args ;` and then every case as
/// `area::name`, then optionally `[Capability, ...]`, the capabilities
/// ([`queue_core::Capability`]) it needs besides the core, and `@2` when it
/// needs two handles on one database: the one list from which both
/// [`conformance_tests!`] and `suite::cases` are made.
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_case {
    ([$($callback:tt)*] $($args:tt)*) => {
        $($callback)*! { $($args)* ;
            enqueue::enqueue_returns_id_and_pending_job,
            enqueue::enqueue_round_trips_payload_values,
            enqueue::enqueue_round_trips_a_one_mib_payload,
            enqueue::enqueue_with_live_unique_key_returns_existing_job,
            enqueue::enqueue_same_key_in_another_queue_is_a_new_job,
            enqueue::enqueue_without_key_never_collides,
            enqueue::enqueue_key_is_free_again_once_job_is_archived,
            enqueue::enqueue_key_is_free_again_once_job_is_discarded [Discard],
            enqueue::enqueue_delayed_job_is_scheduled,
            enqueue::enqueue_run_at_sets_available_at,
            enqueue::enqueue_invalid_input_is_typed_and_writes_nothing,
            enqueue::enqueue_batch_returns_outcomes_in_input_order,
            enqueue::enqueue_large_batch_keeps_every_field_and_the_input_order,
            enqueue::enqueue_batch_with_an_invalid_job_writes_nothing,
            enqueue::enqueue_batch_of_nothing_returns_nothing,
            enqueue::now_follows_the_manual_clock,
            dequeue::dequeue_orders_by_priority_then_available_at_then_id,
            dequeue::dequeue_limit_spans_priority_levels_past_jobs_not_yet_due,
            dequeue::dequeue_claims_only_from_named_queues,
            dequeue::dequeue_across_queues_takes_the_best_jobs_first,
            dequeue::dequeue_returns_at_most_limit_distinct_jobs,
            dequeue::dequeue_sets_lease_worker_attempts_and_first_locked_at,
            dequeue::dequeue_keeps_first_locked_at_on_later_claims,
            dequeue::dequeue_answers_each_job_as_stored,
            dequeue::dequeue_answers_a_snoozed_job_as_stored [Snooze],
            dequeue::dequeue_skips_delayed_jobs_until_due,
            dequeue::dequeue_skips_running_and_stalled_jobs,
            dequeue::dequeue_skips_paused_queues [Pause],
            dequeue::dequeue_takes_at_most_each_queues_limit,
            dequeue::next_due_is_none_without_scheduled_jobs,
            dequeue::next_due_is_the_time_until_the_earliest_scheduled_job,
            dequeue::next_due_counts_the_jobs_of_paused_queues [Pause],
            dequeue::next_due_counts_a_job_in_backoff_after_a_nack,
            ack::ack_archives_completed_with_result,
            ack::ack_with_stale_lease_is_lease_lost_and_changes_nothing,
            ack::ack_twice_is_lease_lost,
            ack::ack_by_another_worker_is_lease_lost,
            ack::ack_after_expiry_without_reclaim_succeeds,
            ack::ack_batch_reports_each_lease,
            ack::ack_batch_acks_a_repeated_lease_once,
            nack::nack_with_attempts_left_schedules_a_retry,
            nack::nack_uses_a_backoff_delay_within_jitter_bounds,
            nack::nack_at_max_attempts_dead_letters,
            nack::nack_with_retry_never_dead_letters_at_once,
            nack::nack_with_stale_lease_is_lease_lost_and_changes_nothing,
            nack::nack_with_invalid_delay_is_rejected_and_changes_nothing,
            nack::nack_on_an_expired_lease_nobody_took_succeeds,
            heartbeat::heartbeat_extends_a_live_lease,
            heartbeat::heartbeat_on_expired_lease_returns_false,
            heartbeat::heartbeat_on_foreign_lease_returns_false,
            heartbeat::heartbeat_with_stale_lease_returns_false_and_changes_nothing,
            heartbeat::heartbeat_after_ack_returns_false,
            heartbeat::heartbeat_batch_reports_each_lease,
            heartbeat::heartbeat_with_invalid_duration_is_rejected,
            release::release_returns_job_without_burning_an_attempt,
            release::release_with_stale_lease_returns_false,
            release::release_on_an_expired_lease_nobody_took_succeeds,
            reclaim::reclaim_returns_stalled_jobs_to_pending,
            reclaim::reclaim_dead_letters_stalled_jobs_without_attempts_left,
            reclaim::reclaim_respects_its_batch_limit_oldest_lease_first,
            reclaim::reclaim_picks_the_earliest_lease_end_not_the_lowest_id,
            reclaim::reclaim_leaves_running_and_pending_jobs_alone,
            reclaim::reclaim_with_invalid_limit_is_rejected,
            inspect::stats_count_each_state_per_queue,
            inspect::stats_report_oldest_pending_age,
            inspect::stats_report_the_oldest_pending_age_across_priorities,
            inspect::stats_age_a_retrying_job_from_when_it_came_due,
            inspect::stats_list_paused_queues_without_jobs [Pause],
            inspect::stats_capped_counts_each_state_up_to_the_cap,
            inspect::stats_forget_pending_jobs_that_leave_without_a_claim [BulkActions, Cancel, Discard],
            inspect::get_job_and_get_history_see_one_place_each,
            inspect::list_history_filters_by_queue_and_status,
            inspect::list_history_filters_discarded_jobs [Discard],
            inspect::list_history_pages_by_keyset,
            inspect::list_history_orders_by_id_not_finish_time,
            inspect::list_dead_letters_lists_only_dead_letters,
            inspect::list_history_with_invalid_limit_is_rejected,
            listing::list_jobs_filters_by_queue_state_id_and_key [ListJobs],
            listing::list_jobs_pages_by_keyset_newest_first [ListJobs],
            listing::list_jobs_sets_next_only_when_more_jobs_match [ListJobs],
            listing::list_jobs_and_bulk_actions_with_invalid_limit_are_rejected [BulkActions, ListJobs],
            search::search_finds_payload_values_newest_first_and_resumes [ListJobs],
            search::search_stops_at_its_scan_budget_and_says_where_to_continue [ListJobs],
            search::search_history_finds_payload_values_by_status,
            search::search_with_invalid_input_is_rejected [ListJobs],
            listing::throughput_counts_completed_and_failed_per_queue_and_minute [Discard, Throughput],
            listing::throughput_follows_history_across_minutes [PruneHistory, RetryDeadLetter, Throughput],
            listing::throughput_with_invalid_window_is_rejected [Throughput],
            admin::discard_archives_a_live_job_as_discarded [Discard],
            admin::discard_of_a_running_job_revokes_its_lease [Discard],
            admin::discard_of_an_unknown_job_is_not_found [Discard],
            admin::retry_dead_letter_requeues_it_under_its_id [RetryDeadLetter],
            admin::retry_of_what_is_not_a_dead_letter_is_not_found [RetryDeadLetter],
            admin::retry_dead_letter_whose_key_is_live_is_a_conflict [RetryDeadLetter],
            admin::prune_deletes_only_history_older_than_retention [PruneHistory],
            admin::prune_respects_status_and_limit [PruneHistory],
            admin::pause_stops_claims_and_keeps_jobs_intact [Pause],
            admin::pause_and_resume_are_idempotent [Pause],
            bulk::run_now_makes_scheduled_jobs_pending_and_leaves_others [BulkActions],
            bulk::discard_jobs_archives_what_the_filter_selects_in_batches [BulkActions],
            bulk::retry_dead_letters_moves_dead_letters_in_batches [BulkActions],
            bulk::retry_dead_letters_skips_those_whose_key_is_live [BulkActions],
            bulk::retry_dead_letters_moves_one_of_two_with_one_key [BulkActions],
            bulk::run_now_moves_only_what_every_part_of_its_filter_selects [BulkActions],
            concurrency::concurrent_dequeuers_complete_every_job_exactly_once,
            concurrency::concurrent_enqueues_of_one_key_make_one_job,
            concurrency::dequeue_never_hands_a_held_job_to_a_second_worker,
            concurrency::racing_claims_on_several_queues_take_only_the_best_jobs,
            concurrency::racing_claims_take_each_queues_jobs_in_order,
            flow::configure_queue_reads_back_and_keeps_the_paused_flag [FlowLimits, Pause],
            flow::configure_queue_rejects_invalid_limits [FlowLimits],
            flow::concurrency_limit_caps_the_leases_a_queue_holds [FlowLimits],
            flow::concurrency_limit_holds_under_concurrent_claims [FlowLimits],
            flow::rate_limit_refills_its_bucket_on_the_storage_clock [FlowLimits],
            flow::limits_bind_only_their_queue_in_a_multi_queue_claim [FlowLimits],
            flow::configure_queue_takes_effect_at_the_next_claim [FlowLimits],
            flow::a_claim_takes_one_token_per_job_it_claims [FlowLimits],
            flow::a_paused_queue_with_limits_yields_nothing [FlowLimits, Pause],
            flow::racing_claims_over_a_paused_and_a_limited_queue_keep_the_limit [FlowLimits, Pause],
            flow::every_way_a_lease_ends_gives_its_slot_back [FlowLimits, Snooze, Cancel, Discard],
            groups::group_limit_of_one_runs_one_job_per_group [FlowLimits, GroupLimits],
            groups::a_grouped_claim_takes_the_oldest_jobs_within_their_slots [FlowLimits, GroupLimits],
            groups::group_limit_of_n_caps_each_group_of_each_queue [FlowLimits, GroupLimits],
            groups::a_group_limit_overrides_the_queue_default [FlowLimits, GroupLimits],
            groups::ack_nack_and_release_give_a_group_slot_back [FlowLimits, GroupLimits],
            groups::snooze_cancel_and_discard_give_a_group_slot_back [FlowLimits, GroupLimits, Snooze, Cancel, Discard],
            groups::reclaim_of_an_expired_lease_gives_its_group_slot_back [FlowLimits, GroupLimits],
            groups::a_full_group_does_not_stall_the_others [FlowLimits, GroupLimits],
            groups::group_limit_holds_across_handles [FlowLimits, GroupLimits] @2,
            groups::group_key_round_trips_through_claim_listing_and_history [GroupLimits, ListJobs, RetryDeadLetter],
            groups::group_limits_with_invalid_input_write_nothing [FlowLimits, GroupLimits],
            aging::an_old_job_is_claimed_before_a_newer_one_exactly_when_its_periods_make_up_the_gap [FlowLimits, PriorityAging],
            aging::aging_orders_by_effective_priority_then_available_at_then_id [FlowLimits, PriorityAging],
            aging::without_aging_the_order_stays_plain [FlowLimits, PriorityAging],
            aging::lifting_aging_restores_the_plain_order [FlowLimits, PriorityAging],
            aging::a_retried_or_released_job_ages_from_when_it_became_due [FlowLimits, PriorityAging],
            aging::aging_keeps_concurrency_and_group_limits [FlowLimits, GroupLimits, PriorityAging],
            aging::priority_aging_with_invalid_input_writes_nothing [FlowLimits, PriorityAging],
            aging::priority_aging_binds_claims_through_another_handle [FlowLimits, PriorityAging] @2,
            fairness::fair_claims_serve_each_group_in_turn [FlowLimits, GroupLimits, FairGroups],
            fairness::one_fair_claim_takes_a_job_of_each_group_per_round [FlowLimits, GroupLimits, FairGroups],
            fairness::one_fair_claim_takes_what_claims_of_one_would [FlowLimits, GroupLimits, FairGroups],
            fairness::a_group_that_arrives_behind_a_backlog_is_served_at_the_next_claim [FlowLimits, GroupLimits, FairGroups],
            fairness::fair_groups_keep_priority_first [FlowLimits, GroupLimits, FairGroups],
            fairness::fair_groups_skip_a_full_group [FlowLimits, GroupLimits, FairGroups],
            fairness::lifting_fair_groups_restores_the_plain_order [FlowLimits, GroupLimits, FairGroups],
            fairness::fair_queues_merge_with_other_queues_by_their_next_job [FlowLimits, GroupLimits, FairGroups],
            fairness::fair_groups_read_back [FlowLimits, FairGroups],
            fairness::fair_turns_bind_claims_through_another_handle [FlowLimits, GroupLimits, FairGroups] @2,
            weights::a_weighted_group_takes_its_weight_each_turn [FlowLimits, GroupLimits, FairGroups, GroupWeights],
            weights::a_changed_weight_applies_from_the_next_job [FlowLimits, GroupLimits, FairGroups, GroupWeights],
            weights::group_weights_read_back_and_refuse_bad_input [FlowLimits, FairGroups, GroupWeights],
            weights::group_weights_bind_claims_through_another_handle [FlowLimits, GroupLimits, FairGroups, GroupWeights] @2,
            weights::racing_claims_give_each_group_its_weight [FlowLimits, GroupLimits, FairGroups, GroupWeights] @2,
            handles::unique_key_holds_across_handles @2,
            handles::a_lease_taken_by_one_handle_is_acked_by_another @2,
            handles::concurrency_limit_holds_across_handles [FlowLimits] @2,
            handles::rate_limit_bucket_is_shared_across_handles [FlowLimits] @2,
            handles::pause_by_one_handle_stops_claims_by_another [Pause] @2,
            handles::a_fire_one_handle_recorded_is_not_repeated_by_another [Periodic] @2,
            handles::wakeups_reach_a_subscriber_on_another_handle [Wakeups, RemoteWakeups] @2,
            snooze::snooze_puts_the_job_off_without_counting_an_attempt [Snooze],
            snooze::snooze_needs_the_current_lease_and_a_valid_delay [Snooze],
            snooze::snooze_keeps_the_error_of_the_last_failed_attempt [Snooze],
            trace::trace_context_round_trips_through_enqueue_claim_and_history [ListJobs, RetryDeadLetter],
            cancel::cancel_moves_a_waiting_job_to_history_as_cancelled [Cancel],
            cancel::cancel_of_a_running_job_makes_its_lease_lost [Cancel, Snooze],
            cancel::cancel_of_a_job_that_is_not_live_is_not_found [Cancel],
            cancel::cancel_wakes_subscribers_with_the_job_id [Cancel],
            periodic::enqueue_periodic_enqueues_each_fire_time_once [Periodic],
            periodic::concurrent_periodic_fires_make_one_job [Periodic],
            periodic::enqueue_periodic_with_invalid_input_records_nothing [Periodic],
            workers::register_worker_lists_what_was_registered [Workers],
            workers::registering_again_replaces_the_record_and_moves_last_seen [Workers],
            workers::deregister_removes_only_that_worker [Workers],
            workers::a_quiet_worker_goes_silent_then_is_forgotten [Workers],
            workers::worker_registry_with_invalid_input_writes_nothing [Workers],
            workers::a_worker_registered_through_one_handle_is_listed_by_another [Workers] @2,
            samples::recorded_lags_add_up_per_queue_and_minute [Samples],
            samples::a_later_depth_replaces_the_minutes_depth [Samples],
            samples::samples_answer_their_window_by_queue_then_minute [Samples],
            samples::record_samples_with_invalid_input_records_nothing [Samples],
            samples::samples_of_two_handles_add_up [Samples] @2,
            workflows::a_job_waits_until_every_dependency_completes [Dependencies],
            workflows::a_graph_enqueued_in_one_batch_runs_layer_by_layer [Dependencies],
            workflows::a_large_graph_enqueued_in_one_batch_waits_layer_by_layer [Dependencies],
            workflows::a_failed_dependency_cancels_its_dependants_unless_they_run_anyway [Dependencies],
            workflows::discarded_cancelled_and_reclaimed_dependencies_fail_their_dependants [Dependencies, Discard, Cancel],
            workflows::dependencies_in_history_count_at_enqueue [Dependencies],
            workflows::dependencies_that_cannot_form_a_graph_are_refused [Dependencies],
            workflows::job_links_list_dependencies_with_their_results_and_dependants [Dependencies] @2,
            workflows::racing_completions_of_the_last_two_dependencies_release_once [Dependencies] @2,
            workflows::a_dependant_enqueued_while_its_dependency_is_acked_is_not_left_waiting [Dependencies] @2,
            workflows::a_released_job_keeps_its_time_and_each_dependency_counts_once [Dependencies],
            workflows::waiting_jobs_are_listed_and_run_now_leaves_them [Dependencies, ListJobs, BulkActions],
            workflows::a_released_job_wakes_subscribers [Dependencies, Wakeups],
            batches::a_batch_callback_runs_once_after_every_job_finishes_with_the_counts [Dependencies, Discard, Cancel],
            batches::jobs_join_an_open_batch_and_a_closed_batch_refuses_them [Dependencies, Batches],
            batches::a_join_racing_the_last_finish_joins_or_is_refused [Dependencies, Batches] @2,
        }
    };
}

/// Expands a module of tests, one `#[test]` per conformance case, each on a
/// fresh storage from the factory (an expression building a
/// [`StorageFactory`](crate::suite::StorageFactory), evaluated inside each
/// test's runtime, with the calling module's names in scope).
///
/// ```ignore
/// // A module named `conformance`:
/// queue_testkit::conformance_tests!(my_backend::TestFactory::from_env());
/// // Or name it, so that two backends share one file:
/// queue_testkit::conformance_tests!(postgres_suite: PgFactory);
/// queue_testkit::conformance_tests!(mysql_suite: MySqlFactory);
/// ```
///
/// The only dependency the expansion needs is `queue-testkit` itself (as a
/// dev-dependency under that name): each test builds its own multi-threaded
/// tokio runtime through [`suite::block_on`](crate::suite::block_on), so the
/// calling crate needs no tokio features. Test names are the case names,
/// e.g. `conformance::ack_twice_is_lease_lost`.
#[macro_export]
macro_rules! conformance_tests {
    () => {
        ::core::compile_error!(
            "conformance_tests! needs a StorageFactory: conformance_tests!(MyFactory) \
             or, to name the module, conformance_tests!(my_module: MyFactory)"
        );
    };
    ($module:ident : $factory:expr $(,)?) => {
        #[cfg(test)]
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $crate::for_each_case!([$crate::__queue_testkit_conformance_test] $factory);
        }
    };
    ($factory:expr $(,)?) => {
        $crate::conformance_tests!(conformance: $factory);
    };
}

/// Stamps one test per case; used by [`conformance_tests!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __queue_testkit_conformance_test {
    ($factory:expr; $($area:ident :: $name:ident $([$($capability:ident),+])? $(@ $handles:literal)?),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::suite::block_on(async {
                    let case = $crate::suite::case(stringify!($area), stringify!($name));
                    $crate::suite::run_case(&$factory, case).await;
                });
            }
        )*
    };
}

/// Stamps one test per case of [`crate::transactional`] for a
/// [`crate::transactional::TransactionalFactory`], in a module named
/// `transactional` (or the name given, as in [`conformance_tests!`](crate::conformance_tests)).
#[macro_export]
macro_rules! transactional_tests {
    ($module:ident : $factory:expr $(,)?) => {
        #[cfg(test)]
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $crate::__queue_testkit_transactional_test!(
                $factory;
                enqueue_in_a_committed_transaction_keeps_the_job_and_the_effect,
                enqueue_in_a_rolled_back_transaction_leaves_neither,
                ack_in_a_committed_transaction_archives_with_the_effect,
                ack_in_a_rolled_back_transaction_leaves_the_job_leased,
                nack_in_follows_the_callers_transaction,
                ack_in_of_a_lost_lease_is_lease_lost_and_writes_nothing,
            );
        }
    };
    ($factory:expr $(,)?) => {
        $crate::transactional_tests!(transactional: $factory);
    };
}

/// Stamps one test per case; used by [`transactional_tests!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __queue_testkit_transactional_test {
    ($factory:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::suite::block_on(async {
                    $crate::transactional::run_case(&$factory, |harness| {
                        ::std::boxed::Box::pin($crate::transactional::$name(harness))
                    })
                    .await;
                });
            }
        )*
    };
}
