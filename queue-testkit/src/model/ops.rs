//! The random operations of the model test, and how proptest draws them.

use std::time::Duration;

use proptest::prelude::*;
use queue_core::{
    Capability, FinalStatus, JobState, NewJob, QueueLimits, RateLimit, Retry, TraceContext,
};
use serde_json::json;

/// Queue names the operations use: few, so that they collide.
pub const QUEUES: [&str; 2] = ["a", "b"];

/// One step applied to both storages.
#[derive(Debug, Clone)]
pub enum Op {
    /// Enqueue one job.
    Enqueue(JobSpec),
    /// Enqueue several jobs in one call.
    EnqueueBatch(Vec<JobSpec>),
    /// Claim jobs.
    Dequeue {
        /// 1 = a, 2 = b, 3 = both.
        queues: u8,
        /// How many.
        limit: u32,
        /// Worker `w0` or `w1`.
        worker: u8,
        /// Lease in seconds.
        lease_secs: u64,
    },
    /// Claims of one job each, `claims` of them in a row (as busy workers
    /// take their next job), from queues `queues` (as in `Dequeue`), each
    /// through the next handle: where the turns of a fair queue, and the
    /// jobs its weighted groups take, must carry from claim to claim.
    ClaimEach {
        /// 1 = a, 2 = b, 3 = both.
        queues: u8,
        /// How many claims.
        claims: u8,
        /// Worker `w0` or `w1`.
        worker: u8,
    },
    /// Ack the lease picked by index (stale leases included).
    Ack(usize),
    /// Ack several leases in one call.
    AckBatch(Vec<usize>),
    /// Nack a lease; `None` = `Retry::Never`.
    Nack(usize, Option<u64>),
    /// Heartbeat a lease for so many seconds.
    Heartbeat(usize, u64),
    /// Heartbeat several leases in one call.
    HeartbeatBatch(Vec<usize>, u64),
    /// Release a lease.
    Release(usize),
    /// Reclaim stalled jobs, at most this many.
    Reclaim(u32),
    /// Let time pass, in seconds.
    Advance(u64),
    /// Discard the job picked by index.
    Discard(usize),
    /// Retry the job picked by index as a dead letter.
    RetryDeadLetter(usize),
    /// Pause queue 0 or 1.
    Pause(usize),
    /// Resume queue 0 or 1.
    Resume(usize),
    /// Prune history older than so many seconds, maybe by status, at most a limit.
    Prune(u64, Option<FinalStatus>, u32),
    /// Claim from both queues with a cap per queue: at most `a` jobs of
    /// queue a and `b` of queue b, by worker `w0` or `w1`, leased for 30 s.
    DequeueCapped {
        /// Cap for queue a.
        a: u32,
        /// Cap for queue b.
        b: u32,
        /// Worker `w0` or `w1`.
        worker: u8,
    },
    /// `workers` workers (`c0`, `c1`, ...) claim up to `limit` jobs each of
    /// both queues at once, leased for 30 s: no job may go to two of them,
    /// and each takes jobs as [`Storage::dequeue`] promises racing claims
    /// (within a queue never past a free better job; across queues past one
    /// only while the round took that queue's cap). The model then records
    /// the backend's assignment.
    ///
    /// [`Storage::dequeue`]: queue_core::Storage::dequeue
    ConcurrentClaims {
        /// How many workers race.
        workers: u8,
        /// Jobs per worker.
        limit: u32,
    },
    /// Snooze a lease for so many seconds.
    Snooze(usize, u64),
    /// Cancel the job picked by index.
    Cancel(usize),
    /// Set queue 0 or 1's limits: a concurrency limit, a rate (jobs per
    /// second, burst); neither lifts them.
    Configure(usize, Option<u32>, Option<(u32, u32)>),
    /// Fire schedule `nightly` at minute `n` after the start (its job goes
    /// to queue a).
    Fire(u8),
    /// Ask `next_due` for queues 1 = a, 2 = b, 3 = both.
    NextDue(u8),
    /// List history, maybe by queue and status, below the job picked by
    /// index, so many rows per page.
    ListHistory {
        /// Queue 0 or 1, or all.
        queue: Option<usize>,
        /// Final status, or all.
        status: Option<FinalStatus>,
        /// Pick of the job whose id pages start below.
        before: Option<usize>,
        /// Rows per page.
        limit: u32,
    },
    /// List, run now or discard what a job filter selects.
    Select {
        /// What to do with the selection.
        action: Selection,
        /// Queue 0 or 1, or all.
        queue: Option<usize>,
        /// Derived state, or all.
        state: Option<JobState>,
        /// Unique key `k{n}`, or any.
        key: Option<u8>,
        /// Pick of the job whose id the selection starts below.
        before: Option<usize>,
        /// Jobs per page or per call.
        limit: u32,
    },
    /// Retry dead letters in bulk, maybe of one queue, at most `limit`.
    RetryDeadLetters {
        /// Queue 0 or 1, or all.
        queue: Option<usize>,
        /// Dead letters per call.
        limit: u32,
    },
    /// Completed and failed jobs per minute over the last `n` minutes.
    Throughput(u32),
    /// `racers` producers enqueue jobs of one unique key at once, through
    /// the handles in turn: one job, every producer told its id.
    EnqueueRace {
        /// The job (its key is always set).
        spec: JobSpec,
        /// How many producers race.
        racers: u8,
    },
    /// Move both clocks forward by this many milliseconds.
    AdvanceMillis(u64),
    /// `racers` callers offer one fire time at once, through the handles
    /// in turn: exactly one enqueues it (or, with an invalid job, every one
    /// is refused naming the field).
    FireRace {
        /// Minutes after the start the fire is for.
        minute: u8,
        /// How many callers race.
        racers: u8,
        /// The fire's job is invalid (0 attempts).
        invalid: bool,
    },
    /// Register (or heartbeat) worker `r0`, `r1` or `r2` with this
    /// concurrency on queue a.
    RegisterWorker(u8, u32),
    /// Deregister worker `r0`, `r1` or `r2`.
    DeregisterWorker(u8),
    /// List the workers, silent after `.0` seconds, forgotten `.1` seconds
    /// later.
    ListWorkers(u64, u64),
    /// Enqueue one job in group `g0`, `g1` or `g2`.
    EnqueueGrouped(JobSpec, u8),
    /// Enqueue, in one batch, `.1` jobs due now at priority 0 into a queue
    /// (index into [`QUEUES`]), in groups `g0`, `g1`, `g2`, `g0`, ... (a
    /// tenants' workload: what fair groups and weights order).
    EnqueueGroups(usize, u8),
    /// Give a queue (index into [`QUEUES`]) this group concurrency and no
    /// other limit, through every handle.
    ConfigureGroups(usize, Option<u32>),
    /// Give group `g{n}` of a queue its own limit, or remove it, through
    /// every handle.
    SetGroupLimit(usize, u8, Option<u32>),
    /// Give a queue (index into [`QUEUES`]) this priority aging period in
    /// seconds (`None`: no aging) and no other limit, through every
    /// handle; the clock steps (`Advance`, `AdvanceMillis`) then age its
    /// jobs between claims.
    ConfigureAging(usize, Option<u64>),
    /// Give a queue (index into [`QUEUES`]) fair groups, or take them
    /// away, and no other limit, through every handle; claims through the
    /// handles in turn then serve its groups by their turns. With
    /// `Some(w)`, on a storage that declares
    /// [`Capability::GroupWeights`], group `g0` of the queue also gets
    /// weight `w` (so weights meet fair queues often).
    ConfigureFair(usize, bool, Option<u32>),
    /// Give group `g{n}` of a queue its own weight (0 or above the most:
    /// refused), or remove it, through every handle.
    SetGroupWeight(usize, u8, Option<u32>),
    /// Enqueue one job depending on the jobs picked by index (live, in
    /// history, or pruned: refused), cancelled when one fails unless
    /// `.2` (it then runs anyway).
    EnqueueDependent(JobSpec, Vec<usize>, bool),
    /// Enqueue a graph in one batch: job `i` depends on the earlier jobs
    /// of the batch listed with it (an index not below `i` is refused, and
    /// so is the whole batch).
    EnqueueGraph(Vec<(JobSpec, Vec<u8>)>),
    /// Enqueue a batch ([`queue_core::batch`]): the jobs, then the last
    /// spec as its callback.
    EnqueueCallbackBatch(Vec<JobSpec>),
    /// Enqueue a job joining the batch whose callback is the picked job
    /// (refused as a conflict when that one is not waiting).
    JoinBatch(JobSpec, usize),
}

