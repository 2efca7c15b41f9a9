//! Every conformance case of queue-testkit against SQLite.

mod common;

queue_testkit::conformance_tests!(common::SqliteFactory);
