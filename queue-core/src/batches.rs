//! Batches: a callback job that runs once every job of a group has
//! finished, however each finished, and reads how many did what.
//!
//! A batch is a workflow of one shape: its callback depends on every job
//! of the batch and runs whatever they finish as
//! ([`DependencyFailure::Run`]), so the storage's dependency machinery
//! gives it its guarantees: the callback is released once, by the last
//! finish, in that finish's transaction, however the finishes race. The
//! callback's id names the batch. More jobs can join it while it is open
//! ([`crate::NewJob::joins`], capability [`crate::Capability::Batches`]);
//! its handler reads the counts from its own links ([`BatchCounts::of`]).

use serde::{Deserialize, Serialize};

use crate::{
    Dependency, DependencyFailure, FinalStatus, JobId, JobLinks, LinkStatus, NewJob, QueueError,
};

/// The jobs of a new batch and its `callback`, ready for one
/// [`crate::Storage::enqueue_batch`] call: `jobs` in order, then the
/// callback, depending on each of them and running whatever they finish
/// as. The last outcome is the callback's, whose id names the batch. An
/// empty batch's callback waits for nothing and is pending at once. Every
/// job, the callback included, is validated as any job is: an invalid one
/// refuses the whole call, nothing written.
pub fn batch(jobs: Vec<NewJob>, callback: NewJob) -> Vec<NewJob> {
    let count = jobs.len();
    let callback = callback
        .depends_on_all((0..count).map(Dependency::InBatch))
        .on_dependency_failure(DependencyFailure::Run);
    let mut all = jobs;
    all.push(callback);
    all
}

/// How the jobs of a batch stand, as its callback's links show them
/// ([`crate::Storage::job_links`] of the callback).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchCounts {
    /// Finished as `completed`.
    pub completed: u64,
    /// Finished as `dead_letter`.
    pub dead_lettered: u64,
    /// Finished as `discarded`.
    pub discarded: u64,
    /// Finished as `cancelled`.
    pub cancelled: u64,
    /// Finished, their history pruned since: how, no longer known.
    pub gone: u64,
    /// Not finished yet (none once the callback runs).
    pub unfinished: u64,
}

impl BatchCounts {
    /// The counts of the jobs `links` lists as dependencies.
    pub fn of(links: &JobLinks) -> Self {
        let mut counts = Self::default();
        for link in &links.dependencies {
            match link.status {
                LinkStatus::Finished(FinalStatus::Completed) => counts.completed += 1,
                LinkStatus::Finished(FinalStatus::DeadLetter) => counts.dead_lettered += 1,
                LinkStatus::Finished(FinalStatus::Discarded) => counts.discarded += 1,
                LinkStatus::Finished(FinalStatus::Cancelled) => counts.cancelled += 1,
                LinkStatus::Gone => counts.gone += 1,
                LinkStatus::Live(_) => counts.unfinished += 1,
            }
        }
        counts
    }

    /// How many of them have finished.
    pub fn finished(&self) -> u64 {
        self.total() - self.unfinished
    }

    /// How many jobs the batch has.
    pub fn total(&self) -> u64 {
        self.completed
            + self.dead_lettered
            + self.discarded
            + self.cancelled
            + self.gone
            + self.unfinished
    }
}

/// A batch's progress as operators read it (`queue show`, the
/// dashboard): `3 of 4 finished (2 completed, 1 dead-lettered, 0
/// discarded, 0 cancelled)`, and the pruned ones when there are any.
impl std::fmt::Display for BatchCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} finished ({} completed, {} dead-lettered, {} discarded, {} cancelled",
            self.finished(),
            self.total(),
            self.completed,
            self.dead_lettered,
            self.discarded,
            self.cancelled
        )?;
        if self.gone > 0 {
            write!(f, ", {} pruned", self.gone)?;
        }
        f.write_str(")")
    }
}

/// The refusal of a job joining batch `callback` whose callback is not
/// waiting any more (every job finished and released it, or it is
/// unknown): [`QueueError::Conflict`], nothing written.
pub fn batch_closed(callback: JobId) -> QueueError {
    QueueError::Conflict {
        reason: format!(
            "batch {callback} is closed: its callback is not waiting (its jobs have all \
             finished, or it does not exist)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{JobLink, JobState};
    use serde_json::json;

    #[test]
    fn a_batch_is_its_jobs_then_a_callback_depending_on_each() {
        let jobs = vec![NewJob::new("q", json!(1)), NewJob::new("q", json!(2))];
        let all = batch(jobs, NewJob::new("done", json!({})));
        assert_eq!(all.len(), 3);
        let callback = all[2].validate().unwrap();
        assert_eq!(
            callback.dependencies,
            vec![Dependency::InBatch(0), Dependency::InBatch(1)]
        );
        assert_eq!(callback.on_dependency_failure, DependencyFailure::Run);
        let empty = batch(Vec::new(), NewJob::new("done", json!({})));
        assert!(empty[0].validate().unwrap().dependencies.is_empty());
    }

    #[test]
    fn counts_read_each_dependency_once() {
        let link = |status| JobLink {
            id: JobId(1),
            queue: None,
            status,
            result: None,
        };
        let links = JobLinks {
            dependencies: vec![
                link(LinkStatus::Finished(FinalStatus::Completed)),
                link(LinkStatus::Finished(FinalStatus::Completed)),
                link(LinkStatus::Finished(FinalStatus::DeadLetter)),
                link(LinkStatus::Finished(FinalStatus::Discarded)),
                link(LinkStatus::Finished(FinalStatus::Cancelled)),
                link(LinkStatus::Gone),
                link(LinkStatus::Live(JobState::Running)),
            ],
            dependants: vec![link(LinkStatus::Gone)],
        };
        let counts = BatchCounts::of(&links);
        assert_eq!(
            counts,
            BatchCounts {
                completed: 2,
                dead_lettered: 1,
                discarded: 1,
                cancelled: 1,
                gone: 1,
                unfinished: 1,
            }
        );
        assert_eq!(counts.total(), 7);
        assert_eq!(
            counts.to_string(),
            "6 of 7 finished (2 completed, 1 dead-lettered, 1 discarded, 1 cancelled, 1 pruned)"
        );
    }
}