/// What an [`Op::Select`] does with the jobs its filter selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// `list_jobs`: one page.
    List,
    /// `run_now`.
    RunNow,
    /// `discard_jobs`.
    Discard,
}

impl Op {
    /// The optional capability the step exercises, if any: the model test
    /// skips it on a storage that does not declare it.
    pub fn requires(&self) -> Option<Capability> {
        match self {
            Op::Discard(_) => Some(Capability::Discard),
            Op::RetryDeadLetter(_) => Some(Capability::RetryDeadLetter),
            Op::Pause(_) | Op::Resume(_) => Some(Capability::Pause),
            Op::Prune(..) => Some(Capability::PruneHistory),
            Op::Snooze(..) => Some(Capability::Snooze),
            Op::Cancel(_) => Some(Capability::Cancel),
            Op::Configure(..) => Some(Capability::FlowLimits),
            Op::Fire(_) | Op::FireRace { .. } => Some(Capability::Periodic),
            Op::Select {
                action: Selection::List,
                ..
            } => Some(Capability::ListJobs),
            Op::Select { .. } | Op::RetryDeadLetters { .. } => Some(Capability::BulkActions),
            Op::Throughput(_) => Some(Capability::Throughput),
            Op::RegisterWorker(..) | Op::DeregisterWorker(_) | Op::ListWorkers(..) => {
                Some(Capability::Workers)
            }
            Op::EnqueueGrouped(..)
            | Op::EnqueueGroups(..)
            | Op::ConfigureGroups(..)
            | Op::SetGroupLimit(..) => Some(Capability::GroupLimits),
            Op::ConfigureAging(..) => Some(Capability::PriorityAging),
            Op::ConfigureFair(..) => Some(Capability::FairGroups),
            Op::SetGroupWeight(..) => Some(Capability::GroupWeights),
            Op::EnqueueDependent(..) | Op::EnqueueGraph(_) | Op::EnqueueCallbackBatch(_) => {
                Some(Capability::Dependencies)
            }
            Op::JoinBatch(..) => Some(Capability::Batches),
            _ => None,
        }
    }
}

