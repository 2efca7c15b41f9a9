//! The statements of `list_jobs` and `list_history`, written per set of
//! filters, each naming the index it reads.
//!
//! A filter written `(?2 IS NULL OR queue_name = ?2)` is no index
//! condition, so SQLite answered every such listing with a scan of the
//! table (at a million live jobs, 64-113 ms for a lookup by id, 137-167
//! ms for the running jobs of the oldest queue: docs/benchmarks.md,
//! "Reads at size"). Here a filter that is not set is
//! left out, one that is set is a plain condition, and the index each
//! listing reads is named (`INDEXED BY`), so the plan does not hang on the
//! statistics (`ANALYZE` may never have run). The parameters keep their
//! numbers whichever are written: jobs ?1 now, ?2 queue, ?3 state, ?4 id,
//! ?5 unique key, ?6 below this id, ?7 limit; history ?1 queue, ?2
//! status, ?3 below this id, ?4 limit.

use queue_core::{FinalStatus, HistoryFilter, JobFilter, JobState};

/// The most scheduled jobs a listing reads from `job_queue_next_due` and
/// sorts by id; past that many it reads newest first
/// ([`scheduled_count`]).
pub(crate) const SCHEDULED_SORTED: i64 = 10_000;

/// The names of the queues with live jobs, one probe of `job_queue_queue`
/// each (and a last row NULL): for a listing over every queue that reads
/// an index led by the queue.
macro_rules! queues_cte {
    () => {
        "WITH RECURSIVE queues (name) AS (
    SELECT (SELECT min(queue_name) FROM job_queue INDEXED BY job_queue_queue)
    UNION ALL
    SELECT (SELECT min(queue_name) FROM job_queue INDEXED BY job_queue_queue
            WHERE queue_name > qn.name)
    FROM queues qn WHERE qn.name IS NOT NULL
)
"
    };
}
pub(crate) use queues_cte;

/// The state `state` as derived at ?1 ([`queue_core::derive_state`]),
/// written as the conditions an index can serve.
fn state_condition(state: JobState) -> &'static str {
    match state {
        JobState::Pending => {
            "lease_until IS NULL AND attempts < max_attempts AND available_at <= ?1"
        }
        JobState::Scheduled => {
            "lease_until IS NULL AND attempts < max_attempts AND available_at > ?1
             AND available_at < 253402300799999999"
        }
        JobState::Running => "lease_until > ?1",
        JobState::Stalled => "lease_until <= ?1",
        JobState::Exhausted => "lease_until IS NULL AND attempts >= max_attempts",
        // `sql::WAITING_AT`.
        JobState::Waiting => "lease_until IS NULL AND available_at >= 253402300799999999",
    }
}

/// Every filter `filter` sets, as conditions (ANDed): the queue's is
/// `queue` (written even without a queue when it names the queues of
/// [`queues_cte`]).
fn job_conditions(filter: &JobFilter, queue: Option<&str>) -> String {
    let mut terms = Vec::new();
    terms.extend(queue);
    if let Some(state) = filter.state {
        terms.push(state_condition(state));
    }
    if filter.id.is_some() {
        terms.push("id = ?4");
    }
    if filter.unique_key.is_some() {
        terms.push("unique_key = ?5");
    }
    if filter.before.is_some() {
        terms.push("id < ?6");
    }
    if terms.is_empty() {
        terms.push("1");
    }
    terms.join(" AND ")
}

/// The statement of one page (plus one row) of `filter`'s live jobs,
/// newest first, for every filter but [`scheduled_sorted`]'s:
/// - an id: that row (the primary key);
/// - a unique key: its entry in `job_queue_unique_key`, in the queue or
///   in each queue ([`queues_cte`]);
/// - running or stalled jobs: the leased rows (`job_queue_lease_until`:
///   as many as workers hold), sorted;
/// - exhausted jobs: `job_queue_exhausted` (normally empty), sorted;
/// - otherwise (any, pending or many scheduled jobs): newest first, one
///   queue's from `job_queue_queue`, every queue's from the primary key.
pub(crate) fn list_jobs(filter: &JobFilter) -> String {
    let columns = crate::sql::JOB_COLUMNS;
    let direct = filter.queue.is_some().then_some("queue_name = ?2");
    let (with, source, queue) = if filter.id.is_some() {
        ("", "NOT INDEXED", direct)
    } else if filter.unique_key.is_some() {
        match direct {
            Some(_) => ("", "INDEXED BY job_queue_unique_key", direct),
            None => (
                queues_cte!(),
                "INDEXED BY job_queue_unique_key",
                Some("queue_name IN (SELECT name FROM queues)"),
            ),
        }
    } else {
        let source = match (filter.state, filter.queue.is_some()) {
            (Some(JobState::Running | JobState::Stalled), _) => "INDEXED BY job_queue_lease_until",
            (Some(JobState::Exhausted), _) => "INDEXED BY job_queue_exhausted",
            (_, true) => "INDEXED BY job_queue_queue",
            (_, false) => "NOT INDEXED",
        };
        ("", source, direct)
    };
    format!(
        "{with}SELECT {columns} FROM job_queue {source}\nWHERE {}\nORDER BY id DESC LIMIT +?7",
        job_conditions(filter, queue)
    )
}

