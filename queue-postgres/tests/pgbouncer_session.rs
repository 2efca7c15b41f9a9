//! Every conformance case of queue-testkit with the storage connected
//! through PgBouncer in session pooling mode
//! (`QUEUE_TEST_PGBOUNCER_SESSION_URL`; scripts/pgbouncer.sh, scripts/test.sh):
//! the storage needs nothing special there (docs/high-availability.md,
//! "PgBouncer"). Without the variable every case fails naming it.

mod common;

queue_testkit::conformance_tests!(pgbouncer_session: common::PgBouncerSessionFactory);