/// A job to enqueue, small enough to print when a case fails (the printed
/// form is valid Rust, to paste into a [`super::replay`] regression test).
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// Index into [`QUEUES`].
    pub queue: usize,
    /// Unique key `k{n}`, if any.
    pub key: Option<u8>,
    /// Priority.
    pub priority: i32,
    /// Delay in seconds, if any.
    pub delay_secs: Option<u64>,
    /// Attempts allowed.
    pub max_attempts: u32,
    /// Make the job invalid (0 attempts allowed).
    pub invalid: bool,
}

impl JobSpec {
    /// The `NewJob` this spec stands for.
    pub fn to_new_job(&self, serial: usize) -> NewJob {
        let mut job = NewJob::new(QUEUES[self.queue], json!({"serial": serial}))
            .priority(self.priority)
            .max_attempts(if self.invalid { 0 } else { self.max_attempts });
        if let Some(key) = self.key {
            job = job.unique_key(format!("k{key}"));
        }
        if let Some(delay) = self.delay_secs {
            job = job.delay(Duration::from_secs(delay));
        }
        // Every other job carries a trace context, made from its serial
        // (so a printed spec still stands for the same job).
        if serial % 2 == 1 {
            let traceparent = format!("00-{serial:032x}-{serial:016x}-01");
            if let Ok(ctx) = TraceContext::new(traceparent, Some(format!("model={serial}"))) {
                job = job.trace_context(ctx);
            }
        }
        job
    }
}

fn job_spec() -> impl Strategy<Value = JobSpec> {
    (
        0..QUEUES.len(),
        proptest::option::of(0u8..3),
        -2i32..=2,
        proptest::option::weighted(0.3, 1u64..=60),
        1u32..=3,
        proptest::bool::weighted(0.05),
    )
        .prop_map(
            |(queue, key, priority, delay_secs, max_attempts, invalid)| JobSpec {
                queue,
                key,
                priority,
                delay_secs,
                max_attempts,
                invalid,
            },
        )
}

fn status() -> impl Strategy<Value = Option<FinalStatus>> {
    prop_oneof![
        Just(None),
        Just(Some(FinalStatus::Completed)),
        Just(Some(FinalStatus::DeadLetter)),
        Just(Some(FinalStatus::Discarded)),
        Just(Some(FinalStatus::Cancelled)),
    ]
}

