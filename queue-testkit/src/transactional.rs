//! The transactional suite: enqueue, ack and nack inside the caller's own
//! transaction, committing or rolling back together with the caller's
//! writes. For a storage that offers `enqueue_in`, `ack_in` and `nack_in`
//! on a connection of the caller's (PostgreSQL, MySQL/MariaDB, SQLite);
//! run by [`crate::transactional_tests!`], one test per case.
//!
//! A backend describes its transactions once, in a [`TransactionalHarness`]:
//! it runs a list of [`Step`]s in one transaction of its own (a business
//! write, an enqueue, an ack, a nack) and commits or rolls back. The
//! cases then check what became visible outside it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use queue_core::{
    Capability, DequeueRequest, EnqueueOutcome, FinalStatus, Job, JobState, Lease, NackOutcome,
    NewJob, QueueError, QueueName, Result, Retry, Storage, WorkerId,
};
use serde_json::{Value, json};

use crate::suite::BoxFuture;

/// One thing the caller does inside its transaction.
#[derive(Debug, Clone)]
pub enum Step {
    /// The caller's own write: business row `order` (for example
    /// `INSERT INTO orders (id) VALUES (order)` in a table the harness
    /// created).
    Effect(i64),
    /// `enqueue_in` of the job.
    Enqueue(NewJob),
    /// `ack_in` of the lease with the result.
    Ack(Lease, Option<Value>),
    /// `nack_in` of the lease with the error and the retry.
    Nack(Lease, Value, Retry),
}

/// What a [`Step`] answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The business row was written.
    Effect,
    /// `enqueue_in`'s outcome.
    Enqueued(EnqueueOutcome),
    /// `ack_in` succeeded.
    Acked,
    /// `nack_in`'s outcome.
    Nacked(NackOutcome),
}

/// A storage and a connection of the caller's own to the same database.
#[async_trait]
pub trait TransactionalHarness: Send + Sync {
    /// The storage under test.
    type Storage: Storage;

    /// The storage (its own pool, outside the caller's transactions).
    fn storage(&self) -> &Self::Storage;

    /// Runs `steps` in order in one new transaction on the caller's
    /// connection, then commits it when `commit`, else rolls it back. At
    /// the first step that fails, rolls back and returns that error.
    ///
    /// # Errors
    /// The failing step's error, as the storage returned it.
    async fn run_in_transaction(&self, steps: Vec<Step>, commit: bool) -> Result<Vec<Answer>>;

    /// Whether business row `order` is committed, read outside any
    /// transaction.
    async fn effect_committed(&self, order: i64) -> bool;

    /// Drops what the harness created (schema, database, file).
    async fn finish(self);
}

/// Makes a [`TransactionalHarness`] per case.
#[async_trait]
pub trait TransactionalFactory: Send + Sync {
    /// The harness it makes.
    type Harness: TransactionalHarness + 'static;

    /// A new harness: a migrated, empty storage on the database clock and
    /// an empty business table. Panics with the reason when it cannot.
    async fn create(&self) -> Self::Harness;
}

/// Runs one case on a new harness from `factory`, then finishes it (also
/// when the case panics, whose panic it then resumes).
///
/// # Panics
/// With the case's panic, or before running it when the harness's storage
/// does not declare [`Capability::Transactions`]: a storage that passes
/// this suite should say so, so that callers can ask it.
pub async fn run_case<F: TransactionalFactory>(
    factory: &F,
    case: fn(Arc<F::Harness>) -> BoxFuture<()>,
) {
    let harness = factory.create().await;
    let declared = harness.storage().capabilities();
    if !declared.supports(Capability::Transactions) {
        harness.finish().await;
        panic!(
            "the storage runs the transactional suite but does not declare \
             Capability::Transactions in capabilities() (it declares {declared:?})"
        );
    }
    let harness = Arc::new(harness);
    let outcome = tokio::spawn(case(Arc::clone(&harness))).await;
    match Arc::try_unwrap(harness) {
        Ok(harness) => harness.finish().await,
        Err(_) => panic!("a case kept its harness past its end"),
    }
    if let Err(error) = outcome {
        match error.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(error) => panic!("case did not finish: {error}"),
        }
    }
}

