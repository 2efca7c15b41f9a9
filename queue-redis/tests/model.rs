//! Random operation sequences on a standalone Redis, compared with the model.

mod common;

use queue_testkit::model::{ModelConfig, check_against_model};

#[test]
fn redis_agrees_with_the_model() {
    check_against_model(
        &common::RedisFactory::STANDALONE,
        ModelConfig {
            cases: 12,
            max_ops: 50,
        },
    );
}
