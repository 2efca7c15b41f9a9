//! The conformance suite and the model test against a Redis Cluster
//! (`scripts/redis-cluster.sh start`; `QUEUE_TEST_REDIS_CLUSTER_URL`).

mod common;

use queue_testkit::model::{ModelConfig, check_against_model};

queue_testkit::conformance_tests!(on_cluster: common::RedisFactory::CLUSTER);

#[test]
fn redis_cluster_agrees_with_the_model() {
    check_against_model(&common::RedisFactory::CLUSTER, ModelConfig::default());
}

/// Workflows span queues, hence slots: a Cluster storage does not declare
/// them nor batches (design.md), refuses a job with a dependency or a
/// join writing nothing of its batch, and answers `job_links` with
/// `NotSupported`.
#[tokio::test]
async fn a_cluster_storage_refuses_dependencies() {
    use queue_core::{Capability, JobFilter, NewJob, QueueError, Storage};

    let namespace = common::fresh_namespace();
    let storage = common::connect(true)
        .await
        .with_namespace(&namespace)
        .expect("a valid namespace");
    assert!(!storage.capabilities().supports(Capability::Dependencies));
    queue_testkit::suite::batches::joins_are_refused_without_the_capability(&storage).await;
    let a = storage
        .enqueue(NewJob::new("q", serde_json::json!(1)))
        .await
        .expect("enqueue")
        .id;
    let refused = storage
        .enqueue_batch(vec![
            NewJob::new("after", serde_json::json!(2)),
            NewJob::new("after", serde_json::json!(3)).depends_on(a),
        ])
        .await;
    assert!(
        matches!(
            refused,
            Err(QueueError::NotSupported {
                capability: Some(Capability::Dependencies),
                ..
            })
        ),
        "{refused:?}"
    );
    let listed = storage
        .list_jobs(&JobFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .expect("list_jobs");
    assert_eq!(listed.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [a]);
    assert!(matches!(
        storage.job_links(a).await,
        Err(QueueError::NotSupported { .. })
    ));
    common::purge(true, namespace).await;
}
