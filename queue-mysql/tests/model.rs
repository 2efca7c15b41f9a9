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

/// A grouped queue's claim read its due scheduled jobs level by level only
/// until it had as many as it had room for, counting jobs of full groups:
/// a free group's job one level lower was left behind (job 2 below, found
/// by the model test, seed 3237998083). It now reads every level.
#[test]
fn a_grouped_claim_reads_past_a_level_of_full_groups() {
    use queue_testkit::model::{JobSpec, Op::*, replay};

    let sequence = vec![
        Pause(1),
        Enqueue(JobSpec {
            queue: 0,
            key: None,
            priority: 0,
            delay_secs: Some(1),
            max_attempts: 1,
            invalid: false,
        }),
        Resume(1),
        EnqueueGrouped(
            JobSpec {
                queue: 1,
                key: None,
                priority: -1,
                delay_secs: Some(21),
                max_attempts: 1,
                invalid: false,
            },
            1,
        ),
        EnqueueGrouped(
            JobSpec {
                queue: 1,
                key: None,
                priority: 0,
                delay_secs: None,
                max_attempts: 2,
                invalid: false,
            },
            0,
        ),
        SetGroupLimit(1, 0, Some(2)),
        DequeueCapped {
            a: 1,
            b: 1,
            worker: 0,
        },
        Reclaim(1),
        Fire(0),
        Nack(0, Some(1)),
        Dequeue {
            queues: 1,
            limit: 1,
            worker: 0,
            lease_secs: 5,
        },
        Dequeue {
            queues: 1,
            limit: 1,
            worker: 0,
            lease_secs: 5,
        },
        EnqueueGroups(1, 4),
        Enqueue(JobSpec {
            queue: 0,
            key: None,
            priority: 0,
            delay_secs: None,
            max_attempts: 1,
            invalid: false,
        }),
        Reclaim(1),
        ConcurrentClaims {
            workers: 4,
            limit: 1,
        },
        Nack(2, Some(13)),
        Advance(26),
        Enqueue(JobSpec {
            queue: 1,
            key: None,
            priority: 2,
            delay_secs: None,
            max_attempts: 2,
            invalid: false,
        }),
        Dequeue {
            queues: 3,
            limit: 1,
            worker: 0,
            lease_secs: 30,
        },
        Dequeue {
            queues: 2,
            limit: 2,
            worker: 1,
            lease_secs: 30,
        },
    ];
    replay(&common::MySqlFactory, &sequence);
}