/// Draws one operation, weighted towards the common ones.
pub(super) fn op() -> impl Strategy<Value = Op> {
    let pick = 0usize..16;
    prop_oneof![
        6 => job_spec().prop_map(Op::Enqueue),
        2 => proptest::collection::vec(job_spec(), 0..5).prop_map(Op::EnqueueBatch),
        6 => (1u8..=3, 1u32..=4, 0u8..2, prop_oneof![Just(5u64), Just(30)])
            .prop_map(|(queues, limit, worker, lease_secs)| Op::Dequeue { queues, limit, worker, lease_secs }),
        2 => (1u8..=3, 2u8..=5, 0u8..2).prop_map(|(queues, claims, worker)| Op::ClaimEach { queues, claims, worker }),
        4 => pick.clone().prop_map(Op::Ack),
        1 => proptest::collection::vec(pick.clone(), 0..4).prop_map(Op::AckBatch),
        3 => (pick.clone(), proptest::option::weighted(0.8, 0u64..=20)).prop_map(|(i, d)| Op::Nack(i, d)),
        2 => (pick.clone(), 1u64..=40).prop_map(|(i, s)| Op::Heartbeat(i, s)),
        1 => (proptest::collection::vec(pick.clone(), 0..4), 1u64..=40).prop_map(|(v, s)| Op::HeartbeatBatch(v, s)),
        1 => pick.clone().prop_map(Op::Release),
        2 => (1u32..=4).prop_map(Op::Reclaim),
        4 => prop_oneof![0u64..=3, 4u64..=40].prop_map(Op::Advance),
        1 => pick.clone().prop_map(Op::Discard),
        1 => pick.clone().prop_map(Op::RetryDeadLetter),
        1 => (0..QUEUES.len()).prop_map(Op::Pause),
        1 => (0..QUEUES.len()).prop_map(Op::Resume),
        1 => (0u64..=60, status(), 1u32..=4).prop_map(|(s, st, l)| Op::Prune(s, st, l)),
        2 => (1u32..=3, 1u32..=3, 0u8..2).prop_map(|(a, b, worker)| Op::DequeueCapped { a, b, worker }),
        2 => (1u8..=3).prop_map(Op::NextDue),
        2 => (pick.clone(), 0u64..=20).prop_map(|(i, s)| Op::Snooze(i, s)),
        1 => pick.clone().prop_map(Op::Cancel),
        1 => (0..QUEUES.len(), proptest::option::of(1u32..=3), proptest::option::weighted(0.4, (1u32..=3, 1u32..=3)))
            .prop_map(|(q, c, r)| Op::Configure(q, c, r)),
        1 => (0u8..4).prop_map(Op::Fire),
        2 => (2u8..=4, 1u32..=2).prop_map(|(workers, limit)| Op::ConcurrentClaims { workers, limit }),
        2 => (proptest::option::of(0..QUEUES.len()), status(), proptest::option::of(pick.clone()), 1u32..=4)
            .prop_map(|(queue, status, before, limit)| Op::ListHistory { queue, status, before, limit }),
        3 => (
            prop_oneof![2 => Just(Selection::List), 1 => Just(Selection::RunNow), 1 => Just(Selection::Discard)],
            proptest::option::of(0..QUEUES.len()),
            proptest::option::weighted(0.4, proptest::sample::select(JobState::ALL.to_vec())),
            proptest::option::weighted(0.3, 0u8..3),
            proptest::option::weighted(0.3, pick.clone()),
            1u32..=4,
        )
            .prop_map(|(action, queue, state, key, before, limit)| Op::Select { action, queue, state, key, before, limit }),
        1 => (proptest::option::of(0..QUEUES.len()), 1u32..=3)
            .prop_map(|(queue, limit)| Op::RetryDeadLetters { queue, limit }),
        1 => (1u32..=10).prop_map(Op::Throughput),
        2 => (1u64..=1500).prop_map(Op::AdvanceMillis),
        1 => (job_spec(), 0u8..3, 2u8..=4).prop_map(|(spec, key, racers)| Op::EnqueueRace {
            spec: JobSpec { key: Some(key), ..spec },
            racers,
        }),
        1 => (0u8..4, 2u8..=4, proptest::bool::weighted(0.2))
            .prop_map(|(minute, racers, invalid)| Op::FireRace { minute, racers, invalid }),
        1 => (0u8..3, 1u32..=3).prop_map(|(w, c)| Op::RegisterWorker(w, c)),
        1 => (0u8..3).prop_map(Op::DeregisterWorker),
        1 => (1u64..=40, 0u64..=60).prop_map(|(s, f)| Op::ListWorkers(s, f)),
        3 => (job_spec(), 0u8..3).prop_map(|(spec, g)| Op::EnqueueGrouped(spec, g)),
        2 => (0..QUEUES.len(), 2u8..=7).prop_map(|(q, n)| Op::EnqueueGroups(q, n)),
        1 => (0..QUEUES.len(), proptest::option::weighted(0.8, 1u32..=2))
            .prop_map(|(q, limit)| Op::ConfigureGroups(q, limit)),
        1 => (0..QUEUES.len(), 0u8..3, proptest::option::weighted(0.7, 1u32..=2))
            .prop_map(|(q, g, limit)| Op::SetGroupLimit(q, g, limit)),
        1 => (0..QUEUES.len(), proptest::option::weighted(0.8, 1u64..=4))
            .prop_map(|(q, period)| Op::ConfigureAging(q, period)),
        4 => (0..QUEUES.len(), proptest::bool::weighted(0.9), proptest::option::weighted(0.5, 2u32..=3))
            .prop_map(|(q, fair, weight)| Op::ConfigureFair(q, fair, weight)),
        1 => (0..QUEUES.len(), 0u8..3, proptest::option::weighted(0.9, prop_oneof![9 => 2u32..=3, 1 => Just(0u32)]))
            .prop_map(|(q, g, weight)| Op::SetGroupWeight(q, g, weight)),
        3 => (job_spec(), proptest::collection::vec(pick.clone(), 1..3), proptest::bool::weighted(0.3))
            .prop_map(|(spec, on, run)| Op::EnqueueDependent(spec, on, run)),
        2 => proptest::collection::vec((job_spec(), proptest::collection::vec(0u8..4, 0..3)), 1..5)
            .prop_map(Op::EnqueueGraph),
        2 => proptest::collection::vec(job_spec(), 1..4).prop_map(Op::EnqueueCallbackBatch),
        2 => (job_spec(), pick.clone()).prop_map(|(spec, on)| Op::JoinBatch(spec, on)),
    ]
}

