//! A backend and the model side by side, stepped and compared together.

use std::fmt::Debug;
use std::time::Duration;

use proptest::test_runner::TestCaseError;
use std::sync::atomic::{AtomicUsize, Ordering};

use queue_core::{
    Ack, Capability, Clock, Dependency, DependencyFailure, DequeueRequest, EnqueueOutcome,
    FinalStatus, GroupKey, HistoryFilter, HistoryRecord, Job, JobId, JobLink, JobLinks, Lease,
    ManualClock, NewJob, PeriodicFire, PruneRequest, QueueError, QueueLimits, QueueName, Result,
    ScheduleName, Storage, WorkerId,
};
use serde_json::json;

use super::ops::{JobSpec, Op, QUEUES, retry, throughput_samples, worker_info};
use super::{FULL_COMPARE_EVERY, fail};
use crate::MemoryStorage;
use crate::suite::{StorageFactory, start};

/// Runs one sequence on a fresh backend and a fresh model.
pub(super) async fn run_sequence<F: StorageFactory>(
    factory: &F,
    sequence: &[Op],
) -> Result<(), TestCaseError> {
    let backend_clock = ManualClock::new(start());
    let mut fixture = factory.create(Clock::Manual(backend_clock.clone())).await;
    let second = fixture.take_second_handle();
    let (backend, teardown) = fixture.into_parts();
    let mut handles = vec![std::sync::Arc::new(backend)];
    if let Some(open) = second {
        handles.push(std::sync::Arc::new(open.await));
    }
    let model_clock = ManualClock::new(start());
    let mut pair = Pair {
        model: MemoryStorage::with_clock(model_clock.clone()),
        handles,
        turn: AtomicUsize::new(0),
        clocks: [model_clock, backend_clock],
        ids: Vec::new(),
        leases: Vec::new(),
        serial: 0,
    };
    let mut outcome = Ok(());
    for (step, op) in sequence.iter().enumerate() {
        outcome = pair.apply(op).await;
        if outcome.is_ok() {
            outcome = pair.compare_stats().await;
        }
        if outcome.is_ok() && (step + 1) % FULL_COMPARE_EVERY == 0 {
            outcome = pair.compare_everything().await;
        }
        if let Err(error) = outcome {
            outcome = Err(fail(format!("step {step} ({op:?}): {error}")));
            break;
        }
    }
    if outcome.is_ok() {
        outcome = pair.compare_everything().await;
    }
    drop(pair);
    if let Some(teardown) = teardown {
        teardown.await;
    }
    outcome
}

pub(super) struct Pair<S> {
    pub(super) model: MemoryStorage,
    /// The backend's handles on one database: one, or two when the factory
    /// opens a second; calls take them in turn, as two hosts would.
    pub(super) handles: Vec<std::sync::Arc<S>>,
    pub(super) turn: AtomicUsize,
    pub(super) clocks: [ManualClock; 2],
    /// (model id, backend id) of every job either side reported.
    pub(super) ids: Vec<(JobId, JobId)>,
    /// Every lease handed out, in model ids; stale ones stay to be reused.
    pub(super) leases: Vec<Lease>,
    pub(super) serial: usize,
}

/// What a call returned, with errors reduced to their kind.
pub(super) fn kind<T>(result: Result<T>) -> Result<T, String> {
    result.map_err(|error| match error {
        QueueError::InvalidInput { field, .. } => format!("InvalidInput({field})"),
        QueueError::LeaseLost { .. } => "LeaseLost".into(),
        QueueError::NotFound { .. } => "NotFound".into(),
        QueueError::Conflict { .. } => "Conflict".into(),
        other => format!("unexpected error: {other}"),
    })
}

pub(super) fn same<T: PartialEq + Debug>(
    what: &str,
    model: T,
    backend: T,
) -> Result<(), TestCaseError> {
    if model == backend {
        Ok(())
    } else {
        Err(fail(format!(
            "{what}: model {model:?}, backend {backend:?}"
        )))
    }
}

impl<S: Storage> Pair<S> {
    fn to_backend(&self, model_id: JobId) -> Result<JobId, TestCaseError> {
        self.ids
            .iter()
            .find(|(m, _)| *m == model_id)
            .map(|(_, b)| *b)
            .ok_or_else(|| fail(format!("model job {model_id} has no backend twin")))
    }

