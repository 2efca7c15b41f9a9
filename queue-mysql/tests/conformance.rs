//! Every conformance case of queue-testkit against MySQL / MariaDB.

mod common;

queue_testkit::conformance_tests!(common::MySqlFactory);
