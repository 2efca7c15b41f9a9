//! `PgStorage::with_async_claims`: a claim's own transaction commits with
//! `synchronous_commit = off`, and only that transaction; a storage
//! without the option leaves the setting alone. A test of the crate's own
//! statements, so it lives beside them.

use std::time::Duration;

use queue_core::{DequeueRequest, NewJob, QueueLimits, QueueName, Storage, WorkerId};
use serde_json::json;
use sqlx::{Acquire, PgConnection};

use crate::dequeue::ClaimBinds;
use crate::flow::ClaimPath;

const SETTING: &str = "SELECT current_setting('synchronous_commit')";

async fn setting(conn: &mut PgConnection) -> String {
    sqlx::query_scalar(SETTING)
        .fetch_one(conn)
        .await
        .expect("read the setting")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_claims_turn_synchronous_commit_off_for_the_claim_alone() {
    let (schema, pool, storage) = crate::test_schema::migrated_storage().await;
    // Groups only, so that every claim statement claims from it (jobs
    // without a group are never held back).
    let groups_only = QueueLimits {
        group_concurrency: Some(1),
        ..QueueLimits::default()
    };
    let queue = QueueName::new("q").expect("valid");
    storage
        .configure_queue(&queue, &groups_only)
        .await
        .expect("configure");
    let jobs = (0..6).map(|i| NewJob::new("q", json!(i))).collect();
    storage.enqueue_batch(jobs).await.expect("enqueue");
    let request = DequeueRequest::new(
        vec![QueueName::new("q").expect("valid")],
        1,
        Duration::from_secs(30),
        WorkerId::new("w").expect("valid"),
    )
    .expect("request");
    let binds = ClaimBinds::of(&request);

    let mut conn = pool.acquire().await.expect("connection");
    let session = setting(&mut conn).await;
    assert_eq!(
        session, "on",
        "the test server commits synchronously by default"
    );
    let paths = [ClaimPath::Plain, ClaimPath::Limited, ClaimPath::Grouped];
    for (on, path) in [false, true]
        .into_iter()
        .flat_map(|on| paths.map(|path| (on, path)))
    {
        let storage = storage.clone().with_async_claims(on);
        assert_eq!(storage.async_claims(), on);
        let (statement, several) = storage.dequeue_statement(&request, path);
        let mut tx = conn.begin().await.expect("begin");
        let claimed = storage
            .bind_claim(sqlx::query(statement), &request, &binds, several)
            .fetch_all(&mut *tx)
            .await
            .expect("claim");
        assert_eq!(claimed.len(), 1, "async {on}, {path:?}");
        let id: Option<i64> = sqlx::Row::try_get(&claimed[0], "id").expect("id");
        assert!(id.is_some(), "a job claimed: async {on}, {path:?}");
        let expected = if on { "off" } else { "on" };
        assert_eq!(
            setting(&mut tx).await,
            expected,
            "in the claim's transaction (async {on}, {path:?})"
        );
        tx.commit().await.expect("commit");
        assert_eq!(
            setting(&mut conn).await,
            session,
            "after the claim's transaction (async {on}, {path:?})"
        );
    }
    // The option survives a change of schema.
    let moved = storage
        .with_async_claims(true)
        .with_schema(schema.name())
        .expect("valid schema");
    assert!(moved.async_claims());

    drop(conn);
    pool.close().await;
    schema.drop_schema().await;
}