    pub(super) fn to_model(&self, backend_id: JobId) -> Result<JobId, TestCaseError> {
        self.ids
            .iter()
            .find(|(_, b)| *b == backend_id)
            .map(|(m, _)| *m)
            .ok_or_else(|| fail(format!("backend job {backend_id} has no model twin")))
    }

    fn backend_lease(&self, lease: &Lease) -> Result<Lease, TestCaseError> {
        Ok(Lease {
            job_id: self.to_backend(lease.job_id)?,
            ..lease.clone()
        })
    }

    fn lease(&self, pick: usize) -> Option<Lease> {
        (!self.leases.is_empty()).then(|| self.leases[pick % self.leases.len()].clone())
    }

    pub(super) fn job(&self, pick: usize) -> Option<(JobId, JobId)> {
        (!self.ids.is_empty()).then(|| self.ids[pick % self.ids.len()])
    }

    /// A backend job with the model's id, after checking the twins match.
    pub(super) fn normalise_job(&self, job: Job) -> Result<Job, TestCaseError> {
        Ok(Job {
            id: self.to_model(job.id)?,
            ..job
        })
    }

    /// Backend links with the model's ids.
    pub(super) fn normalise_links(&self, links: JobLinks) -> Result<JobLinks, TestCaseError> {
        let side = |side: Vec<JobLink>| -> Result<Vec<JobLink>, TestCaseError> {
            let mut side = side
                .into_iter()
                .map(|link| {
                    Ok(JobLink {
                        id: self.to_model(link.id)?,
                        ..link
                    })
                })
                .collect::<Result<Vec<_>, TestCaseError>>()?;
            side.sort_by_key(|link| link.id);
            Ok(side)
        };
        Ok(JobLinks {
            dependencies: side(links.dependencies)?,
            dependants: side(links.dependants)?,
        })
    }

    pub(super) fn normalise_record(
        &self,
        record: HistoryRecord,
    ) -> Result<HistoryRecord, TestCaseError> {
        // A job cancelled by a failed dependency names it by the
        // backend's id.
        let dependency = record
            .last_error
            .as_ref()
            .and_then(|error| Some((error.get("dependency")?.as_i64()?, error.get("status")?)))
            .and_then(|(id, status)| Some((id, status.as_str()?.parse::<FinalStatus>().ok()?)));
        let last_error = match dependency {
            Some((id, status)) if record.status == FinalStatus::Cancelled => Some(
                queue_core::dependency_failed(self.to_model(JobId(id))?, status),
            ),
            _ => record.last_error,
        };
        Ok(HistoryRecord {
            id: self.to_model(record.id)?,
            last_error,
            ..record
        })
    }

    /// One keyed job enqueued by `racers` producers at once through the
    /// handles in turn; the model enqueues it once.
    async fn enqueue_race(&mut self, spec: &JobSpec, racers: u8) -> Result<(), TestCaseError> {
        let job = self.next_job(spec);
        let model = kind(self.model.enqueue(job.clone()).await);
        let racing = (0..racers).map(|_| {
            let backend = self.backend();
            let job = job.clone();
            async move { kind(backend.enqueue(job).await) }
        });
        let outcomes = futures_util::future::join_all(racing).await;
        let model = match model {
            Err(m) => {
                for outcome in outcomes {
                    same(
                        "racing enqueue",
                        Err::<(), _>(m.clone()),
                        outcome.map(|_| ()),
                    )?;
                }
                return Ok(());
            }
            Ok(model) => model,
        };
        let outcomes = (outcomes.into_iter())
            .map(|outcome| outcome.map_err(|e| fail(format!("racing enqueue refused: {e}"))))
            .collect::<Result<Vec<_>, _>>()?;
        let fresh: Vec<_> = outcomes.iter().filter(|o| !o.existed).collect();
        let ids: std::collections::BTreeSet<_> = outcomes.iter().map(|o| o.id).collect();
        if ids.len() != 1 || fresh.len() != usize::from(!model.existed) {
            return Err(fail(format!(
                "racing enqueue of one key: model {model:?}, racers {outcomes:?}"
            )));
        }
        let first = fresh.first().copied().copied().unwrap_or(outcomes[0]);
        self.record_enqueue(model, first)
    }