/// The unleased jobs due after now (all scheduled jobs, and exhausted
/// ones due later, and waiting ones) of `filter`'s queue or of every
/// queue, from `job_queue_next_due` alone: the ids [`scheduled_count`]
/// counts and [`scheduled_sorted`] sorts, as the `WITH` they need and the
/// `SELECT`. With `waiting`, only the waiting jobs (the end of the range).
fn scheduled_ids(filter: &JobFilter, waiting: bool) -> (&'static str, String) {
    let (with, queue) = if filter.queue.is_some() {
        ("", "queue_name = ?2")
    } else {
        (queues_cte!(), "queue_name IN (SELECT name FROM queues)")
    };
    let before = if filter.before.is_some() {
        " AND id < ?6"
    } else {
        ""
    };
    let due = if waiting {
        "available_at >= 253402300799999999"
    } else {
        "available_at > ?1"
    };
    let select = format!(
        "SELECT id FROM job_queue INDEXED BY job_queue_next_due
WHERE {queue} AND lease_until IS NULL AND {due}{before}"
    );
    (with, select)
}

/// How many of [`scheduled_ids`] there are, up to ?8 (one more than
/// [`SCHEDULED_SORTED`]): whether a listing of scheduled jobs sorts them
/// ([`scheduled_sorted`]) or reads newest first ([`list_jobs`]).
/// Scheduled jobs are few (retries waiting for their backoff, among the
/// oldest ids behind a pending backlog) or many (a backlog of delayed
/// jobs, the newest).
pub(crate) fn scheduled_count(filter: &JobFilter) -> String {
    let (with, ids) = scheduled_ids(filter, false);
    format!("{with}SELECT count(*) FROM ({ids} LIMIT +?8)")
}

/// One page (plus one row) of scheduled jobs when at most
/// [`SCHEDULED_SORTED`], or of waiting jobs: [`scheduled_ids`] sorted,
/// their rows read by id (the primary key, which `NOT INDEXED` leaves to
/// the plan). Waiting jobs are read this way however many they are: the
/// end of `job_queue_next_due`'s range holds them and nothing else.
pub(crate) fn scheduled_sorted(filter: &JobFilter) -> String {
    let columns = crate::sql::JOB_COLUMNS;
    let (with, ids) = scheduled_ids(filter, filter.state == Some(JobState::Waiting));
    format!(
        "{with}SELECT {columns} FROM job_queue NOT INDEXED
WHERE id IN ({ids}) AND {}
ORDER BY id DESC LIMIT +?7",
        job_conditions(filter, filter.queue.is_some().then_some("queue_name = ?2"))
    )
}

/// The statement of one page (plus one row) of `filter`'s history, newest
/// first: a status's range of `job_history_queue_status` (with a queue)
/// or of `job_history_status`; a queue's every status, one range each,
/// merged; otherwise the primary key from its end.
pub(crate) fn list_history(filter: &HistoryFilter) -> String {
    let columns = crate::sql::HISTORY_COLUMNS;
    let before = if filter.before.is_some() {
        " AND id < ?3"
    } else {
        ""
    };
    let page = |source: &str, conditions: &str| {
        format!(
            "SELECT {columns} FROM job_history {source}
WHERE {conditions}{before}
ORDER BY id DESC LIMIT +?4"
        )
    };
    match (filter.queue.is_some(), filter.status.is_some()) {
        (true, true) => page(
            "INDEXED BY job_history_queue_status",
            "queue_name = ?1 AND status_final = ?2",
        ),
        (false, true) => page("INDEXED BY job_history_status", "status_final = ?2"),
        (false, false) => page("NOT INDEXED", "1"),
        (true, false) => {
            let ranges = FinalStatus::ALL
                .iter()
                .map(|status| {
                    let condition =
                        format!("queue_name = ?1 AND status_final = '{}'", status.as_str());
                    format!(
                        "SELECT * FROM ({})",
                        page("INDEXED BY job_history_queue_status", &condition)
                    )
                })
                .collect::<Vec<_>>()
                .join("\nUNION ALL\n");
            format!("SELECT * FROM (\n{ranges})\nORDER BY id DESC LIMIT +?4")
        }
    }
}
