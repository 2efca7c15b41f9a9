//! `MemoryStorage`: the reference implementation of the `Storage` contract.
//!
//! It keeps jobs in a mutex-guarded map and follows the contract literally,
//! so it serves three purposes: the model the property test compares real
//! backends against, a check that the conformance suite itself is right,
//! and a fast storage for users' unit tests of their handlers.

mod flow;
mod steps;
mod storage;
mod workflow;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, Utc};
use queue_core::backend::FairTurn;
use queue_core::time::truncate_to_micros;
use queue_core::{
    Bucket, Clock, EnqueueOutcome, FinalStatus, GroupKey, HistoryRecord, Job, JobId, Lease,
    QueueLimits, QueueName, QueueSample, ScheduleName, ScheduleRecord, ValidJob, WorkerId,
    WorkerInfo,
};
use serde_json::Value;

/// An in-memory `Storage`. Cheap to create; nothing outlives it (but the
/// handles [`MemoryStorage::handle`] opens on it).
#[derive(Debug, Default)]
pub struct MemoryStorage {
    clock: Clock,
    state: Arc<Mutex<State>>,
}

/// What a [`MemoryStorage`] holds; the crate's deliberately broken storages
/// (`crate::broken`) reach in to plant their bugs.
#[derive(Debug, Default)]
pub(crate) struct State {
    last_id: i64,
    pub(crate) jobs: BTreeMap<JobId, Job>,
    pub(crate) history: BTreeMap<JobId, HistoryRecord>,
    pub(crate) paused: BTreeSet<QueueName>,
    pub(crate) limits: BTreeMap<QueueName, QueueLimits>,
    pub(crate) buckets: BTreeMap<QueueName, Bucket>,
    /// The queues with a config row (configured or paused once): those a
    /// group of which may be given its own limit.
    pub(crate) configured: BTreeSet<QueueName>,
    /// Each group's own concurrency limit, by queue and group.
    pub(crate) group_limits: BTreeMap<(QueueName, GroupKey), u32>,
    /// Each group's own weight in a fair queue, by queue and group.
    pub(crate) group_weights: BTreeMap<(QueueName, GroupKey), u32>,
    pub(crate) fires: BTreeMap<ScheduleName, ScheduleRecord>,
    /// The worker registry: what each worker registered, and when.
    pub(crate) workers: BTreeMap<WorkerId, (WorkerInfo, DateTime<Utc>)>,
    /// What workers recorded per queue and minute (`record_samples`).
    pub(crate) samples: BTreeMap<(QueueName, DateTime<Utc>), QueueSample>,
    /// Fair groups: each queue's claim count, and each group's turn
    /// (`None`: no group key).
    pub(crate) claim_counts: BTreeMap<QueueName, u64>,
    pub(crate) turns: BTreeMap<(QueueName, Option<GroupKey>), FairTurn>,
    /// Workflows: each job's dependencies and dependants as enqueued
    /// (kept after they finish, for `job_links`), the (dependency,
    /// dependant) pairs whose dependency has not finished, and the jobs
    /// waiting.
    pub(crate) dependencies: BTreeMap<JobId, BTreeSet<JobId>>,
    pub(crate) dependants: BTreeMap<JobId, BTreeSet<JobId>>,
    pub(crate) unfinished: BTreeSet<(JobId, JobId)>,
    pub(crate) waiting: BTreeMap<JobId, workflow::Waiting>,
}

impl MemoryStorage {
    /// An empty storage reading the system clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty storage reading `clock` (a [`queue_core::ManualClock`] in tests).
    pub fn with_clock(clock: impl Into<Clock>) -> Self {
        Self {
            clock: clock.into(),
            state: Arc::default(),
        }
    }

    /// Another handle on the same jobs, as a second process on one
    /// database would hold: what one handle writes, the other reads.
    pub fn handle(&self) -> Self {
        Self {
            clock: self.clock.clone(),
            state: Arc::clone(&self.state),
        }
    }