    /// One fire time offered by `racers` callers at once through the
    /// handles in turn; the model takes it once.
    async fn fire_race(
        &mut self,
        minute: u8,
        racers: u8,
        invalid: bool,
    ) -> Result<(), TestCaseError> {
        let at = start() + chrono::TimeDelta::minutes(i64::from(minute));
        self.serial += 1;
        let mut job = NewJob::new(QUEUES[0], json!({ "serial": self.serial }));
        if invalid {
            job = job.max_attempts(0);
        }
        let fire = PeriodicFire {
            schedule: ScheduleName::new("nightly").expect("valid name"),
            fire_at: at,
            next_fire_at: Some(at + chrono::TimeDelta::minutes(1)),
            job,
        };
        let model = kind(self.model.enqueue_periodic(&fire).await);
        let racing = (0..racers).map(|_| {
            let backend = self.backend();
            let fire = &fire;
            async move { kind(backend.enqueue_periodic(fire).await) }
        });
        let outcomes = futures_util::future::join_all(racing).await;
        let mut winners = Vec::new();
        for outcome in outcomes {
            match (&model, outcome) {
                (Err(m), b) => same("racing fire", Err::<(), _>(m.clone()), b.map(|_| ()))?,
                (Ok(_), Ok(Some(b))) => winners.push(b),
                (Ok(_), Ok(None)) => {}
                (Ok(_), Err(b)) => return Err(fail(format!("racing fire refused: {b}"))),
            }
        }
        match (model, winners.as_slice()) {
            (Err(_), _) | (Ok(None), []) => Ok(()),
            (Ok(Some(m)), [b]) => self.record_enqueue(m, *b),
            (m, winners) => Err(fail(format!(
                "racing fire: the model enqueued {m:?}, the racers {winners:?}"
            ))),
        }
    }

    fn record_enqueue(
        &mut self,
        model: EnqueueOutcome,
        backend: EnqueueOutcome,
    ) -> Result<(), TestCaseError> {
        same("existed", model.existed, backend.existed)?;
        if model.existed {
            same("existing id", self.to_backend(model.id)?, backend.id)
        } else if self.ids.iter().any(|(_, b)| *b == backend.id) {
            Err(fail(format!(
                "backend reused id {} for a new job",
                backend.id
            )))
        } else {
            self.ids.push((model.id, backend.id));
            Ok(())
        }
    }

    /// Enqueues `jobs` as one batch on both sides and records each pair
    /// of outcomes, or checks that both refused it alike (`what`).
    async fn enqueue_both(&mut self, what: &str, jobs: Vec<NewJob>) -> Result<(), TestCaseError> {
        let model = kind(self.model.enqueue_batch(jobs.clone()).await);
        let backend = kind(self.backend().enqueue_batch(jobs).await);
        match (model, backend) {
            (Ok(m), Ok(b)) => {
                same(&format!("{what}: length"), m.len(), b.len())?;
                m.into_iter()
                    .zip(b)
                    .try_for_each(|(m, b)| self.record_enqueue(m, b))
            }
            (m, b) => same(what, m.map(|_| ()), b.map(|_| ())),
        }
    }

    fn next_job(&mut self, spec: &super::JobSpec) -> NewJob {
        self.serial += 1;
        spec.to_new_job(self.serial)
    }

    /// The backend handle whose turn it is.
    pub(super) fn backend(&self) -> &S {
        let turn = self.turn.fetch_add(1, Ordering::Relaxed);
        &self.handles[turn % self.handles.len()]
    }

