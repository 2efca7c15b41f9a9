//! The storage through a PgBouncer in transaction pooling mode
//! (`QUEUE_TEST_PGBOUNCER_URL`, a server pool of 4; scripts/pgbouncer.sh,
//! scripts/test.sh) with `PgStorage::with_transaction_pooling(true)`:
//! every conformance case and the model, its wake-ups on a direct
//! connection (`QUEUE_TEST_POSTGRES_URL`); and without one, no wake-ups
//! declared and no LISTEN through PgBouncer (docs/high-availability.md,
//! "PgBouncer"). Without the variables every test fails naming them.

mod common;

use queue_core::{Capability, Clock, NewJob, QueueError, Storage};
use queue_testkit::harness::postgres::TestSchema;
use queue_testkit::model::{ModelConfig, check_against_model};

queue_testkit::conformance_tests!(pgbouncer_transaction: common::PgBouncerTransactionFactory);

/// As tests/model.rs, through PgBouncer.
#[test]
fn transaction_pooling_agrees_with_the_model() {
    check_against_model(
        &common::PgBouncerTransactionFactory,
        ModelConfig {
            cases: 12,
            max_ops: 50,
        },
    );
}

/// Without a direct connection to listen on, the storage declares no
/// wake-ups, `subscribe` answers `None` (the worker polls) and `listen`
/// refuses, rather than LISTEN through PgBouncer; everything else works,
/// enqueues' NOTIFY included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_listen_connection_there_are_no_wakeups() {
    let schema = TestSchema::create().await;
    let storage = common::transaction_pooled(&schema, Clock::Database, false).await;
    storage.migrate().await.expect("migrate through PgBouncer");
    let declared = storage.capabilities();
    assert!(!declared.supports(Capability::Wakeups));
    assert!(!declared.supports(Capability::RemoteWakeups));
    assert!(declared.supports(Capability::Transactions));
    assert!(storage.subscribe().await.expect("subscribe").is_none());
    let refused = storage
        .listen()
        .await
        .expect_err("listen through PgBouncer");
    assert!(
        matches!(refused, QueueError::NotSupported { .. }),
        "{refused:?}"
    );
    storage
        .index_keyless_jobs(true)
        .await
        .expect("the index is already in that form: nothing to do");
    let refused = storage
        .index_keyless_jobs(false)
        .await
        .expect_err("CREATE INDEX CONCURRENTLY through transaction pooling");
    assert_eq!(refused.invalid_field(), Some("transaction_pooling"));
    // A batch (NOTIFY after the commit) and a lone job (NOTIFY inside).
    storage
        .enqueue_batch(vec![NewJob::new("q", serde_json::json!(1)); 3])
        .await
        .expect("batch enqueue");
    storage
        .enqueue(NewJob::new("q", serde_json::json!(2)))
        .await
        .expect("enqueue");
    let stats = storage.stats().await.expect("stats");
    assert_eq!(stats[0].pending, 4);
    storage.pool().close().await;
    schema.drop_schema().await;
}
