//! Random operation sequences on MySQL / MariaDB, compared with the model.

mod common;

use queue_testkit::model::{ModelConfig, check_against_model};

#[test]
fn mysql_agrees_with_the_model() {
    check_against_model(&common::MySqlFactory, ModelConfig::default());
}

/// A slot whose window holds only a stale entry (a discarded job) must not
/// hide the better job behind it: the claim took a released priority -1
/// job from the inbox over a free priority 0 job of the same queue (found
/// by the model test).
#[test]
fn a_stale_entry_does_not_hide_a_better_job_of_its_slot() {
    use queue_testkit::model::{JobSpec, Op::*, replay};

    let job = |priority| JobSpec {
        queue: 1,
        key: None,
        priority,
        delay_secs: None,
        max_attempts: 1,
        invalid: false,
    };
    let claim = Dequeue {
        queues: 2,
        limit: 1,
        worker: 0,
        lease_secs: 5,
    };
    replay(
        &common::MySqlFactory,
        &[
            // Job 1 (priority -1) leased: its slot entry goes.
            Enqueue(job(-1)),
            claim.clone(),
            // Job 2 discarded: its entry stays, stale, ahead of job 3's.
            Enqueue(job(0)),
            Discard(1),
            Enqueue(job(0)),
            // Job 1 back in the ready set through the inbox.
            Release(0),
            // Job 3 (priority 0) comes first.
            claim,
        ],
    );
}
