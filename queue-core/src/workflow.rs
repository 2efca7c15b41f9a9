//! Workflows: jobs that wait for other jobs ([`crate::Capability::Dependencies`]).
//!
//! A job may name the jobs it depends on ([`crate::NewJob::depends_on`]):
//! jobs enqueued before ([`Dependency::Job`]) or earlier jobs of the same
//! batch ([`Dependency::InBatch`]). A dependency can only point backwards,
//! so a graph built this way has no cycle, and one that tries to point
//! forwards (a cycle, or a job depending on itself) is refused.
//!
//! While a dependency has not finished, the job is
//! [`crate::JobState::Waiting`]: stored with `available_at` at
//! [`waiting_at`], an instant no enqueue can ask for, so that every claim
//! passes it over without knowing about dependencies. When its last
//! dependency finishes, in the same transaction, it becomes pending (or
//! scheduled, if it asked for a later time). What a failed dependency
//! does to it is its own choice ([`DependencyFailure`]).

use std::fmt;

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{FinalStatus, JobId, JobState, QueueError, QueueName, Result, ValidJob};

/// The most dependencies one enqueue call may carry, over all its jobs: a
/// fan-in of 10,000 jobs fits; a bigger graph is enqueued in several calls
/// (its later parts naming the ids the earlier calls returned).
pub const MAX_DEPENDENCIES: usize = 50_000;

/// A job a new job depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dependency {
    /// A job enqueued before, live or finished (in history).
    Job(JobId),
    /// The job at this index of the same `enqueue_batch` call, which must
    /// come before the job that names it.
    InBatch(usize),
}

impl From<JobId> for Dependency {
    fn from(id: JobId) -> Self {
        Self::Job(id)
    }
}

/// What a waiting job does when one of its dependencies finishes without
/// completing (dead-lettered, discarded or cancelled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DependencyFailure {
    /// It is cancelled: archived as `cancelled` with a last error naming
    /// the dependency and how it finished ([`dependency_failed`]), and its
    /// own dependants learn of it as of any cancelled job.
    #[default]
    Cancel,
    /// The dependency counts as finished, as if it had completed.
    Run,
}

impl DependencyFailure {
    /// The value stored in the backends' `on_failure` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cancel => "cancel",
            Self::Run => "run",
        }
    }

    /// Reads a stored `on_failure` value back.
    ///
    /// # Errors
    /// [`QueueError::InvalidInput`] for anything else.
    pub fn parse(stored: &str) -> Result<Self> {
        match stored {
            "cancel" => Ok(Self::Cancel),
            "run" => Ok(Self::Run),
            other => Err(QueueError::invalid(
                "on_failure",
                format!("unknown value {other:?} (cancel or run)"),
            )),
        }
    }

    /// Whether a dependency that finished as `status` lets the waiting job
    /// go on (true) or cancels it (false).
    pub fn counts(self, status: FinalStatus) -> bool {
        status == FinalStatus::Completed || self == Self::Run
    }
}

/// The `available_at` of a waiting job: one microsecond before the year
/// 10000, later than any time an enqueue may ask for
/// ([`crate::time::max_instant`] is a second earlier) and still inside
/// every database's range.
pub fn waiting_at() -> DateTime<Utc> {
    crate::time::max_instant() + TimeDelta::microseconds(999_999)
}

/// Whether `available_at` marks a waiting job.
pub fn is_waiting(available_at: DateTime<Utc>) -> bool {
    available_at >= waiting_at()
}

/// The last error of a job cancelled because its dependency `dependency`
/// finished as `status`. When one operation fails several of a job's
/// dependencies at once (a reclaim, a bulk discard), the reason names the
/// one with the lowest id.
pub fn dependency_failed(dependency: JobId, status: FinalStatus) -> Value {
    json!({
        "message": format!("dependency {dependency} finished as {status}"),
        "dependency": dependency.get(),
        "status": status.as_str(),
    })
}

/// The refusal of a dependency that finished without completing, for a
/// job that would be cancelled at once ([`DependencyFailure::Cancel`]).
pub fn failed_dependency(dependency: JobId, status: FinalStatus) -> QueueError {
    QueueError::invalid(
        "depends_on",
        format!(
            "job {dependency} finished as {status}: a job depending on it would be cancelled at \
             once (on_dependency_failure(Run) runs it anyway)"
        ),
    )
}

/// The refusal of a dependency that is neither live nor in history.
pub fn unknown_dependency(dependency: JobId) -> QueueError {
    QueueError::invalid(
        "depends_on",
        format!("job {dependency} does not exist (neither live nor in history)"),
    )
}

