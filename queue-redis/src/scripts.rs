//! The Lua scripts, one file per operation under `scripts/`, each run
//! with EVALSHA (reloaded by the client on NOSCRIPT). Every script is
//! prefixed with `scripts/clock.lua` (its time); per-queue scripts also
//! with `scripts/common.lua`, their shared helpers, and those that claim
//! or configure with `scripts/fair.lua`, the fair pick (`with`: the other
//! scripts leave it out, since Lua builds every function of a script at
//! each call), as do the two of the groups' weights, whose key it names;
//! those that finish jobs, and the linked enqueue, with
//! `scripts/workflow.lua`, what a finish does to the jobs waiting for it.

use std::sync::LazyLock;

use redis::Script;

macro_rules! queue_script {
    ($name:ident, $file:literal, $doc:literal $(, with $extra:literal)?) => {
        #[doc = $doc]
        pub(crate) static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(concat!(
                include_str!("scripts/clock.lua"),
                include_str!("scripts/common.lua"),
                $(include_str!(concat!("scripts/", $extra)),)?
                include_str!(concat!("scripts/", $file))
            ))
        });
    };
}

/// A script of the namespace's global slot: `scripts/clock.lua`, then
/// the file.
macro_rules! global_script {
    ($name:ident, $file:literal, $doc:literal) => {
        #[doc = $doc]
        pub(crate) static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(concat!(
                include_str!("scripts/clock.lua"),
                include_str!(concat!("scripts/", $file))
            ))
        });
    };
}

queue_script!(ENQUEUE, "enqueue.lua", "Adds jobs to one queue.");
queue_script!(
    DEQUEUE,
    "dequeue.lua",
    "Claims the best jobs of one queue.",
    with "fair.lua"
);
queue_script!(
    DEQUEUE_PEEK,
    "dequeue_peek.lua",
    "The best pending jobs of one queue, unclaimed.",
    with "fair.lua"
);
queue_script!(
    NEXT_DUE,
    "next_due.lua",
    "The earliest scheduled time of one queue."
);
queue_script!(
    ACK,
    "ack.lua",
    "Completes jobs of one queue.",
    with "workflow.lua"
);
queue_script!(
    NACK,
    "nack.lua",
    "Records a failed attempt.",
    with "workflow.lua"
);
queue_script!(RELEASE, "release.lua", "Gives a lease back uncounted.");
queue_script!(HEARTBEAT, "heartbeat.lua", "Extends leases of one queue.");
queue_script!(
    RECLAIM_STALLED_PEEK,
    "reclaim_stalled_peek.lua",
    "The oldest expired leases of one queue."
);
queue_script!(
    RECLAIM_STALLED,
    "reclaim_stalled.lua",
    "Recovers expired leases of one queue (of several on standalone Redis).",
    with "workflow.lua"
);
queue_script!(
    DISCARD,
    "discard.lua",
    "Archives live jobs as discarded or cancelled.",
    with "workflow.lua"
);
queue_script!(
    ENQUEUE_LINKED,
    "enqueue_linked.lua",
    "Adds a batch with dependencies, over its queues (standalone Redis).",
    with "workflow.lua"
);
queue_script!(
    JOB_LINKS,
    "job_links.lua",
    "A job's dependencies as written and its dependants."
);
queue_script!(
    LINK_STATUS,
    "link_status.lua",
    "Where jobs of one queue stand, for job links."
);
queue_script!(
    SNOOZE,
    "snooze.lua",
    "Puts a running job off without counting the attempt."
);
queue_script!(
    CONFIGURE_QUEUE,
    "configure_queue.lua",
    "Sets one queue's limits.",
    with "fair.lua"
);
queue_script!(
    UPGRADE_LAYOUT,
    "upgrade_layout.lua",
    "Upgrades one queue's keys from layout 1."
);
queue_script!(
    QUEUE_CONFIGS,
    "queue_configs.lua",
    "One queue's paused flag and limits."
);
queue_script!(
    SET_GROUP_LIMIT,
    "set_group_limit.lua",
    "Gives one group of a queue its own limit, or removes it."
);
queue_script!(
    GROUP_LIMITS,
    "group_limits.lua",
    "Every group of one queue with its own limit."
);
queue_script!(
    SET_GROUP_WEIGHT,
    "set_group_weight.lua",
    "Gives one group of a queue its own weight in fair claims, or removes it.",
    with "fair.lua"
);
queue_script!(
    GROUP_WEIGHTS,
    "group_weights.lua",
    "Every group of one queue with its own weight.",
    with "fair.lua"
);
queue_script!(
    SCHEDULES,
    "schedules.lua",
    "The schedule fires recorded with one queue."
);

/// Records a schedule's fire and enqueues its job, or neither: the
/// periodic guard, then the enqueue script's body (one script).
pub(crate) static ENQUEUE_PERIODIC: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("scripts/clock.lua"),
        include_str!("scripts/common.lua"),
        include_str!("scripts/enqueue_periodic.lua"),
        include_str!("scripts/enqueue.lua")
    ))
});
queue_script!(
    RETRY_DEAD_LETTER,
    "retry_dead_letter.lua",
    "Puts a dead letter back."
);
queue_script!(
    PRUNE_HISTORY_PEEK,
    "prune_history_peek.lua",
    "The oldest prunable history rows of one queue."
);
queue_script!(
    PRUNE_HISTORY,
    "prune_history.lua",
    "Deletes old history rows of one queue."
);
queue_script!(STATS, "stats.lua", "Counts one queue's jobs by state.");
queue_script!(
    LIST_HISTORY,
    "list_history.lua",
    "One queue's history page."
);
queue_script!(
    PAUSE_QUEUE,
    "pause_queue.lua",
    "Pauses or resumes one queue."
);
queue_script!(
    LIST_JOBS,
    "list_jobs.lua",
    "One queue's live jobs by filter, ids descending."
);
queue_script!(
    RUN_NOW,
    "run_now.lua",
    "Makes scheduled jobs of one queue available now."
);
queue_script!(
    THROUGHPUT,
    "throughput.lua",
    "One queue's finished jobs per minute."
);
queue_script!(
    COUNT,
    "count.lua",
    "Counts one queue's jobs by priority (tests, benchmarks)."
);

global_script!(
    REGISTER,
    "register.lua",
    "Registers queue names and reserves job sequence numbers (global slot)."
);

global_script!(
    REGISTER_WORKER,
    "register_worker.lua",
    "Registers a worker or refreshes its registration (global slot)."
);

global_script!(
    DEREGISTER_WORKER,
    "deregister_worker.lua",
    "Removes a worker's registration (global slot)."
);

global_script!(
    LIST_WORKERS,
    "list_workers.lua",
    "Forgets workers silent too long and lists the others (global slot)."
);

global_script!(
    RECORD_SAMPLES,
    "record_samples.lua",
    "Records samples and forgets the minutes past the retention (global slot)."
);

global_script!(
    SAMPLES,
    "samples.lua",
    "Reads the samples of a window (global slot)."
);
