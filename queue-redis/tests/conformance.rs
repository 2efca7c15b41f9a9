//! Every conformance case of queue-testkit against a standalone Redis.

mod common;

queue_testkit::conformance_tests!(common::RedisFactory::STANDALONE);
