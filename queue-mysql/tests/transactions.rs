//! Enqueue, ack and nack inside the caller's diesel-async transaction (the
//! kit's transactional suite, `queue_testkit::transactional`), and times
//! that stay UTC whatever the session time zone.

mod common;

use async_trait::async_trait;
use chrono::{TimeZone, Utc};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};
use queue_core::{ManualClock, NewJob, QueueError, Result, Storage};
use queue_mysql::MySqlStorage;
use queue_testkit::harness::mysql::TestDatabase;
use queue_testkit::transactional::{Answer, Step, TransactionalFactory, TransactionalHarness};
use serde_json::json;
use tokio::sync::Mutex;

/// A migrated storage, an `orders` table, and a connection of the caller's own.
async fn setup() -> (TestDatabase, MySqlStorage, AsyncMysqlConnection) {
    let (db, storage) = common::storage_in_new_database().await;
    let mut conn = AsyncMysqlConnection::establish(&db.url())
        .await
        .expect("connect");
    conn.batch_execute("CREATE TABLE orders (id BIGINT PRIMARY KEY)")
        .await
        .expect("business table");
    (db, storage, conn)
}

/// The storage and the caller's connection (one transaction at a time).
struct MySqlTransactions {
    db: TestDatabase,
    storage: MySqlStorage,
    conn: Mutex<AsyncMysqlConnection>,
}

struct MySqlTransactionsFactory;

#[async_trait]
impl TransactionalFactory for MySqlTransactionsFactory {
    type Harness = MySqlTransactions;

    async fn create(&self) -> MySqlTransactions {
        let (db, storage, conn) = setup().await;
        MySqlTransactions {
            db,
            storage,
            conn: Mutex::new(conn),
        }
    }
}

/// How a diesel transaction of the harness ends early: a step failed, or
/// every step succeeded and the caller asked for a rollback.
enum Abort {
    Failed(QueueError),
    RolledBack(Vec<Answer>),
}

impl From<diesel::result::Error> for Abort {
    fn from(error: diesel::result::Error) -> Self {
        Self::Failed(QueueError::backend(format!(
            "the caller's own statement: {error}"
        )))
    }
}

impl From<QueueError> for Abort {
    fn from(error: QueueError) -> Self {
        Self::Failed(error)
    }
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

#[async_trait]
impl TransactionalHarness for MySqlTransactions {
    type Storage = MySqlStorage;

    fn storage(&self) -> &MySqlStorage {
        &self.storage
    }

    async fn run_in_transaction(&self, steps: Vec<Step>, commit: bool) -> Result<Vec<Answer>> {
        let mut conn = self.conn.lock().await;
        let storage = &self.storage;
        let ended = conn
            .transaction(async |conn| {
                let mut answers = Vec::with_capacity(steps.len());
                for step in steps {
                    answers.push(match step {
                        Step::Effect(order) => {
                            conn.batch_execute(&format!(
                                "INSERT INTO orders (id) VALUES ({order})"
                            ))
                            .await?;
                            Answer::Effect
                        }
                        Step::Enqueue(job) => {
                            Answer::Enqueued(storage.enqueue_in(conn, job).await?)
                        }
                        Step::Ack(lease, result) => {
                            storage.ack_in(conn, &lease, result).await?;
                            Answer::Acked
                        }
                        Step::Nack(lease, error, retry) => {
                            Answer::Nacked(storage.nack_in(conn, &lease, error, retry).await?)
                        }
                    });
                }
                if commit {
                    Ok(answers)
                } else {
                    Err(Abort::RolledBack(answers))
                }
            })
            .await;
        match ended {
            Ok(answers) | Err(Abort::RolledBack(answers)) => Ok(answers),
            Err(Abort::Failed(error)) => Err(error),
        }
    }

    async fn effect_committed(&self, order: i64) -> bool {
        let mut conn = self.conn.lock().await;
        diesel::sql_query(format!(
            "SELECT COUNT(*) AS n FROM orders WHERE id = {order}"
        ))
        .load::<Count>(&mut *conn)
        .await
        .expect("read orders")
        .iter()
        .any(|c| c.n == 1)
    }

    async fn finish(self) {
        drop(self.conn);
        self.db.drop_database().await;
    }
}

queue_testkit::transactional_tests!(MySqlTransactionsFactory);

#[tokio::test]
async fn times_stay_utc_in_a_non_utc_session() {
    let (db, storage, mut conn) = setup().await;
    conn.batch_execute("SET time_zone = '+05:00'")
        .await
        .expect("session time zone");

    // The database clock: UTC_TIMESTAMP(6), never the session's local time.
    let before = Utc::now();
    let outcome = storage
        .enqueue_in(&mut conn, NewJob::new("tz", json!(1)))
        .await
        .expect("enqueue_in");
    let after = Utc::now();
    let job = storage
        .get_job(outcome.id)
        .await
        .expect("get_job")
        .expect("job");
    let slack = chrono::TimeDelta::seconds(5);
    assert!(
        job.created_at >= before - slack && job.created_at <= after + slack,
        "created_at {} is not the UTC time of the enqueue ({before} ..= {after})",
        job.created_at
    );

    // A manual clock and an explicit run_at come back to the microsecond.
    let at = Utc
        .timestamp_opt(1_930_453_567, 123_456_000)
        .single()
        .expect("valid");
    let manual = storage.clone().with_clock(ManualClock::new(at));
    let run_at = at + chrono::TimeDelta::microseconds(42);
    let outcome = manual
        .enqueue_in(&mut conn, NewJob::new("tz", json!(2)).run_at(run_at))
        .await
        .expect("enqueue_in");
    let job = manual
        .get_job(outcome.id)
        .await
        .expect("get_job")
        .expect("job");
    assert_eq!((job.created_at, job.available_at), (at, run_at));
    drop(conn);
    db.drop_database().await;
}
