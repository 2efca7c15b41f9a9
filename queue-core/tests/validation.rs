//! Every validation rule, and that each rejection names its field.

use std::time::Duration;

use chrono::{TimeZone, Utc};
use queue_core::{
    Backoff, DequeueRequest, HistoryFilter, MAX_MAX_ATTEMPTS, NewJob, PruneRequest, QueueError,
    QueueName, Retry, Schedule, UniqueKey, WorkerId,
};
use serde::ser::{Error as _, Serialize, Serializer};
use serde_json::json;

fn field_of<T: std::fmt::Debug>(result: Result<T, QueueError>) -> &'static str {
    match result {
        Err(QueueError::InvalidInput { field, reason }) => {
            assert!(!reason.is_empty(), "a rejection says why");
            field
        }
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

fn job(queue: &str) -> NewJob {
    NewJob::new(queue, json!({"n": 1}))
}

fn worker() -> WorkerId {
    WorkerId::new("w1").expect("valid worker id")
}

fn queue(name: &str) -> QueueName {
    QueueName::new(name).expect("valid queue name")
}

#[test]
fn a_plain_job_is_valid_with_documented_defaults() {
    let valid = job("emails").validate().expect("valid");
    assert_eq!(valid.queue.as_str(), "emails");
    assert_eq!(valid.priority, 0);
    assert_eq!(valid.max_attempts, 20);
    assert_eq!(valid.unique_key, None);
    assert_eq!(valid.schedule, Schedule::Now);
}

#[test]
fn queue_name_must_not_be_empty() {
    assert_eq!(field_of(job("").validate()), "queue");
}

#[test]
fn queue_name_may_have_191_bytes_but_not_192() {
    assert!(job(&"q".repeat(191)).validate().is_ok());
    assert_eq!(field_of(job(&"q".repeat(192)).validate()), "queue");
}

#[test]
fn name_length_is_counted_in_bytes_not_characters() {
    // 96 two-byte characters are 192 bytes.
    assert_eq!(field_of(job(&"é".repeat(96)).validate()), "queue");
    assert!(job(&format!("{}q", "é".repeat(95))).validate().is_ok());
}

#[test]
fn queue_name_rejects_control_characters() {
    for bad in [
        "a\nb",
        "a\tb",
        "nul\0",
        "bell\u{7}",
        "del\u{7f}",
        "c1\u{85}x",
    ] {
        assert_eq!(field_of(job(bad).validate()), "queue", "{bad:?}");
    }
}

#[test]
fn queue_name_rejects_surrounding_white_space() {
    for bad in [" q", "q ", "q\u{3000}", "\u{a0}q"] {
        assert_eq!(field_of(job(bad).validate()), "queue", "{bad:?}");
    }
    assert!(job("two words").validate().is_ok());
}

#[test]
fn unique_key_follows_the_name_rules_and_names_its_field() {
    assert_eq!(field_of(job("q").unique_key("").validate()), "unique_key");
    assert_eq!(
        field_of(job("q").unique_key("k".repeat(192)).validate()),
        "unique_key"
    );
    assert_eq!(
        field_of(job("q").unique_key("a\nb").validate()),
        "unique_key"
    );
    assert_eq!(field_of(job("q").unique_key("k ").validate()), "unique_key");
    let valid = job("q").unique_key("order-42").validate().expect("valid");
    assert_eq!(
        valid.unique_key,
        Some(UniqueKey::new("order-42").expect("valid key"))
    );
}

#[test]
fn group_key_is_checked_at_validation_and_names_its_field() {
    assert_eq!(field_of(job("q").group_key("").validate()), "group_key");
    assert_eq!(
        field_of(job("q").group_key("g".repeat(256)).validate()),
        "group_key"
    );
    let valid = job("q")
        .group_key("g".repeat(255))
        .validate()
        .expect("valid");
    assert_eq!(valid.group_key.map(|g| g.as_str().len()), Some(255));
}

#[test]
fn worker_id_follows_the_name_rules_and_names_its_field() {
    assert_eq!(field_of(WorkerId::new("")), "worker_id");
    assert_eq!(field_of(WorkerId::new("w".repeat(192))), "worker_id");
    assert_eq!(field_of(WorkerId::new("w\r")), "worker_id");
}

#[test]
fn max_attempts_must_be_between_1_and_i32_max() {
    assert_eq!(
        field_of(job("q").max_attempts(0).validate()),
        "max_attempts"
    );
    assert_eq!(
        field_of(job("q").max_attempts(MAX_MAX_ATTEMPTS + 1).validate()),
        "max_attempts"
    );
    assert!(job("q").max_attempts(1).validate().is_ok());
    assert!(job("q").max_attempts(MAX_MAX_ATTEMPTS).validate().is_ok());
}

struct Unserialisable;

impl Serialize for Unserialisable {
    fn serialize<S: Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(S::Error::custom("this value refuses to serialise"))
    }
}

