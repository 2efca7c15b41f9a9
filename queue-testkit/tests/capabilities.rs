//! Each conformance case names every optional capability it uses, and a
//! storage that does not declare one gets those cases reported as not run.

use queue_core::{Capabilities, Capability, Storage};
use queue_testkit::MemoryFactory;
use queue_testkit::restricted::RestrictedFactory;
use queue_testkit::suite::{self, StorageFactory};

/// Every case passes on a memory storage that offers only the capabilities
/// the case says it needs: a case that called anything else would get
/// `NotSupported` and fail here. (Cases of what the memory storage itself
/// lacks, wake-ups, cannot be checked this way.)
#[tokio::test]
async fn each_case_runs_with_only_the_capabilities_it_names() {
    let memory = queue_testkit::MemoryStorage::new().capabilities();
    let mut failed = Vec::new();
    let mut checked = 0;
    for case in suite::cases() {
        if !memory.supports_all(case.requires) {
            continue;
        }
        checked += 1;
        let factory = RestrictedFactory {
            inner: MemoryFactory,
            offered: Capabilities::of(case.requires),
        };
        let label = case.label();
        let report = suite::run_all_of(&factory, vec![case]).await;
        assert!(report.not_run.is_empty(), "{label} did not run: {report:?}");
        failed.extend(report.failed);
    }
    assert!(
        failed.is_empty(),
        "cases that use a capability they do not name: {failed:#?}"
    );
    assert!(checked >= 120, "only {checked} cases checked");
}

/// On a core-only storage exactly the cases that name a capability are not
/// run, each with what it needs, and every other case passes.
#[tokio::test]
async fn a_core_only_storage_runs_the_core_cases_and_lists_the_rest() {
    let factory = RestrictedFactory {
        inner: MemoryFactory,
        offered: Capabilities::CORE,
    };
    let report = suite::run_all(&factory).await;
    assert!(report.is_success(), "{:#?}", report.failed);
    let expected: Vec<String> = (suite::cases::<queue_testkit::MemoryStorage>().iter())
        .filter(|case| !case.requires.is_empty())
        .map(|case| case.label())
        .collect();
    let not_run: Vec<String> = report
        .not_run
        .iter()
        .map(|(label, _)| label.clone())
        .collect();
    assert_eq!(not_run, expected);
    assert!(
        report.passed.len() >= 60,
        "the core alone has most cases: {}",
        report.passed.len()
    );
    let lines = report.not_run_lines();
    assert!(
        lines.iter().any(|line| line
            == "conformance case snooze::snooze_puts_the_job_off_without_counting_an_attempt \
                NOT RUN: the storage does not declare snooze (snoozing jobs)"),
        "{lines:#?}"
    );
}

/// A restricted storage hides what it was not given, answers
/// `NotSupported` naming the capability, and never offers more than the
/// storage under it declares.
#[tokio::test]
async fn a_hidden_capability_answers_not_supported() {
    let factory = RestrictedFactory {
        inner: MemoryFactory,
        offered: Capabilities::CORE
            .with(Capability::Pause)
            .with(Capability::Wakeups),
    };
    let (storage, _) = factory
        .create(queue_core::Clock::Database)
        .await
        .into_parts();
    // The memory storage has no wake-ups: they cannot be offered.
    assert_eq!(
        storage.capabilities(),
        Capabilities::CORE.with(Capability::Pause)
    );
    let queue = queue_core::QueueName::new("q").unwrap();
    storage.pause_queue(&queue).await.expect("pause is offered");
    let error = storage.schedules().await.unwrap_err();
    assert!(
        matches!(
            error,
            queue_core::QueueError::NotSupported {
                operation: "schedules",
                capability: Some(Capability::Periodic)
            }
        ),
        "{error:?}"
    );
}

/// A storage without group limits refuses every group input, as the
/// helper backends without them call checks.
#[tokio::test]
async fn a_storage_without_group_limits_refuses_group_input() {
    let offered = Capabilities::OPERATIONS.with(Capability::Workers);
    let storage =
        queue_testkit::restricted::Restricted::new(queue_testkit::MemoryStorage::new(), offered);
    suite::groups::group_limits_are_refused_without_the_capability(&storage).await;
}

/// A storage without priority aging refuses a period and writes nothing,
/// as the helper backends without it call checks.
#[tokio::test]
async fn a_storage_without_priority_aging_refuses_a_period() {
    let offered = Capabilities::OPERATIONS.with(Capability::GroupLimits);
    let storage =
        queue_testkit::restricted::Restricted::new(queue_testkit::MemoryStorage::new(), offered);
    suite::aging::priority_aging_is_refused_without_the_capability(&storage).await;
}

/// A storage without fair groups refuses the setting and writes nothing,
/// as the backends without it call checks.
#[tokio::test]
async fn a_storage_without_fair_groups_refuses_the_setting() {
    let offered = Capabilities::OPERATIONS.with(Capability::GroupLimits);
    let storage =
        queue_testkit::restricted::Restricted::new(queue_testkit::MemoryStorage::new(), offered);
    suite::fairness::fair_groups_are_refused_without_the_capability(&storage).await;
}

/// A harness over a storage that does not declare transactions (the memory
/// storage): the transactional suite refuses to run its cases.
struct Undeclared(queue_testkit::MemoryStorage);

#[async_trait::async_trait]
impl queue_testkit::transactional::TransactionalHarness for Undeclared {
    type Storage = queue_testkit::MemoryStorage;

    fn storage(&self) -> &Self::Storage {
        &self.0
    }

    async fn run_in_transaction(
        &self,
        _steps: Vec<queue_testkit::transactional::Step>,
        _commit: bool,
    ) -> queue_core::Result<Vec<queue_testkit::transactional::Answer>> {
        Err(queue_core::QueueError::backend("no transactions here"))
    }

    async fn effect_committed(&self, _order: i64) -> bool {
        false
    }

    async fn finish(self) {}
}

struct UndeclaredFactory;

#[async_trait::async_trait]
impl queue_testkit::transactional::TransactionalFactory for UndeclaredFactory {
    type Harness = Undeclared;

    async fn create(&self) -> Undeclared {
        Undeclared(queue_testkit::MemoryStorage::new())
    }
}

#[tokio::test]
async fn the_transactional_suite_asks_for_the_declared_capability() {
    let run = tokio::spawn(queue_testkit::transactional::run_case(
        &UndeclaredFactory,
        |harness| {
            Box::pin(
                queue_testkit::transactional::enqueue_in_a_rolled_back_transaction_leaves_neither(
                    harness,
                ),
            )
        },
    ));
    let panic = run.await.expect_err("refused").into_panic();
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        message.contains("does not declare Capability::Transactions"),
        "{message}"
    );
}
