//! The kit proves its own strength: the suite rejects every deliberately
//! broken storage of the catalogue through the case meant for it, and the
//! model test alone rejects every one too, every run.

use queue_testkit::broken::{BrokenFactory, Bug};
use queue_testkit::model::{ModelConfig, check_against_model};
use queue_testkit::suite::{self, run_all};

/// Both checks in one test, so that the quiet panic hook (the broken
/// storages fail many cases on purpose) covers no other test's output.
#[test]
fn the_suite_and_the_model_reject_every_broken_storage() {
    std::panic::set_hook(Box::new(|_| {}));
    let mut missed_by_suite = Vec::new();
    let mut missed_by_model = Vec::new();
    for bug in Bug::ALL {
        let report = suite::block_on(run_all(&BrokenFactory(bug)));
        let failed: Vec<String> = report.failed.iter().map(|(name, _)| name.clone()).collect();
        if !failed.iter().any(|name| name == bug.caught_by()) {
            missed_by_suite.push((bug, bug.caught_by(), failed));
        }
        let verdict = std::panic::catch_unwind(|| {
            check_against_model(&BrokenFactory(bug), ModelConfig::default());
        });
        if verdict.is_ok() {
            missed_by_model.push(bug);
        }
    }
    drop(std::panic::take_hook());
    assert!(
        missed_by_suite.is_empty(),
        "these cases passed the storage broken for them (bug, case, what failed): {missed_by_suite:#?}"
    );
    assert!(
        missed_by_model.is_empty(),
        "the model test passes these broken storages: {missed_by_model:?}"
    );
}

#[test]
fn the_catalogue_lists_each_bug_once() {
    let mut seen = std::collections::HashSet::new();
    for bug in Bug::ALL {
        assert!(seen.insert(bug), "{bug:?} listed twice");
    }
    assert!(Bug::ALL.len() >= 25);
}
