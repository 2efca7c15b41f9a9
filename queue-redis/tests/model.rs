//! Random operation sequences on a standalone Redis, compared with the model.

mod common;

use queue_testkit::model::{ModelConfig, check_against_model};

#[test]
fn redis_agrees_with_the_model() {
    check_against_model(&common::RedisFactory::STANDALONE, ModelConfig::default());
}

/// Two dequeuers over two queues at once, one job each: each must get one
/// of the best two jobs, never the worse job of the queue both peeked
/// first (found by the model test; a race, so replayed many times).
#[test]
fn concurrent_dequeues_over_two_queues_take_only_the_best_jobs() {
    use queue_testkit::model::{JobSpec, Op::*, replay};

    let job = |queue, priority| JobSpec {
        queue,
        key: None,
        priority,
        delay_secs: None,
        max_attempts: 1,
        invalid: false,
    };
    for _ in 0..30 {
        replay(
            &common::RedisFactory::STANDALONE,
            &[
                Enqueue(job(1, 0)),
                Enqueue(job(1, -1)),
                Enqueue(job(0, 0)),
                ConcurrentClaims {
                    workers: 2,
                    limit: 1,
                },
            ],
        );
    }
}