const QUEUE: &str = "orders";

fn claim_request() -> DequeueRequest {
    DequeueRequest::new(
        vec![QueueName::new(QUEUE).expect("valid")],
        1,
        Duration::from_secs(60),
        WorkerId::new("tx-worker").expect("valid"),
    )
    .expect("valid request")
}

async fn enqueue_and_claim<S: Storage>(storage: &S, order: i64) -> Job {
    storage
        .enqueue(NewJob::new(QUEUE, json!({ "order": order })))
        .await
        .expect("enqueue");
    let mut jobs = storage.dequeue(&claim_request()).await.expect("dequeue");
    assert_eq!(jobs.len(), 1, "the job just enqueued is claimed");
    jobs.remove(0)
}

fn enqueued(answers: &[Answer]) -> EnqueueOutcome {
    match answers {
        [Answer::Effect, Answer::Enqueued(outcome)] => *outcome,
        other => panic!("an effect and an enqueue answer, not {other:?}"),
    }
}

/// A job enqueued in a transaction that commits is live, pending, beside
/// the caller's write.
pub async fn enqueue_in_a_committed_transaction_keeps_the_job_and_the_effect<
    H: TransactionalHarness,
>(
    harness: Arc<H>,
) {
    let answers = harness
        .run_in_transaction(
            vec![
                Step::Effect(1),
                Step::Enqueue(NewJob::new(QUEUE, json!({ "order": 1 }))),
            ],
            true,
        )
        .await
        .expect("the transaction commits");
    let outcome = enqueued(&answers);
    assert!(!outcome.existed);
    assert!(harness.effect_committed(1).await, "the caller's write");
    let storage = harness.storage();
    let job = storage
        .get_job(outcome.id)
        .await
        .expect("get_job")
        .expect("the job is live");
    assert_eq!(
        job.state(storage.now().await.expect("now")),
        JobState::Pending
    );
    assert_eq!(job.payload, json!({ "order": 1 }));
}

/// A job enqueued in a transaction that rolls back never existed: no live
/// job, no counts, and the caller's write is gone too.
pub async fn enqueue_in_a_rolled_back_transaction_leaves_neither<H: TransactionalHarness>(
    harness: Arc<H>,
) {
    let answers = harness
        .run_in_transaction(
            vec![
                Step::Effect(2),
                Step::Enqueue(NewJob::new(QUEUE, json!({ "order": 2 }))),
            ],
            false,
        )
        .await
        .expect("the steps succeed before the rollback");
    let outcome = enqueued(&answers);
    assert!(!harness.effect_committed(2).await);
    let storage = harness.storage();
    assert_eq!(storage.get_job(outcome.id).await.expect("get_job"), None);
    let live: u64 = storage
        .stats()
        .await
        .expect("stats")
        .iter()
        .map(|s| s.live())
        .sum();
    assert_eq!(live, 0, "no job is counted");
    assert!(
        storage
            .dequeue(&claim_request())
            .await
            .expect("dequeue")
            .is_empty(),
        "nothing to claim"
    );
}

/// An ack in a transaction that commits archives the job as completed,
/// with its result, together with the handler's write.
pub async fn ack_in_a_committed_transaction_archives_with_the_effect<H: TransactionalHarness>(
    harness: Arc<H>,
) {
    let storage = harness.storage();
    let job = enqueue_and_claim(storage, 3).await;
    let lease = job.lease().expect("a claimed job has a lease");
    let answers = harness
        .run_in_transaction(
            vec![
                Step::Effect(3),
                Step::Ack(lease, Some(json!({ "shipped": 3 }))),
            ],
            true,
        )
        .await
        .expect("the transaction commits");
    assert_eq!(answers, vec![Answer::Effect, Answer::Acked]);
    assert!(harness.effect_committed(3).await);
    assert_eq!(storage.get_job(job.id).await.expect("get_job"), None);
    let record = storage
        .get_history(job.id)
        .await
        .expect("get_history")
        .expect("archived");
    assert_eq!(record.status, FinalStatus::Completed);
    assert_eq!(record.result, Some(json!({ "shipped": 3 })));
}

