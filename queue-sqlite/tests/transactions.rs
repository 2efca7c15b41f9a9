//! Enqueue, ack and nack inside the caller's own SQLite transaction (the
//! kit's transactional suite, `queue_testkit::transactional`), and
//! wake-ups inside one process.

use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use queue_core::{NewJob, QueueError, QueueName, Result, Storage, Wakeup};
use queue_sqlite::SqliteStorage;
use queue_testkit::transactional::{Answer, Step, TransactionalFactory, TransactionalHarness};
use serde_json::json;

/// A storage on a file (a pool of several connections) plus a business
/// table; the caller's transactions take a connection of the same pool.
struct SqliteTransactions {
    _dir: tempfile::TempDir,
    storage: SqliteStorage,
}

struct SqliteTransactionsFactory;

#[async_trait]
impl TransactionalFactory for SqliteTransactionsFactory {
    type Harness = SqliteTransactions;

    async fn create(&self) -> SqliteTransactions {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("q.db").display());
        let storage = SqliteStorage::connect(&url).await.expect("connect");
        sqlx::query("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
            .execute(storage.pool())
            .await
            .expect("business table");
        SqliteTransactions { _dir: dir, storage }
    }
}

fn business(error: sqlx::Error) -> QueueError {
    QueueError::backend(format!("the caller's own statement: {error}"))
}

#[async_trait]
impl TransactionalHarness for SqliteTransactions {
    type Storage = SqliteStorage;

    fn storage(&self) -> &SqliteStorage {
        &self.storage
    }

    async fn run_in_transaction(&self, steps: Vec<Step>, commit: bool) -> Result<Vec<Answer>> {
        // BEGIN IMMEDIATE, as a writer should: the write lock up front.
        // Dropped on an early return: sqlx rolls it back.
        let mut tx = self
            .storage
            .pool()
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(business)?;
        let mut answers = Vec::with_capacity(steps.len());
        for step in steps {
            answers.push(match step {
                Step::Effect(order) => {
                    sqlx::query("INSERT INTO orders (id) VALUES (?1)")
                        .bind(order)
                        .execute(&mut *tx)
                        .await
                        .map_err(business)?;
                    Answer::Effect
                }
                Step::Enqueue(job) => {
                    Answer::Enqueued(self.storage.enqueue_in(&mut tx, job).await?)
                }
                Step::Ack(lease, result) => {
                    self.storage.ack_in(&mut tx, &lease, result).await?;
                    Answer::Acked
                }
                Step::Nack(lease, error, retry) => {
                    Answer::Nacked(self.storage.nack_in(&mut tx, &lease, error, retry).await?)
                }
            });
        }
        if commit {
            tx.commit().await.map_err(business)?;
        } else {
            tx.rollback().await.map_err(business)?;
        }
        Ok(answers)
    }

    async fn effect_committed(&self, order: i64) -> bool {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM orders WHERE id = ?1")
            .bind(order)
            .fetch_one(self.storage.pool())
            .await
            .expect("read orders")
            == 1
    }

    async fn finish(self) {
        self.storage.pool().close().await;
    }
}

queue_testkit::transactional_tests!(SqliteTransactionsFactory);

#[tokio::test]
async fn subscribers_are_woken_by_commits_of_this_process() {
    let harness = SqliteTransactionsFactory.create().await;
    let storage = harness.storage().clone();
    let mut wakeups = storage
        .subscribe()
        .await
        .expect("subscribe")
        .expect("a stream");
    // A clone shares the subscribers.
    let other = storage.clone();
    other
        .enqueue(NewJob::new("orders", json!({"order": 1})))
        .await
        .expect("enqueue");
    let wakeup = tokio::time::timeout(Duration::from_secs(5), wakeups.next())
        .await
        .expect("woken within 5 s")
        .expect("stream open")
        .expect("no error");
    assert_eq!(
        wakeup,
        Wakeup::Queue(QueueName::new("orders").expect("valid"))
    );
}
