//! Every statement `PgStorage` runs, one per operation.
//!
//! Templates name tables as `{s}.table`, the wake-up channel as `{chan}`
//! and the cancellation channel as `{cancel_chan}`;
//! [`Statements::for_schema`] fills them in once per storage, so each
//! statement is one stable string that sqlx prepares once per connection.
//! `{waiting_at}` is [`WAITING_AT`](workflow::WAITING_AT), a waiting job's
//! `available_at`. `$1` is always the clock override: `COALESCE($1::timestamptz, now())`
//! is the database's now unless a manual clock is bound.

use queue_core::JobState;
use sqlx::{AssertSqlSafe, SqlSafeStr, SqlStr};

mod dequeue;
mod enqueue;
mod inspect;
mod lease;
mod maintain;
mod operate;
mod periodic;
mod queues;
mod samples;
mod workers;
mod workflow;

use dequeue::*;
use enqueue::*;
pub(crate) use inspect::STATS_SETTINGS;
use inspect::*;
use lease::*;
use maintain::*;
use operate::*;
use periodic::*;
use queues::*;
use samples::*;
use workers::*;
use workflow::*;

/// The columns of a live job, in the order `rows::job` reads them.
pub(super) const JOB_COLUMNS: &str = "id, queue_name, priority, unique_key, payload, attempts, max_attempts, \
     available_at, lease_until, locked_by, first_locked_at, last_error, created_at, updated_at, snoozes, \
     trace_context, group_key";

/// The columns of a history row, in the order `rows::record` reads them.
pub(super) const HISTORY_COLUMNS: &str = "id, queue_name, priority, unique_key, payload, status_final, \
     result, last_error, attempts, max_attempts, processed_by, created_at, started_at, finished_at, \
     snoozes, trace_context, group_key";

/// The recursive CTE `{name}(priority)`: the distinct priorities of
/// queue `{queue}`'s rows of `{table}` that match `{rows}`, highest first:
/// a skip-scan, one index probe per priority however many rows share one,
/// a NULL row last. Filled in by [`levels`].
pub(super) const LEVELS: &str = "{name}(priority) AS (
        (SELECT j.priority FROM {s}.{table} j
          WHERE j.queue_name = {queue} AND {rows}
          ORDER BY j.priority DESC LIMIT 1)
        UNION ALL
        SELECT (SELECT j.priority FROM {s}.{table} j
                 WHERE j.queue_name = {queue} AND {rows} AND j.priority < l.priority
                 ORDER BY j.priority DESC LIMIT 1)
          FROM {name} l WHERE l.priority IS NOT NULL
    )";

/// [`LEVELS`] named `name` over the rows of `table` matching `rows`.
pub(super) fn levels(name: &str, table: &str, rows: &str) -> String {
    LEVELS
        .replace("{name}", name)
        .replace("{table}", table)
        .replace("{rows}", rows)
}

/// The scheduled jobs (unleased, written with a future time): the rows of
/// `job_queue_scheduled`.
pub(super) const SCHEDULED_ROWS: &str = "j.lease_until IS NULL AND j.available_at > j.updated_at";

/// The recursive CTE `{name}(name)`: the queues with rows of `{table}`
/// that match `{rows}`, by a skip-scan (one index probe per queue, a NULL
/// row last). Filled in by [`queues_with`].
pub(super) const QUEUES_WITH: &str = "{name}(name) AS (
    (SELECT j.queue_name FROM {s}.{table} j WHERE {rows}
      ORDER BY j.queue_name LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue_name FROM {s}.{table} j
             WHERE j.queue_name > q.name AND {rows}
             ORDER BY j.queue_name LIMIT 1)
    FROM {name} q WHERE q.name IS NOT NULL
)";

/// [`QUEUES_WITH`] named `name` over the rows of `table` matching `rows`.
pub(super) fn queues_with(name: &str, table: &str, rows: &str) -> String {
    QUEUES_WITH
        .replace("{name}", name)
        .replace("{table}", table)
        .replace("{rows}", rows)
}

