//! The whole conformance suite, one test per case, in module `conformance`.

mod common;

queue_testkit::conformance_tests!(common::TracedFactory);