#[test]
fn a_payload_that_cannot_serialise_is_an_invalid_payload() {
    let err = NewJob::new("q", Unserialisable)
        .validate()
        .expect_err("rejected");
    assert_eq!(err.invalid_field(), Some("payload"));
    assert!(err.to_string().contains("refuses to serialise"), "{err}");
}

#[test]
fn a_payload_holding_nul_anywhere_is_an_invalid_payload() {
    for payload in [
        json!("a\u{0}b"),
        json!({"k": ["x", "\u{0}"]}),
        json!({"ke\u{0}y": 1}),
    ] {
        let err = NewJob::new("q", &payload).validate().expect_err("rejected");
        assert_eq!(err.invalid_field(), Some("payload"), "{payload}");
    }
    assert!(
        NewJob::new("q", json!({"k": "\\0 is fine"}))
            .validate()
            .is_ok()
    );
}

#[test]
fn delay_may_be_zero_or_up_to_100_years_but_not_more() {
    assert!(job("q").delay(Duration::ZERO).validate().is_ok());
    assert!(
        job("q")
            .delay(queue_core::time::MAX_DURATION)
            .validate()
            .is_ok()
    );
    let too_long = queue_core::time::MAX_DURATION + Duration::from_secs(1);
    assert_eq!(field_of(job("q").delay(too_long).validate()), "delay");
    assert_eq!(field_of(job("q").delay(Duration::MAX).validate()), "delay");
}

#[test]
fn run_at_must_lie_between_1970_and_9999() {
    let before_epoch = Utc.with_ymd_and_hms(1969, 12, 31, 23, 59, 59).unwrap();
    let after_9999 = Utc.with_ymd_and_hms(10000, 1, 1, 0, 0, 0).unwrap();
    assert_eq!(field_of(job("q").run_at(before_epoch).validate()), "run_at");
    assert_eq!(field_of(job("q").run_at(after_9999).validate()), "run_at");
    let edge = Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).unwrap();
    assert!(job("q").run_at(edge).validate().is_ok());
}

#[test]
fn run_at_is_truncated_to_microseconds() {
    let at = Utc.timestamp_opt(1_700_000_000, 123_456_789).unwrap();
    let valid = job("q").run_at(at).validate().expect("valid");
    assert_eq!(
        valid.schedule,
        Schedule::At(Utc.timestamp_opt(1_700_000_000, 123_456_000).unwrap())
    );
}

#[test]
fn dequeue_request_needs_a_queue() {
    assert_eq!(
        field_of(DequeueRequest::new(
            vec![],
            1,
            Duration::from_secs(30),
            worker()
        )),
        "queues"
    );
}

#[test]
fn dequeue_limit_must_be_between_1_and_1000() {
    for bad in [0, 1001] {
        assert_eq!(
            field_of(DequeueRequest::new(
                vec![queue("q")],
                bad,
                Duration::from_secs(30),
                worker()
            )),
            "limit"
        );
    }
}

#[test]
fn dequeue_lease_must_be_between_1ms_and_a_day() {
    for bad in [
        Duration::ZERO,
        Duration::from_micros(999),
        Duration::from_secs(86_401),
    ] {
        assert_eq!(
            field_of(DequeueRequest::new(vec![queue("q")], 1, bad, worker())),
            "lease",
            "{bad:?}"
        );
    }
}

#[test]
fn dequeue_request_sorts_and_deduplicates_queues() {
    let request = DequeueRequest::new(
        vec![queue("b"), queue("a"), queue("b")],
        5,
        Duration::from_secs(1),
        worker(),
    )
    .expect("valid");
    assert_eq!(request.queues(), &[queue("a"), queue("b")]);
}