    pub(crate) fn current_time(&self) -> DateTime<Utc> {
        self.clock
            .fixed_now()
            .unwrap_or_else(|| truncate_to_micros(Utc::now()))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    fn insert(&mut self, job: ValidJob, now: DateTime<Utc>) -> EnqueueOutcome {
        if let Some(key) = &job.unique_key {
            let live = self
                .jobs
                .values()
                .find(|j| j.queue == job.queue && j.unique_key.as_ref() == Some(key));
            if let Some(live) = live {
                return EnqueueOutcome {
                    id: live.id,
                    existed: true,
                };
            }
        }
        self.last_id += 1;
        let id = JobId(self.last_id);
        let available_at = job.available_at(now);
        self.jobs.insert(
            id,
            Job {
                id,
                queue: job.queue,
                priority: job.priority,
                unique_key: job.unique_key,
                group_key: job.group_key,
                payload: job.payload,
                attempts: 0,
                max_attempts: job.max_attempts,
                snoozes: 0,
                available_at,
                lease_until: None,
                locked_by: None,
                first_locked_at: None,
                last_error: None,
                created_at: now,
                updated_at: now,
                trace_context: job.trace_context,
            },
        );
        EnqueueOutcome { id, existed: false }
    }

    /// The live job the lease is current for (see the `Storage` docs).
    pub(crate) fn held(&mut self, lease: &Lease) -> Option<&mut Job> {
        self.jobs.get_mut(&lease.job_id).filter(|job| {
            job.lease_until.is_some()
                && job.locked_by.as_ref() == Some(&lease.worker_id)
                && job.attempts == lease.attempt
        })
    }

    /// Moves a live job into history, and lets the jobs waiting on it know.
    fn archive(&mut self, id: JobId, archive: Archive, now: DateTime<Utc>) {
        let status = archive.status;
        if self.move_to_history(id, archive, now) {
            self.release_dependants(id, status, now);
        }
    }

    /// Moves the live jobs `ids` into history, then lets the jobs waiting
    /// on them know in ascending id order: a job cancelled by several of
    /// them names the lowest (`queue_core::dependency_failed`), as it does
    /// on a backend that archives them in one statement.
    fn archive_all(&mut self, ids: Vec<(JobId, Archive)>, now: DateTime<Utc>) {
        let mut finished = Vec::with_capacity(ids.len());
        for (id, archive) in ids {
            let status = archive.status;
            if self.move_to_history(id, archive, now) {
                finished.push((id, status));
            }
        }
        finished.sort_unstable_by_key(|(id, _)| *id);
        for (id, status) in finished {
            self.release_dependants(id, status, now);
        }
    }

    /// Moves a live job into history; false when it is not live.
    fn move_to_history(&mut self, id: JobId, archive: Archive, now: DateTime<Utc>) -> bool {
        let Some(job) = self.jobs.remove(&id) else {
            return false;
        };
        self.history.insert(
            id,
            HistoryRecord {
                id,
                queue: job.queue,
                priority: job.priority,
                unique_key: job.unique_key,
                group_key: job.group_key,
                payload: job.payload,
                status: archive.status,
                result: archive.result,
                last_error: archive.last_error.or(job.last_error),
                attempts: job.attempts,
                max_attempts: job.max_attempts,
                snoozes: job.snoozes,
                processed_by: archive.processed_by,
                created_at: job.created_at,
                started_at: job.first_locked_at,
                finished_at: now,
                trace_context: job.trace_context,
            },
        );
        true
    }
}

/// How a job leaves the live table.
struct Archive {
    status: FinalStatus,
    result: Option<Value>,
    /// Replaces the job's last error when set.
    last_error: Option<Value>,
    processed_by: Option<WorkerId>,
}

impl Archive {
    /// An operator's discard or cancel (`status`).
    fn removed(status: FinalStatus) -> Self {
        Self {
            status,
            result: None,
            last_error: None,
            processed_by: None,
        }
    }
}

/// Makes a fresh [`MemoryStorage`] per conformance case.
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryFactory;

#[async_trait::async_trait]
impl crate::suite::StorageFactory for MemoryFactory {
    type Storage = MemoryStorage;

    async fn create(&self, clock: Clock) -> crate::suite::Fixture<MemoryStorage> {
        let storage = MemoryStorage::with_clock(clock);
        let second = storage.handle();
        crate::suite::Fixture::new(storage).with_second_handle(async move { second })
    }
}
