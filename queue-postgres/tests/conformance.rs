//! Every conformance case of queue-testkit against PostgreSQL.

mod common;

queue_testkit::conformance_tests!(common::PgFactory);
