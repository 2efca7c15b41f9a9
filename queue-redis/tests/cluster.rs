//! The conformance suite and the model test against a Redis Cluster
//! (`scripts/redis-cluster.sh start`; `QUEUE_TEST_REDIS_CLUSTER_URL`).

mod common;

use queue_testkit::model::{ModelConfig, check_against_model};

queue_testkit::conformance_tests!(on_cluster: common::RedisFactory::CLUSTER);

#[test]
fn redis_cluster_agrees_with_the_model() {
    check_against_model(&common::RedisFactory::CLUSTER, ModelConfig::default());
}
