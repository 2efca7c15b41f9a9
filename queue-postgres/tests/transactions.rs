//! Enqueue, ack and nack inside the caller's own transaction: the kit's
//! transactional suite (`queue_testkit::transactional`) on a sqlx
//! transaction of the caller's pool.

mod common;

use async_trait::async_trait;
use queue_core::{QueueError, Result};
use queue_postgres::PgStorage;
use queue_testkit::harness::postgres::TestSchema;
use queue_testkit::transactional::{Answer, Step, TransactionalFactory, TransactionalHarness};
use sqlx::PgPool;

/// A migrated storage, and the caller's pool on the same schema with a
/// business table `orders`.
struct PgTransactions {
    schema: TestSchema,
    pool: PgPool,
    storage: PgStorage,
}

struct PgTransactionsFactory;

#[async_trait]
impl TransactionalFactory for PgTransactionsFactory {
    type Harness = PgTransactions;

    async fn create(&self) -> PgTransactions {
        let (schema, pool, storage) = common::storage_in_new_schema().await;
        sqlx::query("CREATE TABLE orders (id BIGINT PRIMARY KEY)")
            .execute(&pool)
            .await
            .expect("business table");
        PgTransactions {
            schema,
            pool,
            storage,
        }
    }
}

fn business(error: sqlx::Error) -> QueueError {
    QueueError::backend(format!("the caller's own statement: {error}"))
}

#[async_trait]
impl TransactionalHarness for PgTransactions {
    type Storage = PgStorage;

    fn storage(&self) -> &PgStorage {
        &self.storage
    }

    async fn run_in_transaction(&self, steps: Vec<Step>, commit: bool) -> Result<Vec<Answer>> {
        // Dropped on an early return: sqlx rolls it back.
        let mut tx = self.pool.begin().await.map_err(business)?;
        let mut answers = Vec::with_capacity(steps.len());
        for step in steps {
            answers.push(match step {
                Step::Effect(order) => {
                    sqlx::query("INSERT INTO orders (id) VALUES ($1)")
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
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM orders WHERE id = $1")
            .bind(order)
            .fetch_one(&self.pool)
            .await
            .expect("read orders")
            == 1
    }

    async fn finish(self) {
        self.pool.close().await;
        self.schema.drop_schema().await;
    }
}

queue_testkit::transactional_tests!(PgTransactionsFactory);
