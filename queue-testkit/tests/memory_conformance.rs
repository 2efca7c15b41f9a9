//! `MemoryStorage` passes the whole conformance suite, both ways of running it.

use queue_testkit::MemoryFactory;

queue_testkit::conformance_tests!(MemoryFactory);

// A second expansion in the same file, as two backends sharing one test file
// would write it: each lives in its own module, so nothing collides.
queue_testkit::conformance_tests!(second_backend: queue_testkit::MemoryFactory);

#[tokio::test]
async fn run_all_reports_every_case_passed() {
    let report = queue_testkit::suite::run_all(&MemoryFactory).await;
    assert!(report.is_success(), "{:#?}", report.failed);
    assert_eq!(
        report.passed.len(),
        queue_testkit::suite::cases::<queue_testkit::MemoryStorage>().len()
    );
}