pub(super) const NOW: &str = "SELECT COALESCE($1::timestamptz, now())";

/// The statements of one storage, with its schema filled in.
#[derive(Debug, Clone)]
pub(crate) struct Statements {
    pub(crate) enqueue: SqlStr,
    pub(crate) enqueue_quiet: SqlStr,
    pub(crate) enqueue_one: SqlStr,
    pub(crate) enqueue_one_quiet: SqlStr,
    pub(crate) signal: SqlStr,
    pub(crate) enqueue_copy_ids: SqlStr,
    pub(crate) enqueue_copy: SqlStr,
    pub(crate) dequeue_one_queue: SqlStr,
    pub(crate) dequeue_many_queues: SqlStr,
    pub(crate) dequeue_many_queues_over: SqlStr,
    pub(crate) ack: SqlStr,
    pub(crate) nack: SqlStr,
    pub(crate) release: SqlStr,
    pub(crate) heartbeat: SqlStr,
    pub(crate) reclaim_stalled: SqlStr,
    pub(crate) discard: SqlStr,
    pub(crate) retry_dead_letter: SqlStr,
    pub(crate) prune_history: SqlStr,
    pub(crate) prune_counters: SqlStr,
    pub(crate) stats: SqlStr,
    pub(crate) get_job: SqlStr,
    pub(crate) get_history: SqlStr,
    /// [`list_history`] per [`history_shape`].
    list_history: Vec<SqlStr>,
    /// [`LIST_JOBS`] per state (any, then [`JobState::ALL`]'s order) and
    /// [`listing_shape`]: `state * LISTING_SHAPES + shape`.
    list_jobs: Vec<SqlStr>,
    pub(crate) run_now: SqlStr,
    pub(crate) discard_jobs: SqlStr,
    pub(crate) retry_dead_letters_pick: SqlStr,
    pub(crate) retry_dead_letters: SqlStr,
    pub(crate) throughput: SqlStr,
    pub(crate) pause_queue: SqlStr,
    pub(crate) resume_queue: SqlStr,
    pub(crate) now: SqlStr,
    pub(crate) next_due: SqlStr,
    pub(crate) snooze: SqlStr,
    pub(crate) limited_queues: SqlStr,
    pub(crate) dequeue_limited_one_queue: SqlStr,
    pub(crate) dequeue_grouped_one_queue: SqlStr,
    pub(crate) dequeue_limited: SqlStr,
    pub(crate) dequeue_limited_over: SqlStr,
    pub(crate) function_source: SqlStr,
    pub(crate) configure_queue: SqlStr,
    pub(crate) fair_index_exists: SqlStr,
    pub(crate) fair_index_lock: SqlStr,
    pub(crate) fair_index_drop: SqlStr,
    pub(crate) fair_index_create: SqlStr,
    pub(crate) queue_configs: SqlStr,
    pub(crate) set_group_limit: SqlStr,
    pub(crate) group_limits: SqlStr,
    pub(crate) set_group_weight: SqlStr,
    pub(crate) group_weights: SqlStr,
    pub(crate) enqueue_periodic: SqlStr,
    pub(crate) schedules: SqlStr,
    pub(crate) rotate_ready: SqlStr,
    pub(crate) register_worker: SqlStr,
    pub(crate) deregister_worker: SqlStr,
    pub(crate) list_workers: SqlStr,
    pub(crate) record_samples: SqlStr,
    pub(crate) samples: SqlStr,
    pub(crate) lock_dependencies: SqlStr,
    pub(crate) lock_callbacks: SqlStr,
    pub(crate) count_up_callbacks: SqlStr,
    pub(crate) dependency_history: SqlStr,
    pub(crate) insert_dependencies: SqlStr,
    pub(crate) insert_waiting: SqlStr,
    pub(crate) set_enqueued_time: SqlStr,
    pub(crate) job_links: SqlStr,
}

