//! Every conformance case of queue-testkit against PostgreSQL: as
//! migrated, again with the optional partial unique-key index
//! (`queue-postgres/migrations/optional/keyless_jobs_unindexed.sql`), which the
//! storage supports as well, and again with claims committing
//! asynchronously (`PgStorage::with_async_claims`).

mod common;

queue_testkit::conformance_tests!(common::PgFactory);
queue_testkit::conformance_tests!(keyless_unindexed: common::PgKeylessUnindexedFactory);
queue_testkit::conformance_tests!(async_claims: common::PgAsyncClaimsFactory);

/// PostgreSQL does not declare group limits yet (issue 38, item 1, is on
/// the memory storage and SQLite): every group input is refused and
/// nothing is written.
#[tokio::test]
async fn group_limits_are_refused_until_implemented() {
    use queue_testkit::suite::StorageFactory;
    let (storage, teardown) = common::PgFactory
        .create(queue_core::Clock::Database)
        .await
        .into_parts();
    queue_testkit::suite::groups::group_limits_are_refused_without_the_capability(&storage).await;
    drop(storage);
    if let Some(teardown) = teardown {
        teardown.await;
    }
}
