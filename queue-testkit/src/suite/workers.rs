//! The worker registry: what a worker registers reads back, its heartbeat
//! keeps it live, it goes silent when the heartbeats stop and is forgotten
//! later, and a clean exit deregisters it.

use chrono::{DateTime, TimeDelta, Utc};
use queue_core::{Storage, WorkerInfo, WorkerQueue, WorkerRecord, WorkerStatus};

use super::{Ctx, assert_invalid, queue, secs, worker};

/// The ages every case lists with unless it says otherwise: silent after
/// 30 s, forgotten after 5 min.
const SILENT: u64 = 30;
const FORGET: u64 = 300;

/// A worker `id` on `host` consuming `queues` (name, concurrency),
/// started a little before `now` (with nanoseconds a backend must cut).
pub fn worker_info(id: &str, host: &str, queues: &[(&str, u32)], now: DateTime<Utc>) -> WorkerInfo {
    WorkerInfo {
        id: worker(id),
        host: host.into(),
        pid: 4242,
        version: "0.1.0".into(),
        queues: (queues.iter())
            .map(|(name, concurrency)| WorkerQueue {
                queue: queue(name),
                concurrency: *concurrency,
            })
            .collect(),
        started_at: now - TimeDelta::nanoseconds(90_000_000_789),
    }
}

impl<S: Storage> Ctx<S> {
    /// Registers `info`, which must be valid.
    pub async fn register(&self, info: &WorkerInfo) {
        (self.storage.register_worker(info).await).expect("register_worker");
    }

    /// The registry, silent after 30 s, forgotten after 5 min.
    pub async fn workers(&self) -> Vec<WorkerRecord> {
        (self.storage.list_workers(secs(SILENT), secs(FORGET)).await).expect("list_workers")
    }
}

/// `info` as a listing should answer it: `started_at` to the microsecond.
fn stored(info: &WorkerInfo) -> WorkerInfo {
    info.validate().expect("a valid worker")
}

/// Registered workers are listed by id with exactly what they registered,
/// seen now and live.
pub async fn register_worker_lists_what_was_registered<S: Storage>(ctx: Ctx<S>) {
    let now = ctx.now();
    let b = worker_info("w-b", "host-1", &[("emails", 4), ("reports", 1)], now);
    let a = worker_info("w-a", "hôte-2", &[("q\"uoted", 100_000)], now);
    ctx.register(&b).await;
    ctx.register(&a).await;
    let listed = ctx.workers().await;
    let expected: Vec<WorkerRecord> = [&a, &b]
        .iter()
        .map(|info| WorkerRecord {
            info: stored(info),
            last_seen: now,
            status: WorkerStatus::Live,
        })
        .collect();
    assert_eq!(listed, expected);
}

/// Registering an id again replaces its whole record and moves its
/// `last_seen` to now: the heartbeat that keeps a worker live.
pub async fn registering_again_replaces_the_record_and_moves_last_seen<S: Storage>(ctx: Ctx<S>) {
    let first = worker_info("w", "host", &[("a", 1)], ctx.now());
    ctx.register(&first).await;
    ctx.clock.advance(secs(20));
    let again = WorkerInfo {
        version: "0.2.0".into(),
        queues: vec![WorkerQueue {
            queue: queue("b"),
            concurrency: 8,
        }],
        ..first.clone()
    };
    ctx.register(&again).await;
    let heartbeat_at = ctx.now();
    ctx.clock.advance(secs(20));
    let listed = ctx.workers().await;
    assert_eq!(
        listed,
        vec![WorkerRecord {
            info: stored(&again),
            last_seen: heartbeat_at,
            status: WorkerStatus::Live,
        }],
        "40 s after it registered and 20 s after its heartbeat the worker is live, as re-registered"
    );
}

/// Deregistering removes that worker alone and says whether it was there.
pub async fn deregister_removes_only_that_worker<S: Storage>(ctx: Ctx<S>) {
    let now = ctx.now();
    ctx.register(&worker_info("a", "h", &[("q", 1)], now)).await;
    ctx.register(&worker_info("b", "h", &[("q", 1)], now)).await;
    let removed = ctx.storage.deregister_worker(&worker("a")).await;
    assert!(removed.expect("deregister_worker"), "a was registered");
    let ids: Vec<String> = (ctx.workers().await.into_iter())
        .map(|record| record.info.id.into_string())
        .collect();
    assert_eq!(ids, ["b"]);
    let again = ctx.storage.deregister_worker(&worker("a")).await;
    assert!(!again.expect("deregister_worker"), "a was already gone");
}

