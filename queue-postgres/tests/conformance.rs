//! Every conformance case of queue-testkit against PostgreSQL: as
//! migrated, again with the optional partial unique-key index
//! (`queue-postgres/migrations/optional/keyless_jobs_unindexed.sql`), which the
//! storage supports as well, and again with claims committing
//! asynchronously (`PgStorage::with_async_claims`).

mod common;

queue_testkit::conformance_tests!(common::PgFactory);
queue_testkit::conformance_tests!(keyless_unindexed: common::PgKeylessUnindexedFactory);
queue_testkit::conformance_tests!(async_claims: common::PgAsyncClaimsFactory);

/// Fair claiming between groups is not built on this storage yet: the
/// setting is refused with `NotSupported` and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_groups_are_refused_until_built_here() {
    queue_testkit::suite::fairness::fair_groups_are_refused_by(&common::PgFactory).await;
}
