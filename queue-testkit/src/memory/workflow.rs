//! Dependencies between jobs in the reference storage: who waits for whom,
//! what finishing a job releases or cancels, and the links `job_links`
//! reads. The contract is `Storage::enqueue_batch`'s.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use queue_core::{
    Dependency, DependencyFailure, EnqueueOutcome, FinalStatus, JobId, JobLink, JobLinks,
    LinkStatus, QueueError, Result, ValidJob, batch_closed, dependency_failed, failed_dependency,
    unknown_dependency, waiting_at,
};

use super::{Archive, State};

/// A job waiting for dependencies.
#[derive(Debug, Clone)]
pub(crate) struct Waiting {
    /// Dependencies not finished yet.
    remaining: usize,
    /// The `available_at` it was enqueued for.
    run_at: DateTime<Utc>,
    on_failure: DependencyFailure,
}

impl State {
    /// Refuses a batch whose dependencies on jobs enqueued before are
    /// unknown, or failed for a job that would be cancelled at once.
    /// And a job joining a batch whose callback is not waiting.
    pub(crate) fn check_dependencies(&self, jobs: &[ValidJob]) -> Result<()> {
        for job in jobs {
            if let Some(callback) = job.joins
                && !self.waiting.contains_key(&callback)
            {
                return Err(batch_closed(callback));
            }
            for dependency in &job.dependencies {
                let Dependency::Job(id) = *dependency else {
                    continue;
                };
                if self.jobs.contains_key(&id) {
                    continue;
                }
                match self.history.get(&id) {
                    None => return Err(unknown_dependency(id)),
                    Some(done) if !job.on_dependency_failure.counts(done.status) => {
                        return Err(failed_dependency(id, done.status));
                    }
                    Some(_) => {}
                }
            }
        }
        Ok(())
    }

    /// Enqueues a checked batch in order, each job waiting for its live
    /// dependencies.
    pub(crate) fn insert_batch(
        &mut self,
        jobs: Vec<ValidJob>,
        now: DateTime<Utc>,
    ) -> Vec<EnqueueOutcome> {
        let mut outcomes: Vec<EnqueueOutcome> = Vec::with_capacity(jobs.len());
        for job in jobs {
            let dependencies: Vec<JobId> = job
                .dependencies
                .iter()
                .map(|dependency| match *dependency {
                    Dependency::Job(id) => id,
                    Dependency::InBatch(index) => outcomes[index].id,
                })
                .collect();
            let on_failure = job.on_dependency_failure;
            let joins = job.joins;
            let outcome = self.insert(job, now);
            outcomes.push(outcome);
            if let Some(callback) = joins
                && !outcome.existed
            {
                self.join(outcome.id, callback);
            }
            if outcome.existed || dependencies.is_empty() {
                continue;
            }
            let mut distinct = BTreeSet::new();
            let mut remaining = 0;
            for dependency in dependencies {
                if !distinct.insert(dependency) {
                    continue;
                }
                self.dependants
                    .entry(dependency)
                    .or_default()
                    .insert(outcome.id);
                if self.jobs.contains_key(&dependency) {
                    self.unfinished.insert((dependency, outcome.id));
                    remaining += 1;
                }
            }
            self.dependencies.insert(outcome.id, distinct);
            if remaining > 0
                && let Some(live) = self.jobs.get_mut(&outcome.id)
            {
                let run_at = std::mem::replace(&mut live.available_at, waiting_at());
                self.waiting.insert(
                    outcome.id,
                    Waiting {
                        remaining,
                        run_at,
                        on_failure,
                    },
                );
            }
        }
        outcomes
    }

    /// Makes the waiting `callback` (checked) wait for the new job `id` too.
    fn join(&mut self, id: JobId, callback: JobId) {
        let Some(waiting) = self.waiting.get_mut(&callback) else {
            return;
        };
        waiting.remaining += 1;
        self.dependants.entry(id).or_default().insert(callback);
        self.unfinished.insert((id, callback));
        self.dependencies.entry(callback).or_default().insert(id);
    }

    /// What `finished` leaving as `status` does to the jobs waiting on it,
    /// and (through the cancellations) to theirs.
    pub(crate) fn release_dependants(
        &mut self,
        finished: JobId,
        status: FinalStatus,
        now: DateTime<Utc>,
    ) {
        let mut events = vec![(finished, status)];
        while let Some((finished, status)) = events.pop() {
            // A job waiting for itself is impossible; one that left first
            // (cancelled, discarded) has no `waiting` entry any more.
            self.waiting.remove(&finished);
            let waiters: Vec<JobId> = self
                .unfinished
                .range((finished, JobId(i64::MIN))..=(finished, JobId(i64::MAX)))
                .map(|(_, waiter)| *waiter)
                .collect();
            for waiter in waiters {
                self.unfinished.remove(&(finished, waiter));
                let Some(waiting) = self.waiting.get_mut(&waiter) else {
                    continue;
                };
                if !waiting.on_failure.counts(status) {
                    let archive = Archive {
                        last_error: Some(dependency_failed(finished, status)),
                        ..Archive::removed(FinalStatus::Cancelled)
                    };
                    if self.move_to_history(waiter, archive, now) {
                        events.push((waiter, FinalStatus::Cancelled));
                    }
                    continue;
                }
                waiting.remaining -= 1;
                if waiting.remaining == 0 {
                    let run_at = waiting.run_at;
                    self.waiting.remove(&waiter);
                    if let Some(job) = self.jobs.get_mut(&waiter) {
                        job.available_at = run_at.max(now);
                        job.updated_at = now;
                    }
                }
            }
        }
    }

    /// `Storage::job_links` for `id`.
    pub(crate) fn links(&self, id: JobId, now: DateTime<Utc>) -> Result<JobLinks> {
        if !self.jobs.contains_key(&id) && !self.history.contains_key(&id) {
            return Err(QueueError::not_found(format!("job {id}")));
        }
        let link = |other: &JobId| self.link(*other, now);
        Ok(JobLinks {
            dependencies: self
                .dependencies
                .get(&id)
                .map(|ids| ids.iter().map(link).collect())
                .unwrap_or_default(),
            dependants: self
                .dependants
                .get(&id)
                .map(|ids| ids.iter().map(link).collect())
                .unwrap_or_default(),
        })
    }

    fn link(&self, id: JobId, now: DateTime<Utc>) -> JobLink {
        if let Some(job) = self.jobs.get(&id) {
            return JobLink {
                id,
                queue: Some(job.queue.clone()),
                status: LinkStatus::Live(job.state(now)),
                result: None,
            };
        }
        match self.history.get(&id) {
            Some(done) => JobLink {
                id,
                queue: Some(done.queue.clone()),
                status: LinkStatus::Finished(done.status),
                result: done.result.clone(),
            },
            None => JobLink {
                id,
                queue: None,
                status: LinkStatus::Gone,
                result: None,
            },
        }
    }
}