#[test]
fn history_page_size_must_be_between_1_and_1000() {
    for bad in [0, 1001] {
        let filter = HistoryFilter {
            limit: bad,
            ..HistoryFilter::default()
        };
        assert_eq!(field_of(filter.validate()), "limit");
    }
}

#[test]
fn prune_rejects_a_bad_retention_or_limit() {
    let ok = PruneRequest {
        older_than: Duration::from_secs(3600),
        status: None,
        limit: 100,
    };
    assert!(ok.validate().is_ok());
    let too_long = PruneRequest {
        older_than: Duration::MAX,
        ..ok
    };
    assert_eq!(field_of(too_long.validate()), "older_than");
    let zero = PruneRequest { limit: 0, ..ok };
    assert_eq!(field_of(zero.validate()), "limit");
    let too_many = PruneRequest {
        limit: queue_core::MAX_BATCH + 1,
        ..ok
    };
    assert_eq!(field_of(too_many.validate()), "limit");
}

#[test]
fn retry_delay_above_100_years_is_rejected() {
    assert_eq!(
        field_of(Retry::After(Duration::MAX).validate()),
        "retry_delay"
    );
    assert!(Retry::After(Duration::ZERO).validate().is_ok());
    assert!(Retry::Never.validate().is_ok());
}

#[test]
fn backoff_configuration_is_validated_field_by_field() {
    let s = Duration::from_secs;
    assert_eq!(
        field_of(Backoff::new(s(0), s(0), s(10), 0.1)),
        "backoff_base"
    );
    assert_eq!(
        field_of(Backoff::new(Duration::MAX, s(0), s(10), 0.1)),
        "backoff_base"
    );
    assert_eq!(
        field_of(Backoff::new(s(1), s(0), Duration::MAX, 0.1)),
        "backoff_max"
    );
    assert_eq!(
        field_of(Backoff::new(s(1), s(11), s(10), 0.1)),
        "backoff_min"
    );
    for jitter in [-0.1, 1.1, f64::NAN, f64::INFINITY] {
        assert_eq!(
            field_of(Backoff::new(s(1), s(0), s(10), jitter)),
            "backoff_jitter"
        );
    }
    assert!(Backoff::new(s(1), s(1), s(1), 1.0).is_ok());
}

#[test]
fn names_deserialise_only_when_valid() {
    let ok: QueueName = serde_json::from_value(json!("emails")).expect("valid");
    assert_eq!(ok.as_str(), "emails");
    let err = serde_json::from_value::<QueueName>(json!("")).expect_err("rejected");
    assert!(err.to_string().contains("queue"), "{err}");
}

#[test]
fn per_queue_limits_are_validated_and_summed() {
    let lease = Duration::from_secs(30);
    assert_eq!(
        field_of(DequeueRequest::with_queue_limits(vec![], lease, worker())),
        "queues"
    );
    assert_eq!(
        field_of(DequeueRequest::with_queue_limits(
            vec![(queue("a"), 1), (queue("a"), 2)],
            lease,
            worker()
        )),
        "queues"
    );
    for bad in [0, 1_001] {
        assert_eq!(
            field_of(DequeueRequest::with_queue_limits(
                vec![(queue("a"), bad)],
                lease,
                worker()
            )),
            "queue_limits"
        );
    }
    assert_eq!(
        field_of(DequeueRequest::with_queue_limits(
            vec![(queue("a"), 1)],
            Duration::ZERO,
            worker()
        )),
        "lease"
    );
    let request = DequeueRequest::with_queue_limits(
        vec![(queue("b"), 3), (queue("a"), 900), (queue("c"), 200)],
        lease,
        worker(),
    )
    .expect("valid");
    assert_eq!(request.queues(), [queue("a"), queue("b"), queue("c")]);
    assert_eq!(request.queue_limits(), [900, 3, 200]);
    assert_eq!(request.limit(), 1_000, "the sum, capped");
    assert_eq!(request.queue_limit(&queue("b")), 3);
    assert_eq!(request.queue_limit(&queue("zzz")), 0);
    let plain =
        DequeueRequest::new(vec![queue("b"), queue("a")], 7, lease, worker()).expect("valid");
    assert_eq!(plain.queue_limits(), [7, 7]);
}
