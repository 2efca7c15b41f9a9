//! `PgStorage::with_async_claims`: a claim's own transaction commits with
//! `synchronous_commit = off`, and only that transaction; a storage
//! without the option leaves the setting alone. A test of the crate's own
//! statements, so it lives beside them.

use std::time::Duration;

use queue_core::{DequeueRequest, NewJob, QueueName, Storage, WorkerId};
use serde_json::json;
use sqlx::{Acquire, PgConnection};

use crate::dequeue::ClaimBinds;

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
    let jobs = (0..4).map(|i| NewJob::new("q", json!(i))).collect();
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
    for (on, limited) in [(false, false), (false, true), (true, false), (true, true)] {
        let storage = storage.clone().with_async_claims(on);
        assert_eq!(storage.async_claims(), on);
        let (statement, several) = storage.dequeue_statement(&request, limited);
        let mut tx = conn.begin().await.expect("begin");
        let claimed = storage
            .bind_claim(sqlx::query(statement), &request, &binds, several)
            .fetch_all(&mut *tx)
            .await
            .expect("claim");
        assert_eq!(claimed.len(), 1, "async {on}, limited {limited}");
        let expected = if on { "off" } else { "on" };
        assert_eq!(
            setting(&mut tx).await,
            expected,
            "in the claim's transaction (async {on}, limited {limited})"
        );
        tx.commit().await.expect("commit");
        assert_eq!(
            setting(&mut conn).await,
            session,
            "after the claim's transaction (async {on}, limited {limited})"
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