/// The limits a configure op sets.
pub(super) fn limits(concurrency: Option<u32>, rate: Option<(u32, u32)>) -> QueueLimits {
    QueueLimits {
        concurrency,
        rate: rate.map(|(per_second, burst)| RateLimit {
            per_second: f64::from(per_second),
            burst,
        }),
        ..QueueLimits::default()
    }
}

/// What worker `r{n}` registers, with `concurrency` on queue a.
pub(super) fn worker_info(n: u8, concurrency: u32) -> queue_core::WorkerInfo {
    queue_core::WorkerInfo {
        id: queue_core::WorkerId::new(format!("r{n}")).expect("model worker ids"),
        host: "model-host".into(),
        pid: u32::from(n) + 100,
        version: "0.1.0".into(),
        queues: vec![queue_core::WorkerQueue {
            queue: queue_core::QueueName::new(QUEUES[0]).expect("model queue names"),
            concurrency,
        }],
        started_at: crate::suite::start(),
    }
}

/// The samples a throughput op (`Op::Throughput(minutes)`) also records
/// at `now` before it reads them back: derived from the op's argument, so
/// the op generator stays as it is. A lag in queue `minutes % 2`, in this
/// minute or the `minutes % 3` before it, and a depth every other time:
/// sequences record several times into one queue and minute (lags must add
/// up, the latest depth must win) and read windows that leave older
/// minutes out.
pub(super) fn throughput_samples(
    minutes: u32,
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<queue_core::QueueSample> {
    let queue =
        queue_core::QueueName::new(QUEUES[minutes as usize % 2]).expect("model queue names");
    let minute = queue_core::minute_of(now) - chrono::TimeDelta::minutes(i64::from(minutes % 3));
    let mut sample = queue_core::QueueSample::new(queue, minute);
    sample
        .lag
        .record(Duration::from_millis(u64::from(minutes) * 7));
    if minutes.is_multiple_of(2) {
        sample.depth = Some(queue_core::Depth {
            pending: u64::from(minutes),
            scheduled: 1,
            running: u64::from(minutes / 2),
        });
    }
    vec![sample]
}

/// The `Retry` a nack op asks for.
pub(super) fn retry(delay: Option<u64>) -> Retry {
    delay.map_or(Retry::Never, |s| Retry::After(Duration::from_secs(s)))
}
