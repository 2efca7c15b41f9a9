//! Every conformance case of queue-testkit against MySQL / MariaDB.

mod common;

queue_testkit::conformance_tests!(common::MySqlFactory);

/// Fair claiming between groups is not built on this storage yet: the
/// setting is refused with `NotSupported` and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_groups_are_refused_until_built_here() {
    use queue_testkit::suite::StorageFactory as _;
    let fixture = common::MySqlFactory
        .create(queue_core::Clock::default())
        .await;
    let (storage, teardown) = fixture.into_parts();
    queue_testkit::suite::fairness::fair_groups_are_refused_without_the_capability(&storage).await;
    if let Some(teardown) = teardown {
        teardown.await;
    }
}
