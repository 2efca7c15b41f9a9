//! The pool checks a connection only after it sat idle
//! (`PING_IDLE_AFTER`), and a connection the server dropped is never
//! handed out twice: while idle it is found by the check, while in use its
//! failure drops the pool's idle connections.

mod common;

use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use queue_core::backend::PING_IDLE_AFTER;
use queue_core::{NewJob, QueueError, Storage};
use queue_mysql::MySqlStorage;
use queue_testkit::harness::mysql::TestDatabase;
use serde_json::json;

#[derive(QueryableByName)]
struct Id {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

/// The server's id of the connection the pool hands out next.
async fn connection_id(storage: &MySqlStorage) -> i64 {
    let mut conn = storage.pool().get().await.expect("a connection");
    diesel::sql_query("SELECT CAST(CONNECTION_ID() AS SIGNED) AS id")
        .get_result::<Id>(&mut conn)
        .await
        .expect("connection id")
        .id
}

/// Kills connection `id` from a connection of its own.
async fn kill(db: &TestDatabase, id: i64) {
    let mut admin = AsyncMysqlConnection::establish(&db.url())
        .await
        .expect("admin connection");
    diesel::sql_query(format!("KILL CONNECTION {id}"))
        .execute(&mut admin)
        .await
        .expect("kill");
}

/// A storage with one connection, migrated, in a new database.
async fn one_connection() -> (TestDatabase, MySqlStorage) {
    common::storage_in_new_database_of(1).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_dropped_while_idle_is_replaced() {
    let (db, storage) = one_connection().await;
    let first = connection_id(&storage).await;
    // Back to back, the same connection serves.
    assert_eq!(connection_id(&storage).await, first);

    kill(&db, first).await;
    tokio::time::sleep(PING_IDLE_AFTER + Duration::from_millis(300)).await;
    // Idle past the threshold: checked, found dead, replaced, so even an
    // operation that is not retried succeeds.
    storage
        .enqueue(NewJob::new("pool", json!({})))
        .await
        .expect("an idle connection the server dropped is replaced");
    assert_ne!(connection_id(&storage).await, first);
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_lost_in_use_is_not_handed_out_again() {
    let (db, storage) = one_connection().await;
    let first = connection_id(&storage).await;
    kill(&db, first).await;
    // Used a moment ago, so handed out unchecked: an operation that is not
    // retried reports the loss ...
    let lost = storage.enqueue(NewJob::new("pool", json!({}))).await;
    assert!(
        matches!(lost, Err(QueueError::Unavailable(_))),
        "the killed connection's statement: {lost:?}"
    );
    // ... and the dead connection is gone from the pool: the next one
    // works at once.
    storage
        .enqueue(NewJob::new("pool", json!({})))
        .await
        .expect("a fresh connection");
    assert_ne!(connection_id(&storage).await, first);

    // An operation that is retried survives the loss itself.
    let second = connection_id(&storage).await;
    kill(&db, second).await;
    let stats = storage
        .stats()
        .await
        .expect("stats after a lost connection");
    assert_eq!(stats.iter().map(|s| s.live()).sum::<u64>(), 1);
    db.drop_database().await;
}
