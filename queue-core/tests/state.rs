//! `derive_state` on each row of the design table and on its boundaries.

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use proptest::prelude::*;
use queue_core::{Job, JobId, JobState, QueueName, WorkerId, derive_state};
use serde_json::json;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0)
        .single()
        .expect("valid instant")
}

fn job(
    attempts: u32,
    max_attempts: u32,
    available_at: DateTime<Utc>,
    lease_until: Option<DateTime<Utc>>,
) -> Job {
    Job {
        id: JobId(1),
        queue: QueueName::new("q").expect("valid queue"),
        priority: 0,
        unique_key: None,
        group_key: None,
        payload: json!(null),
        attempts,
        max_attempts,
        snoozes: 0,
        available_at,
        lease_until,
        locked_by: lease_until.map(|_| WorkerId::new("w").expect("valid worker")),
        first_locked_at: None,
        last_error: None,
        created_at: now(),
        updated_at: now(),
        trace_context: None,
    }
}

const SECOND: TimeDelta = TimeDelta::seconds(1);
const MICRO: TimeDelta = TimeDelta::microseconds(1);

#[test]
fn unleased_available_with_attempts_left_is_pending() {
    assert_eq!(
        derive_state(&job(0, 3, now() - SECOND, None), now()),
        JobState::Pending
    );
}

#[test]
fn available_exactly_now_is_pending() {
    assert_eq!(
        derive_state(&job(0, 3, now(), None), now()),
        JobState::Pending
    );
}

#[test]
fn available_one_microsecond_later_is_scheduled() {
    assert_eq!(
        derive_state(&job(0, 3, now() + MICRO, None), now()),
        JobState::Scheduled
    );
}

#[test]
fn lease_in_the_future_is_running() {
    assert_eq!(
        derive_state(&job(1, 3, now(), Some(now() + SECOND)), now()),
        JobState::Running
    );
}

#[test]
fn lease_ending_exactly_now_is_stalled() {
    assert_eq!(
        derive_state(&job(1, 3, now(), Some(now())), now()),
        JobState::Stalled
    );
}

#[test]
fn lease_in_the_past_is_stalled() {
    assert_eq!(
        derive_state(&job(1, 3, now(), Some(now() - SECOND)), now()),
        JobState::Stalled
    );
}

#[test]
fn unleased_with_attempts_equal_to_max_is_exhausted() {
    assert_eq!(
        derive_state(&job(3, 3, now() - SECOND, None), now()),
        JobState::Exhausted
    );
    assert_eq!(
        derive_state(&job(3, 3, now() + SECOND, None), now()),
        JobState::Exhausted
    );
}

#[test]
fn one_attempt_left_is_not_exhausted() {
    assert_eq!(
        derive_state(&job(2, 3, now(), None), now()),
        JobState::Pending
    );
}

#[test]
fn a_lease_wins_over_exhaustion() {
    // The last attempt is running: running, then stalled, never exhausted.
    assert_eq!(
        derive_state(&job(3, 3, now(), Some(now() + SECOND)), now()),
        JobState::Running
    );
    assert_eq!(
        derive_state(&job(3, 3, now(), Some(now())), now()),
        JobState::Stalled
    );
}

#[test]
fn job_state_method_and_lease_agree_with_columns() {
    let held = job(2, 3, now(), Some(now() + SECOND));
    assert_eq!(held.state(now()), JobState::Running);
    let lease = held.lease().expect("held job has a lease");
    assert_eq!(lease.attempt, 2);
    assert_eq!(lease.worker_id.as_str(), "w");
    assert!(job(0, 3, now(), None).lease().is_none());
}

/// The design table written as five independent predicates.
fn table_rows(job: &Job, now: DateTime<Utc>) -> Vec<JobState> {
    let unleased = job.lease_until.is_none();
    let left = job.attempts < job.max_attempts;
    let rows = [
        (
            unleased && job.available_at <= now && left,
            JobState::Pending,
        ),
        (
            unleased && job.available_at > now && left,
            JobState::Scheduled,
        ),
        (job.lease_until.is_some_and(|t| t > now), JobState::Running),
        (job.lease_until.is_some_and(|t| t <= now), JobState::Stalled),
        (unleased && !left, JobState::Exhausted),
    ];
    rows.into_iter()
        .filter(|(holds, _)| *holds)
        .map(|(_, s)| s)
        .collect()
}

proptest! {
    #[test]
    fn exactly_one_row_of_the_table_holds_and_derive_state_names_it(
        attempts in 0u32..6,
        max_attempts in 1u32..6,
        available_offset in -3i64..=3,
        lease_offset in proptest::option::of(-3i64..=3),
    ) {
        let at = |offset: i64| now() + TimeDelta::microseconds(offset);
        let job = job(attempts, max_attempts, at(available_offset), lease_offset.map(at));
        let rows = table_rows(&job, now());
        prop_assert_eq!(rows.len(), 1, "rows holding: {:?}", rows);
        prop_assert_eq!(rows[0], derive_state(&job, now()));
    }
}