    async fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        if let Some(capability) = op.requires()
            && !self.backend().capabilities().supports(capability)
        {
            return Ok(());
        }
        match op {
            Op::Enqueue(spec) => {
                let job = self.next_job(spec);
                let model = kind(self.model.enqueue(job.clone()).await);
                let backend = kind(self.backend().enqueue(job).await);
                match (model, backend) {
                    (Ok(m), Ok(b)) => self.record_enqueue(m, b),
                    (m, b) => same("enqueue", m.map(|_| ()), b.map(|_| ())),
                }
            }
            Op::EnqueueBatch(specs) => {
                let jobs: Vec<NewJob> = specs.iter().map(|s| self.next_job(s)).collect();
                self.enqueue_both("enqueue_batch", jobs).await
            }
            Op::Dequeue {
                queues,
                limit,
                worker,
                lease_secs,
            } => {
                let names: Vec<QueueName> = QUEUES
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| queues & (1 << i) != 0)
                    .map(|(_, q)| QueueName::new(*q).expect("model queue names are valid"))
                    .collect();
                let request = DequeueRequest::new(
                    names,
                    *limit,
                    Duration::from_secs(*lease_secs),
                    WorkerId::new(format!("w{worker}")).expect("valid worker id"),
                )
                .expect("model requests are valid");
                self.claim(&request).await
            }
            Op::ClaimEach {
                queues,
                claims,
                worker,
            } => {
                let names: Vec<QueueName> = QUEUES
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| queues & (1 << i) != 0)
                    .map(|(_, q)| QueueName::new(*q).expect("model queue names are valid"))
                    .collect();
                let request = DequeueRequest::new(
                    names,
                    1,
                    Duration::from_secs(30),
                    WorkerId::new(format!("w{worker}")).expect("valid worker id"),
                )
                .expect("model requests are valid");
                for _ in 0..*claims {
                    self.claim(&request).await?;
                }
                Ok(())
            }
            Op::Ack(pick) => {
                let Some(lease) = self.lease(*pick) else {
                    return Ok(());
                };
                let result = Some(json!({"acked": pick}));
                let model = kind(self.model.ack(&lease, result.clone()).await);
                let backend_lease = self.backend_lease(&lease)?;
                let backend = kind(self.backend().ack(&backend_lease, result).await);
                same("ack", model, backend)
            }
            Op::AckBatch(picks) => {
                let mut model_acks = Vec::new();
                let mut backend_acks = Vec::new();
                for pick in picks {
                    if let Some(lease) = self.lease(*pick) {
                        let result = Some(json!(pick));
                        backend_acks.push(Ack {
                            lease: self.backend_lease(&lease)?,
                            result: result.clone(),
                        });
                        model_acks.push(Ack { lease, result });
                    }
                }
                let model = kind(self.model.ack_batch(&model_acks).await);
                let backend = kind(self.backend().ack_batch(&backend_acks).await);
                same("ack_batch", model, backend)
            }
            Op::Nack(pick, delay) => {
                let Some(lease) = self.lease(*pick) else {
                    return Ok(());
                };
                let error = json!({"failed": pick});
                let model = kind(self.model.nack(&lease, error.clone(), retry(*delay)).await);
                let backend_lease = self.backend_lease(&lease)?;
                let backend = kind(
                    self.backend()
                        .nack(&backend_lease, error, retry(*delay))
                        .await,
                );
                same("nack", model, backend)
            }
            Op::Heartbeat(pick, secs) => {
                let Some(lease) = self.lease(*pick) else {
                    return Ok(());
                };
                let extend = Duration::from_secs(*secs);
                let model = kind(self.model.heartbeat(&lease, extend).await);
                let backend_lease = self.backend_lease(&lease)?;
                let backend = kind(self.backend().heartbeat(&backend_lease, extend).await);
                same("heartbeat", model, backend)
            }
            Op::HeartbeatBatch(picks, secs) => {
                let model_leases: Vec<Lease> =
                    picks.iter().filter_map(|p| self.lease(*p)).collect();
                let backend_leases = model_leases
                    .iter()
                    .map(|l| self.backend_lease(l))
                    .collect::<Result<Vec<_>, _>>()?;
                let extend = Duration::from_secs(*secs);
                let model = kind(self.model.heartbeat_batch(&model_leases, extend).await);
                let backend = kind(
                    self.backend()
                        .heartbeat_batch(&backend_leases, extend)
                        .await,
                );
                same("heartbeat_batch", model, backend)
            }
            Op::Release(pick) => {
                let Some(lease) = self.lease(*pick) else {
                    return Ok(());
                };
                let model = kind(self.model.release(&lease).await);
                let backend_lease = self.backend_lease(&lease)?;
                let backend = kind(self.backend().release(&backend_lease).await);
                same("release", model, backend)
            }
            Op::Reclaim(limit) => {
                let model = kind(self.model.reclaim_stalled(*limit).await);
                let backend = kind(self.backend().reclaim_stalled(*limit).await);
                same("reclaim_stalled", model, backend)
            }
            Op::Advance(secs) => {
                for clock in &self.clocks {
                    clock.advance(Duration::from_secs(*secs));
                }
                Ok(())
            }
            Op::Discard(pick) => {
                let Some((m, b)) = self.job(*pick) else {
                    return Ok(());
                };
                let model = kind(self.model.discard(m).await);
                let backend = kind(self.backend().discard(b).await);
                same("discard", model, backend)
            }
            Op::Cancel(pick) => {
                let Some((m, b)) = self.job(*pick) else {
                    return Ok(());
                };
                let model = kind(self.model.cancel(m).await);
                let backend = kind(self.backend().cancel(b).await);
                same("cancel", model, backend)
            }
            Op::Snooze(pick, secs) => {
                let Some(lease) = self.lease(*pick) else {
                    return Ok(());
                };
                let delay = Duration::from_secs(*secs);
                let model = kind(self.model.snooze(&lease, delay).await);
                let backend_lease = self.backend_lease(&lease)?;
                let backend = kind(self.backend().snooze(&backend_lease, delay).await);
                same("snooze", model, backend)
            }
            Op::EnqueueDependent(spec, on, run_anyway) => {
                let picked: Vec<(JobId, JobId)> = on.iter().filter_map(|p| self.job(*p)).collect();
                let mut job = self.next_job(spec);
                if *run_anyway {
                    job = job.on_dependency_failure(DependencyFailure::Run);
                }
                let model_job = job.clone().depends_on_all(picked.iter().map(|(m, _)| *m));
                let backend_job = job.depends_on_all(picked.iter().map(|(_, b)| *b));
                let model = kind(self.model.enqueue(model_job).await);
                let backend = kind(self.backend().enqueue(backend_job).await);
                match (model, backend) {
                    (Ok(m), Ok(b)) => self.record_enqueue(m, b),
                    (m, b) => same("enqueue of a dependant", m.map(|_| ()), b.map(|_| ())),
                }
            }
            Op::EnqueueGraph(specs) => {
                let jobs: Vec<NewJob> = specs
                    .iter()
                    .map(|(spec, on)| {
                        self.next_job(spec)
                            .depends_on_all(on.iter().map(|i| Dependency::InBatch(usize::from(*i))))
                    })
                    .collect();
                self.enqueue_both("enqueue of a graph", jobs).await
            }
            Op::EnqueueCallbackBatch(specs) => {
                let mut jobs: Vec<NewJob> = specs.iter().map(|spec| self.next_job(spec)).collect();
                let callback = jobs.pop().expect("a batch op has a callback");
                let jobs = queue_core::batch(jobs, callback);
                self.enqueue_both("enqueue of a batch", jobs).await
            }
            Op::JoinBatch(spec, pick) => {
                let Some((m_callback, b_callback)) = self.job(*pick) else {
                    return Ok(());
                };
                let job = self.next_job(spec);
                let model = kind(self.model.enqueue(job.clone().joins(m_callback)).await);
                let backend = kind(self.backend().enqueue(job.joins(b_callback)).await);
                match (model, backend) {
                    (Ok(m), Ok(b)) => self.record_enqueue(m, b),
                    (m, b) => same(
                        "enqueue of a job joining a batch",
                        m.map(|_| ()),
                        b.map(|_| ()),
                    ),
                }
            }
            Op::EnqueueGrouped(spec, g) => {
                let job = self.next_job(spec).group_key(format!("g{g}"));
                let model = kind(self.model.enqueue(job.clone()).await);
                let backend = kind(self.backend().enqueue(job).await);
                match (model, backend) {
                    (Ok(m), Ok(b)) => self.record_enqueue(m, b),
                    (m, b) => same("enqueue of a grouped job", m.map(|_| ()), b.map(|_| ())),
                }
            }
            Op::EnqueueGroups(q, n) => {
                let spec = JobSpec {
                    queue: *q,
                    key: None,
                    priority: 0,
                    delay_secs: None,
                    max_attempts: 3,
                    invalid: false,
                };
                let jobs: Vec<NewJob> = (0..*n)
                    .map(|i| self.next_job(&spec).group_key(format!("g{}", i % 3)))
                    .collect();
                self.enqueue_both("enqueue of groups", jobs).await
            }
            Op::ConfigureGroups(q, limit) => {
                let queue = QueueName::new(QUEUES[*q]).expect("valid queue");
                let limits = QueueLimits {
                    group_concurrency: *limit,
                    ..QueueLimits::default()
                };
                let model = kind(self.model.configure_queue(&queue, &limits).await);
                // Through every handle, as `Op::Configure` explains.
                for handle in &self.handles {
                    let backend = kind(handle.configure_queue(&queue, &limits).await);
                    same("configure_queue (groups)", model.clone(), backend)?;
                }
                let model = kind(self.model.queue_configs().await);
                let backend = kind(self.backend().queue_configs().await);
                same("queue_configs", model, backend)
            }
            Op::ConfigureFair(q, fair, weight) => {
                let queue = QueueName::new(QUEUES[*q]).expect("valid queue");
                let limits = QueueLimits {
                    fair_groups: *fair,
                    ..QueueLimits::default()
                };
                let model = kind(self.model.configure_queue(&queue, &limits).await);
                // Through every handle, as `Op::Configure` explains.
                for handle in &self.handles {
                    let backend = kind(handle.configure_queue(&queue, &limits).await);
                    same("configure_queue (fair)", model.clone(), backend)?;
                }
                if let Some(weight) = weight
                    && self
                        .backend()
                        .capabilities()
                        .supports(Capability::GroupWeights)
                {
                    let group = GroupKey::new("g0").expect("valid group key");
                    let model = kind(
                        self.model
                            .set_group_weight(&queue, &group, Some(*weight))
                            .await,
                    );
                    for handle in &self.handles {
                        let backend =
                            kind(handle.set_group_weight(&queue, &group, Some(*weight)).await);
                        same("set_group_weight (fair)", model.clone(), backend)?;
                    }
                }
                let model = kind(self.model.queue_configs().await);
                let backend = kind(self.backend().queue_configs().await);
                same("queue_configs", model, backend)
            }
            Op::ConfigureAging(q, period) => {
                let queue = QueueName::new(QUEUES[*q]).expect("valid queue");
                let limits = QueueLimits {
                    priority_aging: period.map(Duration::from_secs),
                    ..QueueLimits::default()
                };
                let model = kind(self.model.configure_queue(&queue, &limits).await);
                // Through every handle, as `Op::Configure` explains.
                for handle in &self.handles {
                    let backend = kind(handle.configure_queue(&queue, &limits).await);
                    same("configure_queue (aging)", model.clone(), backend)?;
                }
                let model = kind(self.model.queue_configs().await);
                let backend = kind(self.backend().queue_configs().await);
                same("queue_configs", model, backend)
            }
            Op::SetGroupLimit(q, g, limit) => {
                let queue = QueueName::new(QUEUES[*q]).expect("valid queue");
                let group = GroupKey::new(format!("g{g}")).expect("valid group key");
                let model = kind(self.model.set_group_limit(&queue, &group, *limit).await);
                for handle in &self.handles {
                    let backend = kind(handle.set_group_limit(&queue, &group, *limit).await);
                    same("set_group_limit", model.clone(), backend)?;
                }
                let model = kind(self.model.group_limits().await);
                let backend = kind(self.backend().group_limits().await);
                same("group_limits", model, backend)
            }
            Op::SetGroupWeight(q, g, weight) => {
                let queue = QueueName::new(QUEUES[*q]).expect("valid queue");
                let group = GroupKey::new(format!("g{g}")).expect("valid group key");
                let model = kind(self.model.set_group_weight(&queue, &group, *weight).await);
                for handle in &self.handles {
                    let backend = kind(handle.set_group_weight(&queue, &group, *weight).await);
                    same("set_group_weight", model.clone(), backend)?;
                }
                let model = kind(self.model.group_weights().await);
                let backend = kind(self.backend().group_weights().await);
                same("group_weights", model, backend)
            }
            Op::Configure(q, concurrency, rate) => {
                let queue = QueueName::new(QUEUES[*q]).expect("valid queue");
                let limits = super::ops::limits(*concurrency, *rate);
                let model = kind(self.model.configure_queue(&queue, &limits).await);
                let backend = kind(self.backend().configure_queue(&queue, &limits).await);
                same("configure_queue", model.clone(), backend)?;
                // A backend may trust its own read of which queues have
                // limits for `LimitedQueues::TTL` (see `configure_queue`'s
                // contract): a change binds the handle that made it at
                // once, the others within that second of real time, which
                // the model's manual clock cannot follow. The same change
                // through every handle binds them all at once.
                if self.handles.len() > 1 {
                    for handle in &self.handles {
                        let again = kind(handle.configure_queue(&queue, &limits).await);
                        same("configure_queue on every handle", model.clone(), again)?;
                    }
                }
                let model = kind(self.model.queue_configs().await);
                let backend = kind(self.backend().queue_configs().await);
                same("queue_configs", model, backend)
            }
            Op::Fire(minute) => {
                let at = start() + chrono::TimeDelta::minutes(i64::from(*minute));
                self.serial += 1;
                let fire = PeriodicFire {
                    schedule: ScheduleName::new("nightly").expect("valid name"),
                    fire_at: at,
                    next_fire_at: Some(at + chrono::TimeDelta::minutes(1)),
                    job: NewJob::new(QUEUES[0], json!({ "serial": self.serial })),
                };
                let model = kind(self.model.enqueue_periodic(&fire).await);
                let backend = kind(self.backend().enqueue_periodic(&fire).await);
                match (model, backend) {
                    (Ok(Some(m)), Ok(Some(b))) => self.record_enqueue(m, b),
                    (m, b) => same(
                        "enqueue_periodic",
                        m.map(|o| o.is_some()),
                        b.map(|o| o.is_some()),
                    ),
                }
            }
            Op::EnqueueRace { spec, racers } => self.enqueue_race(spec, *racers).await,
            Op::AdvanceMillis(millis) => {
                for clock in &self.clocks {
                    clock.advance(Duration::from_millis(*millis));
                }
                Ok(())
            }
            Op::FireRace {
                minute,
                racers,
                invalid,
            } => self.fire_race(*minute, *racers, *invalid).await,
            Op::RetryDeadLetter(pick) => {
                let Some((m, b)) = self.job(*pick) else {
                    return Ok(());
                };
                let model = kind(self.model.retry_dead_letter(m).await);
                let backend = kind(self.backend().retry_dead_letter(b).await);
                same("retry_dead_letter", model, backend)
            }
            Op::Pause(q) | Op::Resume(q) => {
                let queue = QueueName::new(QUEUES[*q]).expect("valid queue");
                let pause = matches!(op, Op::Pause(_));
                let (model, backend) = if pause {
                    (
                        kind(self.model.pause_queue(&queue).await),
                        kind(self.backend().pause_queue(&queue).await),
                    )
                } else {
                    (
                        kind(self.model.resume_queue(&queue).await),
                        kind(self.backend().resume_queue(&queue).await),
                    )
                };
                same("pause/resume", model, backend)
            }
            Op::Prune(secs, status, limit) => {
                let request = PruneRequest {
                    older_than: Duration::from_secs(*secs),
                    status: *status,
                    limit: *limit,
                };
                let model = kind(self.model.prune_history(&request).await);
                let backend = kind(self.backend().prune_history(&request).await);
                same("prune_history", model, backend)
            }
            Op::DequeueCapped { a, b, worker } => self.dequeue_capped([*a, *b], *worker).await,
            Op::NextDue(queues) => self.next_due(*queues).await,
            Op::ConcurrentClaims { workers, limit } => {
                self.concurrent_claims(*workers, *limit).await
            }
            Op::ListHistory {
                queue,
                status,
                before,
                limit,
            } => self.list_history(*queue, *status, *before, *limit).await,
            Op::Select {
                action,
                queue,
                state,
                key,
                before,
                limit,
            } => {
                let filter = (*queue, *state, *key, *before, *limit);
                self.select(*action, filter).await
            }
            Op::RetryDeadLetters { queue, limit } => {
                let filter = HistoryFilter {
                    queue: queue.map(|q| QueueName::new(QUEUES[q]).expect("model queue names")),
                    limit: *limit,
                    ..HistoryFilter::default()
                };
                let model = kind(self.model.retry_dead_letters(&filter).await);
                let backend = kind(self.backend().retry_dead_letters(&filter).await);
                same("retry_dead_letters", model, backend)
            }
            Op::Throughput(minutes) => {
                let window = Duration::from_secs(60 * u64::from(*minutes));
                let backend = self.backend();
                let model = kind(self.model.throughput(window).await);
                same("throughput", model, kind(backend.throughput(window).await))?;
                if !backend.capabilities().supports(Capability::Samples) {
                    return Ok(());
                }
                let samples = throughput_samples(*minutes, self.clocks[0].now());
                let model = kind(self.model.record_samples(&samples).await);
                same(
                    "record_samples",
                    model,
                    kind(backend.record_samples(&samples).await),
                )?;
                let model = kind(self.model.samples(window).await);
                same("samples", model, kind(backend.samples(window).await))
            }
            Op::RegisterWorker(n, concurrency) => {
                let info = worker_info(*n, *concurrency);
                let model = kind(self.model.register_worker(&info).await);
                let backend = kind(self.backend().register_worker(&info).await);
                same("register_worker", model, backend)
            }
            Op::DeregisterWorker(n) => {
                let id = worker_info(*n, 1).id;
                let model = kind(self.model.deregister_worker(&id).await);
                let backend = kind(self.backend().deregister_worker(&id).await);
                same("deregister_worker", model, backend)
            }
            Op::ListWorkers(silent, forget) => {
                let (silent, forget) = (
                    Duration::from_secs(*silent),
                    Duration::from_secs(silent + forget),
                );
                let model = kind(self.model.list_workers(silent, forget).await);
                let backend = kind(self.backend().list_workers(silent, forget).await);
                same("list_workers", model, backend)
            }
        }
    }

    async fn compare_stats(&self) -> Result<(), TestCaseError> {
        let model = kind(self.model.stats().await);
        let backend = kind(self.backend().stats().await);
        same("stats", model, backend)?;
        // A cap the few jobs of a run reach.
        let model = kind(self.model.stats_capped(2).await);
        let backend = kind(self.backend().stats_capped(2).await);
        same("stats capped at 2", model, backend)
    }

    /// Every known job, live and archived, must read back the same.
    async fn compare_everything(&self) -> Result<(), TestCaseError> {
        for (m, b) in &self.ids {
            let model = self.model.get_job(*m).await;
            let backend = self.backend().get_job(*b).await;
            let backend = match backend {
                Ok(job) => Ok(job.map(|j| self.normalise_job(j)).transpose()?),
                Err(e) => Err(e),
            };
            same(&format!("live job {m}"), kind(model), kind(backend))?;

            let model = self.model.get_history(*m).await;
            let backend = self.backend().get_history(*b).await;
            let backend = match backend {
                Ok(record) => Ok(record.map(|r| self.normalise_record(r)).transpose()?),
                Err(e) => Err(e),
            };
            same(&format!("history of {m}"), kind(model), kind(backend))?;
        }
        let declared = self.backend().capabilities();
        if declared.supports(Capability::Dependencies) {
            for (m, b) in &self.ids {
                let model = kind(self.model.job_links(*m).await);
                let backend = match self.backend().job_links(*b).await {
                    Ok(links) => Ok(self.normalise_links(links)?),
                    Err(e) => Err(e),
                };
                same(&format!("links of {m}"), model, kind(backend))?;
            }
        }
        if declared.supports(Capability::Periodic) {
            let model = kind(self.model.schedules().await);
            let backend = kind(self.backend().schedules().await);
            same("schedules", model, backend)?;
        }
        if declared.supports(Capability::FlowLimits) {
            let model = kind(self.model.queue_configs().await);
            let backend = kind(self.backend().queue_configs().await);
            same("queue_configs", model, backend)?;
        }
        if declared.supports(Capability::GroupLimits) {
            let model = kind(self.model.group_limits().await);
            let backend = kind(self.backend().group_limits().await);
            same("group_limits", model, backend)?;
        }
        if declared.supports(Capability::GroupWeights) {
            let model = kind(self.model.group_weights().await);
            let backend = kind(self.backend().group_weights().await);
            same("group_weights", model, backend)?;
        }
        if declared.supports(Capability::Workers) {
            // Ages long enough to forget nobody: the comparison changes nothing.
            let (silent, forget) = (Duration::from_secs(30), Duration::from_secs(365 * 86_400));
            let model = kind(self.model.list_workers(silent, forget).await);
            let backend = kind(self.backend().list_workers(silent, forget).await);
            same("list_workers", model, backend)?;
        }
        Ok(())
    }
}