/// A worker is live until `silent_after` passes without a heartbeat,
/// silent until `forget_after` passes, and then deleted: a later listing
/// with a longer `forget_after` does not bring it back.
pub async fn a_quiet_worker_goes_silent_then_is_forgotten<S: Storage>(ctx: Ctx<S>) {
    let seen = ctx.now();
    ctx.register(&worker_info("quiet", "h", &[("q", 1)], seen))
        .await;
    let status = |listed: Vec<WorkerRecord>| {
        listed
            .into_iter()
            .map(|r| (r.status, r.last_seen))
            .collect::<Vec<_>>()
    };
    ctx.clock.advance(secs(SILENT - 1));
    assert_eq!(status(ctx.workers().await), [(WorkerStatus::Live, seen)]);
    ctx.clock.advance(secs(1));
    assert_eq!(status(ctx.workers().await), [(WorkerStatus::Silent, seen)]);
    ctx.clock.advance(secs(FORGET - SILENT - 1));
    let fresh = ctx.now();
    ctx.register(&worker_info("fresh", "h", &[("q", 1)], fresh))
        .await;
    assert_eq!(
        status(ctx.workers().await),
        [(WorkerStatus::Live, fresh), (WorkerStatus::Silent, seen)]
    );
    ctx.clock.advance(secs(1));
    assert_eq!(status(ctx.workers().await), [(WorkerStatus::Live, fresh)]);
    let longer = ctx
        .storage
        .list_workers(secs(SILENT), secs(FORGET * 10))
        .await;
    assert_eq!(
        status(longer.expect("list_workers")),
        [(WorkerStatus::Live, fresh)],
        "a forgotten worker was kept"
    );
}

/// Invalid input is refused naming the field, and writes (or deletes)
/// nothing.
pub async fn worker_registry_with_invalid_input_writes_nothing<S: Storage>(ctx: Ctx<S>) {
    let now = ctx.now();
    let valid = worker_info("w", "h", &[("a", 1), ("b", 2)], now);
    let invalid = [
        (
            WorkerInfo {
                host: String::new(),
                ..valid.clone()
            },
            "host",
        ),
        (
            WorkerInfo {
                host: "x".repeat(192),
                ..valid.clone()
            },
            "host",
        ),
        (
            WorkerInfo {
                version: "1\n".into(),
                ..valid.clone()
            },
            "version",
        ),
        (
            WorkerInfo {
                queues: Vec::new(),
                ..valid.clone()
            },
            "queues",
        ),
        (
            WorkerInfo {
                queues: vec![valid.queues[0].clone(), valid.queues[0].clone()],
                ..valid.clone()
            },
            "queues",
        ),
        (
            WorkerInfo {
                queues: vec![WorkerQueue {
                    queue: queue("a"),
                    concurrency: 0,
                }],
                ..valid.clone()
            },
            "concurrency",
        ),
    ];
    for (info, field) in &invalid {
        assert_invalid(ctx.storage.register_worker(info).await, field);
    }
    assert_eq!(
        ctx.workers().await,
        Vec::new(),
        "a refused registration was written"
    );
    ctx.register(&valid).await;
    let replaced = WorkerInfo {
        host: String::new(),
        ..valid.clone()
    };
    assert_invalid(ctx.storage.register_worker(&replaced).await, "host");
    ctx.clock.advance(secs(FORGET));
    assert_invalid(
        ctx.storage.list_workers(secs(0), secs(1)).await,
        "silent_after",
    );
    assert_invalid(
        ctx.storage.list_workers(secs(2), secs(1)).await,
        "forget_after",
    );
    let kept = (ctx
        .storage
        .list_workers(secs(SILENT), secs(FORGET + 1))
        .await)
        .expect("list_workers");
    assert_eq!(
        kept.into_iter().map(|r| r.info).collect::<Vec<_>>(),
        [stored(&valid)],
        "a refused call replaced or deleted the worker"
    );
}

/// A worker registered through one handle is listed through the other,
/// its heartbeat through the other moves it, and a deregistration through
/// the other removes it: the registry lives in the database, as hosts
/// share it.
pub async fn a_worker_registered_through_one_handle_is_listed_by_another<S: Storage>(ctx: Ctx<S>) {
    let info = worker_info("w", "h", &[("q", 3)], ctx.now());
    ctx.register(&info).await;
    let listed = (ctx.second().list_workers(secs(SILENT), secs(FORGET)).await).expect("list");
    assert_eq!(
        listed.into_iter().map(|r| r.info).collect::<Vec<_>>(),
        [stored(&info)]
    );
    ctx.clock.advance(secs(SILENT));
    (ctx.second().register_worker(&info).await).expect("heartbeat through the other handle");
    let statuses: Vec<_> = (ctx.workers().await.into_iter())
        .map(|r| (r.status, r.last_seen))
        .collect();
    assert_eq!(statuses, [(WorkerStatus::Live, ctx.now())]);
    let removed = ctx.second().deregister_worker(&info.id).await;
    assert!(
        removed.expect("deregister"),
        "the other handle did not find it"
    );
    assert_eq!(ctx.workers().await, Vec::new());
}
