//! Every conformance case of queue-testkit against SQLite in a file: the
//! path applications run (WAL, pooled readers, the separate write
//! connection), where `conformance.rs` runs in memory.

mod common;

queue_testkit::conformance_tests!(common::SqliteFileFactory);