impl Statements {
    /// Fills the templates for `schema` (already validated as a plain
    /// identifier), wake-up `channel` and cancellation channel `cancel`;
    /// claims commit asynchronously when `async_claims`.
    pub(crate) fn for_schema(
        schema: &str,
        channel: &str,
        cancel: &str,
        async_claims: bool,
    ) -> Self {
        let commit = if async_claims { ASYNC_COMMIT } else { "" };
        let fill_state = |template: &str, state: &str| -> SqlStr {
            AssertSqlSafe(
                template
                    .replace("{commit}", commit)
                    .replace("{job_filter}", JOB_FILTER)
                    .replace("{state}", state)
                    .replace("{restore}", RESTORE_DEAD_LETTERS)
                    .replace("{limited}", LIMITED)
                    .replace("{groups_only}", GROUPS_ONLY)
                    .replace("{job}", JOB_COLUMNS)
                    .replace("{history}", HISTORY_COLUMNS)
                    .replace("{waiting_at}", WAITING_AT)
                    .replace("{s}", &format!("\"{schema}\""))
                    .replace("{cancel_chan}", cancel)
                    .replace("{chan}", channel),
            )
            .into_sql_str()
        };
        let fill = |template: &str| fill_state(template, ANY_STATE);
        Self {
            enqueue: fill(&ENQUEUE.replace("{signal}", ENQUEUE_SIGNAL)),
            enqueue_quiet: fill(&ENQUEUE.replace("{signal}", "")),
            enqueue_one: fill(&ENQUEUE_ONE.replace("{signal_one}", ENQUEUE_ONE_SIGNAL)),
            enqueue_one_quiet: fill(&ENQUEUE_ONE.replace("{signal_one}", "")),
            signal: fill(SIGNAL),
            enqueue_copy_ids: fill(ENQUEUE_COPY_IDS),
            enqueue_copy: fill(ENQUEUE_COPY),
            dequeue_one_queue: fill(&dequeue_plain(
                DEQUEUE_ONE_QUEUE,
                "($2::text[])[1]",
                ONE_QUEUE_CAP,
            )),
            dequeue_many_queues: fill(&dequeue_plain(DEQUEUE_MANY_QUEUES, "q.name", "q.cap")),
            dequeue_many_queues_over: fill(&dequeue_plain(
                DEQUEUE_MANY_QUEUES_OVER,
                "q.name",
                "q.cap",
            )),
            ack: fill(ACK),
            nack: fill(NACK),
            release: fill(RELEASE),
            heartbeat: fill(HEARTBEAT),
            reclaim_stalled: fill(&RECLAIM_STALLED.replace(
                "{leased_queues}",
                &queues_with("leased_queues", "job_queue", "j.lease_until IS NOT NULL"),
            )),
            discard: fill(DISCARD),
            retry_dead_letter: fill(RETRY_DEAD_LETTER),
            prune_history: fill(PRUNE_HISTORY),
            prune_counters: fill(PRUNE_COUNTERS),
            stats: fill(
                &STATS
                    .replace(
                        "{ring_queues}",
                        &queues_with("ring_queues", "job_ready", "TRUE"),
                    )
                    .replace(
                        "{scheduled_queues}",
                        &queues_with("scheduled_queues", "job_queue", SCHEDULED_ROWS),
                    )
                    .replace("{levels}", &levels("levels", "job_queue", SCHEDULED_ROWS))
                    .replace("{ring_levels}", &levels("ring_levels", "job_ready", "TRUE"))
                    .replace("{queue}", "q.name"),
            ),
            get_job: fill(GET_JOB),
            get_history: fill(GET_HISTORY),
            list_history: (0..HISTORY_SHAPES)
                .map(|shape| fill(&list_history(shape)))
                .collect(),
            list_jobs: std::iter::once(None)
                .chain(JobState::ALL.map(Some))
                .flat_map(|state| {
                    let (template, predicate) = match state {
                        None => (LIST_JOBS, ANY_STATE),
                        Some(JobState::Pending) => (LIST_JOBS, state_predicate(JobState::Pending)),
                        Some(state @ (JobState::Scheduled | JobState::Waiting)) => {
                            (LIST_SCHEDULED_JOBS, state_predicate(state))
                        }
                        Some(rare) => (LIST_RARE_JOBS, state_predicate(rare)),
                    };
                    (0..LISTING_SHAPES).map(move |shape| {
                        let template = match state {
                            None if shape & LISTING_QUEUE != 0 => LIST_QUEUE_JOBS,
                            _ => template,
                        };
                        template
                            .replace("{listing_filter}", &listing_filter(shape))
                            .replace("{newest}", newest(shape))
                            .replace("{sorted}", &SCHEDULED_SORTED.to_string())
                            .replace("{state}", predicate)
                    })
                })
                .map(|template| fill(&template))
                .collect(),
            run_now: fill(RUN_NOW),
            discard_jobs: fill(DISCARD_JOBS),
            retry_dead_letters_pick: fill(RETRY_DEAD_LETTERS_PICK),
            retry_dead_letters: fill(RETRY_DEAD_LETTERS),
            throughput: fill(THROUGHPUT),
            pause_queue: fill(PAUSE_QUEUE),
            resume_queue: fill(RESUME_QUEUE),
            now: fill(NOW),
            next_due: fill(NEXT_DUE),
            snooze: fill(SNOOZE),
            limited_queues: fill(LIMITED_QUEUES),
            dequeue_limited_one_queue: fill(&dequeue_limited_one_queue()),
            dequeue_grouped_one_queue: fill(&dequeue_grouped_one_queue()),
            dequeue_limited: fill(&dequeue_limited(false)),
            dequeue_limited_over: fill(&dequeue_limited(true)),
            function_source: fill(FUNCTION_SOURCE),
            configure_queue: fill(CONFIGURE_QUEUE),
            fair_index_exists: fill(FAIR_INDEX_EXISTS),
            fair_index_lock: fill(FAIR_INDEX_LOCK),
            fair_index_drop: fill(FAIR_INDEX_DROP),
            fair_index_create: fill(FAIR_INDEX_CREATE),
            queue_configs: fill(QUEUE_CONFIGS),
            set_group_limit: fill(SET_GROUP_LIMIT),
            group_limits: fill(GROUP_LIMITS),
            set_group_weight: fill(SET_GROUP_WEIGHT),
            group_weights: fill(GROUP_WEIGHTS),
            enqueue_periodic: fill(ENQUEUE_PERIODIC),
            schedules: fill(SCHEDULES),
            register_worker: fill(REGISTER_WORKER),
            deregister_worker: fill(DEREGISTER_WORKER),
            list_workers: fill(LIST_WORKERS),
            record_samples: fill(RECORD_SAMPLES),
            samples: fill(SAMPLES),
            rotate_ready: fill(ROTATE_READY),
            lock_dependencies: fill(LOCK_DEPENDENCIES),
            lock_callbacks: fill(LOCK_CALLBACKS),
            count_up_callbacks: fill(COUNT_UP_CALLBACKS),
            dependency_history: fill(DEPENDENCY_HISTORY),
            insert_dependencies: fill(INSERT_DEPENDENCIES),
            insert_waiting: fill(INSERT_WAITING),
            set_enqueued_time: fill(SET_ENQUEUED_TIME),
            job_links: fill(JOB_LINKS),
        }
    }
}

impl Statements {
    /// The listing for `filter` ([`LIST_JOBS`] with its state's
    /// index-friendly predicate and only the filters it sets).
    pub(crate) fn list_jobs_for(&self, filter: &queue_core::JobFilter) -> &SqlStr {
        let state = match filter.state {
            None => 0,
            Some(JobState::Pending) => 1,
            Some(JobState::Scheduled) => 2,
            Some(JobState::Running) => 3,
            Some(JobState::Stalled) => 4,
            Some(JobState::Exhausted) => 5,
            Some(JobState::Waiting) => 6,
        };
        &self.list_jobs[state * LISTING_SHAPES + listing_shape(filter)]
    }

    /// The history listing for `filter` ([`list_history`] with only the
    /// filters it sets).
    pub(crate) fn list_history_for(&self, filter: &queue_core::HistoryFilter) -> &SqlStr {
        &self.list_history[history_shape(filter)]
    }
}