/// An ack in a transaction that rolls back leaves the job leased by the
/// same lease, with no history, and the handler's write undone; the lease
/// can still be acked afterwards.
pub async fn ack_in_a_rolled_back_transaction_leaves_the_job_leased<H: TransactionalHarness>(
    harness: Arc<H>,
) {
    let storage = harness.storage();
    let job = enqueue_and_claim(storage, 4).await;
    let lease = job.lease().expect("a claimed job has a lease");
    harness
        .run_in_transaction(vec![Step::Effect(4), Step::Ack(lease.clone(), None)], false)
        .await
        .expect("the steps succeed before the rollback");
    assert!(!harness.effect_committed(4).await);
    assert_eq!(
        storage.get_history(job.id).await.expect("get_history"),
        None
    );
    let live = storage
        .get_job(job.id)
        .await
        .expect("get_job")
        .expect("still live");
    assert_eq!(live.lease(), Some(lease.clone()), "the same lease holds it");
    storage
        .ack(&lease, None)
        .await
        .expect("the lease is still current");
}

/// A nack in a transaction that commits schedules the retry with the
/// error; rolled back, the job stays leased without the error.
pub async fn nack_in_follows_the_callers_transaction<H: TransactionalHarness>(harness: Arc<H>) {
    let storage = harness.storage();
    let job = enqueue_and_claim(storage, 5).await;
    let lease = job.lease().expect("a claimed job has a lease");
    let retry = Retry::After(Duration::from_secs(60));
    harness
        .run_in_transaction(
            vec![Step::Nack(lease.clone(), json!({ "why": "first" }), retry)],
            false,
        )
        .await
        .expect("the nack succeeds before the rollback");
    let live = storage
        .get_job(job.id)
        .await
        .expect("get_job")
        .expect("live");
    assert_eq!(
        live.lease(),
        Some(lease.clone()),
        "rolled back: still leased"
    );
    assert_eq!(live.last_error, None);

    let answers = harness
        .run_in_transaction(
            vec![Step::Nack(lease, json!({ "why": "second" }), retry)],
            true,
        )
        .await
        .expect("the transaction commits");
    assert!(
        matches!(answers[..], [Answer::Nacked(NackOutcome::Retrying { .. })]),
        "{answers:?}"
    );
    let live = storage
        .get_job(job.id)
        .await
        .expect("get_job")
        .expect("live, to retry");
    assert_eq!(live.lease_until, None, "no longer leased");
    assert_eq!(live.last_error, Some(json!({ "why": "second" })));
    assert_eq!(
        live.state(storage.now().await.expect("now")),
        JobState::Scheduled
    );
}

/// An ack in the caller's transaction of a lease that is no longer current
/// is [`QueueError::LeaseLost`]; the transaction rolls back, so the
/// caller's write goes with it and the job is untouched.
pub async fn ack_in_of_a_lost_lease_is_lease_lost_and_writes_nothing<H: TransactionalHarness>(
    harness: Arc<H>,
) {
    let storage = harness.storage();
    let job = enqueue_and_claim(storage, 6).await;
    let lease = job.lease().expect("a claimed job has a lease");
    storage
        .ack(&lease, Some(json!("first")))
        .await
        .expect("acked outside");
    let error = harness
        .run_in_transaction(vec![Step::Effect(6), Step::Ack(lease, None)], true)
        .await
        .expect_err("the lease is gone");
    assert!(
        matches!(error, QueueError::LeaseLost { .. }),
        "LeaseLost, not {error:?}"
    );
    assert!(!harness.effect_committed(6).await, "rolled back");
    let record = storage
        .get_history(job.id)
        .await
        .expect("get_history")
        .expect("archived once");
    assert_eq!(record.result, Some(json!("first")), "history written once");
}
