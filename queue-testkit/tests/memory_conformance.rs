//! `MemoryStorage` passes the whole conformance suite, both ways of running it.

use queue_testkit::MemoryFactory;

queue_testkit::conformance_tests!(MemoryFactory);

// A second expansion in the same file, as two backends sharing one test file
// would write it: each lives in its own module, so nothing collides.
queue_testkit::conformance_tests!(second_backend: queue_testkit::MemoryFactory);

/// Every case passes but the one of wake-ups, which the memory storage
/// does not declare and which is reported as not run.
#[tokio::test]
async fn run_all_reports_every_case_passed_but_those_of_wakeups() {
    let report = queue_testkit::suite::run_all(&MemoryFactory).await;
    assert!(report.is_success(), "{:#?}", report.failed);
    let not_run: Vec<&str> = report
        .not_run
        .iter()
        .map(|(label, _)| label.as_str())
        .collect();
    assert_eq!(
        not_run,
        [
            "handles::wakeups_reach_a_subscriber_on_another_handle",
            "workflows::a_released_job_wakes_subscribers",
        ]
    );
    assert_eq!(
        report.passed.len() + 2,
        queue_testkit::suite::cases::<queue_testkit::MemoryStorage>().len()
    );
}
