//! Every conformance case of queue-testkit against MySQL / MariaDB.

mod common;

queue_testkit::conformance_tests!(common::MySqlFactory);

/// MySQL / MariaDB does not declare priority aging yet (issue 38, item 3,
/// is on the memory storage, SQLite and PostgreSQL): a period is refused
/// and nothing is written.
#[tokio::test]
async fn priority_aging_is_refused_until_implemented() {
    use queue_testkit::suite::StorageFactory;
    let (storage, teardown) = common::MySqlFactory
        .create(queue_core::Clock::Database)
        .await
        .into_parts();
    queue_testkit::suite::aging::priority_aging_is_refused_without_the_capability(&storage).await;
    drop(storage);
    if let Some(teardown) = teardown {
        teardown.await;
    }
}
