//! Running cases: on a fresh storage each, skipped with a reason when the
//! storage or its factory lacks what a case needs, one by one or all in a
//! report.

use std::sync::Arc;

use queue_core::{Capability, Clock, ManualClock, Storage};

use super::{Case, Ctx, StorageFactory, cases, start};

/// Why a case did not run: what it needs that the storage or its factory
/// does not offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotRun {
    /// The capabilities it needs that the storage does not declare.
    pub capabilities: Vec<Capability>,
    /// True when it needs a second handle and the factory opens none.
    pub second_handle: bool,
}

impl std::fmt::Display for NotRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut reasons: Vec<String> = (self.capabilities.iter())
            .map(|c| format!("the storage does not declare {c} ({})", c.what()))
            .collect();
        if self.second_handle {
            reasons.push("the factory opens no second handle".to_owned());
        }
        f.write_str(&reasons.join("; "))
    }
}

/// What became of one case.
enum Outcome {
    Passed,
    Failed(Box<dyn std::any::Any + Send>),
    NotRun(NotRun),
}

/// Makes the case's storage, runs the case unless the storage lacks a
/// capability it needs (or the factory a second handle), then tears down.
async fn execute<F: StorageFactory>(factory: &F, case: &Case<F::Storage>) -> Outcome {
    let clock = ManualClock::new(start());
    let mut fixture = factory.create(Clock::Manual(clock.clone())).await;
    let declared = fixture.storage.capabilities();
    let second = fixture.take_second_handle();
    let missing = NotRun {
        capabilities: (case.requires.iter().copied())
            .filter(|c| !declared.supports(*c))
            .collect(),
        second_handle: case.handles > 1 && second.is_none(),
    };
    let outcome = if missing.capabilities.is_empty() && !missing.second_handle {
        let other = match second {
            Some(open) if case.handles > 1 => Some(Arc::new(open.await)),
            _ => None,
        };
        let ctx = Ctx {
            storage: Arc::new(fixture.storage),
            clock,
            other,
        };
        match tokio::spawn((case.run)(ctx)).await {
            Ok(()) => Outcome::Passed,
            Err(error) => Outcome::Failed(match error.try_into_panic() {
                Ok(panic) => panic,
                Err(error) => Box::new(format!("case did not finish: {error}")),
            }),
        }
    } else {
        drop(fixture.storage);
        Outcome::NotRun(missing)
    };
    if let Some(teardown) = fixture.teardown {
        teardown.await;
    }
    outcome
}

/// Why a case was not run, as the suite prints it.
fn not_run_line(label: &str, missing: &NotRun) -> String {
    format!("conformance case {label} NOT RUN: {missing}")
}

/// Runs one case on a fresh storage from `factory`, then its teardown.
/// Panics (fails the calling test) when the case fails. When the storage
/// does not declare a capability the case needs, the case does not run and
/// a line saying so goes straight to standard error, past the test
/// harness's capture, so that `cargo test` shows it.
pub async fn run_case<F: StorageFactory>(factory: &F, case: Case<F::Storage>) {
    match execute(factory, &case).await {
        Outcome::Passed => {}
        Outcome::Failed(panic) => std::panic::resume_unwind(panic),
        Outcome::NotRun(missing) => {
            use std::io::Write as _;
            let line = not_run_line(&case.label(), &missing);
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
    }
}

/// The outcome of [`run_all`].
#[derive(Debug, Default)]
pub struct Report {
    /// `area::name` of each case that passed.
    pub passed: Vec<String>,
    /// `area::name` and the panic message of each case that failed.
    pub failed: Vec<(String, String)>,
    /// `area::name` of each case that did not run, and why.
    pub not_run: Vec<(String, NotRun)>,
}

impl Report {
    /// True when no case failed (cases not run are not failures: see
    /// [`Report::not_run`]).
    pub fn is_success(&self) -> bool {
        self.failed.is_empty()
    }

    /// One line per case not run, saying which capability it needed.
    pub fn not_run_lines(&self) -> Vec<String> {
        (self.not_run.iter())
            .map(|(label, missing)| not_run_line(label, missing))
            .collect()
    }
}

/// Runs every case in turn on fresh storages and reports each outcome, for
/// harnesses that want one runtime and one result.
pub async fn run_all<F: StorageFactory>(factory: &F) -> Report {
    run_all_of(factory, cases::<F::Storage>()).await
}

/// [`run_all`] for the cases given, e.g. a selection of [`cases`].
pub async fn run_all_of<F: StorageFactory>(factory: &F, cases: Vec<Case<F::Storage>>) -> Report {
    let mut report = Report::default();
    for case in cases {
        let label = case.label();
        match execute(factory, &case).await {
            Outcome::Passed => report.passed.push(label),
            Outcome::Failed(panic) => report.failed.push((label, panic_message(panic))),
            Outcome::NotRun(missing) => report.not_run.push((label, missing)),
        }
    }
    report
}

fn panic_message(panic: Box<dyn std::any::Any + Send>) -> String {
    (panic.downcast_ref::<String>().cloned())
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "panicked".into())
}
