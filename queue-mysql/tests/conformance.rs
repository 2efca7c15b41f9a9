//! Every conformance case of queue-testkit against MySQL / MariaDB.

mod common;

queue_testkit::conformance_tests!(common::MySqlFactory);

/// Fair claiming between groups is not built on this storage yet: the
/// setting is refused with `NotSupported` and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_groups_are_refused_until_built_here() {
    queue_testkit::suite::fairness::fair_groups_are_refused_by(&common::MySqlFactory).await;
}
