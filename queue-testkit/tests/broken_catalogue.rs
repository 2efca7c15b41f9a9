//! The kit proves its own strength: the suite rejects every deliberately
//! broken storage of the catalogue, every run, through the case meant for it.

use queue_testkit::broken::{BrokenFactory, Bug};
use queue_testkit::suite::{self, run_all};

#[test]
fn the_suite_rejects_every_broken_storage() {
    // The cases' panics are expected here; keep the output to the verdict.
    std::panic::set_hook(Box::new(|_| {}));
    let mut missed = Vec::new();
    for bug in Bug::ALL {
        let report = suite::block_on(run_all(&BrokenFactory(bug)));
        let failed: Vec<String> = report.failed.iter().map(|(name, _)| name.clone()).collect();
        if !failed.iter().any(|name| name == bug.caught_by()) {
            missed.push((bug, bug.caught_by(), failed));
        }
    }
    assert!(
        missed.is_empty(),
        "these cases passed the storage broken for them (bug, case, what failed): {missed:#?}"
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
