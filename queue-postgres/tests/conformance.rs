//! Every conformance case of queue-testkit against PostgreSQL: as
//! migrated, again with the optional partial unique-key index
//! (`queue-postgres/migrations/optional/keyless_jobs_unindexed.sql`), which the
//! storage supports as well, and again with claims committing
//! asynchronously (`PgStorage::with_async_claims`).

mod common;

queue_testkit::conformance_tests!(common::PgFactory);
queue_testkit::conformance_tests!(keyless_unindexed: common::PgKeylessUnindexedFactory);
queue_testkit::conformance_tests!(async_claims: common::PgAsyncClaimsFactory);