/// Checks the dependencies of a validated batch: each [`Dependency::InBatch`]
/// names an earlier job of it, and the batch carries at most
/// [`MAX_DEPENDENCIES`].
///
/// # Errors
/// [`QueueError::InvalidInput`] (field `depends_on`) naming the first job
/// at fault.
pub fn check_batch_dependencies(jobs: &[ValidJob]) -> Result<()> {
    let total: usize = jobs.iter().map(|job| job.dependencies.len()).sum();
    if total > MAX_DEPENDENCIES {
        return Err(QueueError::invalid(
            "depends_on",
            format!(
                "the batch carries {total} dependencies, at most {MAX_DEPENDENCIES} are taken in \
                 one call"
            ),
        ));
    }
    for (index, job) in jobs.iter().enumerate() {
        for dependency in &job.dependencies {
            if let Dependency::InBatch(earlier) = *dependency
                && earlier >= index
            {
                return Err(QueueError::invalid(
                    "depends_on",
                    format!(
                        "job {index} of the batch depends on job {earlier} of it, which does not \
                         come before it (a dependency points to an earlier job: a graph without \
                         cycles)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// How a job linked to another stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "state")]
pub enum LinkStatus {
    /// Still live, in this state.
    Live(JobState),
    /// Finished, as this.
    Finished(FinalStatus),
    /// Neither live nor in history: its history row was pruned.
    Gone,
}

impl fmt::Display for LinkStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Live(state) => state.fmt(f),
            Self::Finished(status) => status.fmt(f),
            Self::Gone => f.pad("gone"),
        }
    }
}

/// One job at the other end of a dependency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobLink {
    /// Its id.
    pub id: JobId,
    /// Its queue; `None` when it is gone.
    pub queue: Option<QueueName>,
    /// Where it stands.
    pub status: LinkStatus,
    /// The result its handler acked it with (completed jobs).
    pub result: Option<Value>,
}

/// A job's dependencies and dependants ([`crate::Storage::job_links`]),
/// each by ascending id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobLinks {
    /// The jobs it depends on.
    pub dependencies: Vec<JobLink>,
    /// The jobs that depend on it.
    pub dependants: Vec<JobLink>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NewJob;

    fn valid(jobs: Vec<NewJob>) -> Vec<ValidJob> {
        jobs.iter().map(|job| job.validate().unwrap()).collect()
    }

    #[test]
    fn the_waiting_instant_is_later_than_any_enqueue_may_ask_for() {
        let latest = crate::time::max_instant();
        assert!(waiting_at() > latest);
        assert!(is_waiting(waiting_at()));
        assert!(!is_waiting(latest));
        assert!(NewJob::new("q", 1).run_at(waiting_at()).validate().is_err());
    }

    #[test]
    fn a_dependency_must_point_to_an_earlier_job_of_the_batch() {
        let ok = valid(vec![
            NewJob::new("q", 0),
            NewJob::new("q", 1).depends_on(Dependency::InBatch(0)),
        ]);
        assert!(check_batch_dependencies(&ok).is_ok());
        for bad in [0, 1, 7] {
            let jobs = valid(vec![
                NewJob::new("q", 0),
                NewJob::new("q", 1).depends_on(Dependency::InBatch(bad.max(1))),
            ]);
            let err = check_batch_dependencies(&jobs).unwrap_err();
            assert!(
                matches!(
                    err,
                    QueueError::InvalidInput {
                        field: "depends_on",
                        ..
                    }
                ),
                "{err}"
            );
        }
    }

    #[test]
    fn a_batch_carries_at_most_the_cap_of_dependencies() {
        let ids = |n: i64| (1..=n).map(|i| Dependency::Job(JobId(i)));
        let at_cap = valid(vec![
            NewJob::new("q", 0).depends_on_all(ids(MAX_DEPENDENCIES as i64)),
        ]);
        assert!(check_batch_dependencies(&at_cap).is_ok());
        let over = valid(vec![
            NewJob::new("q", 0).depends_on_all(ids(MAX_DEPENDENCIES as i64)),
            NewJob::new("q", 1).depends_on(JobId(1)),
        ]);
        let err = check_batch_dependencies(&over).unwrap_err();
        assert!(err.to_string().contains("50001"), "{err}");
    }

    #[test]
    fn only_a_completed_dependency_counts_unless_the_job_runs_anyway() {
        for status in FinalStatus::ALL {
            assert_eq!(
                DependencyFailure::Cancel.counts(status),
                status == FinalStatus::Completed
            );
            assert!(DependencyFailure::Run.counts(status));
        }
        for policy in [DependencyFailure::Cancel, DependencyFailure::Run] {
            assert_eq!(DependencyFailure::parse(policy.as_str()).unwrap(), policy);
        }
        assert!(DependencyFailure::parse("later").is_err());
    }
}
