//! `pool_options`: connections are pinged only after sitting idle, and a
//! connection the server dropped while idle is replaced, not handed out.

use std::time::Duration;

use queue_postgres::{PING_IDLE_AFTER, pool_options};
use queue_testkit::harness::postgres::TestSchema;

/// The backend pid of the connection the pool hands out next.
async fn backend_pid(pool: &sqlx::PgPool) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(pool)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_dropped_while_idle_is_replaced() {
    let schema = TestSchema::create().await;
    let admin = schema.pool().await;
    let pool = pool_options()
        .max_connections(1)
        .connect_with(schema.connect_options())
        .await
        .expect("connect");
    let first = backend_pid(&pool).await.expect("first statement");
    // Back to back, the same connection serves without a ping.
    assert_eq!(backend_pid(&pool).await.expect("second statement"), first);

    let killed: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(first)
        .fetch_one(&admin)
        .await
        .expect("terminate");
    assert!(killed, "the pool's connection was terminated");
    tokio::time::sleep(PING_IDLE_AFTER + Duration::from_millis(300)).await;

    // Idle past the threshold: pinged, found dead, replaced.
    let replaced = backend_pid(&pool)
        .await
        .expect("an idle connection the server dropped is replaced");
    assert_ne!(replaced, first);
    pool.close().await;
    schema.drop_schema().await;
}
