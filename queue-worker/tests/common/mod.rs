//! Scenarios the worker runs on every backend.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use queue_core::{FinalStatus, HistoryFilter, HistoryRecord, MAX_PAGE_SIZE, NewJob, Storage};
use queue_worker::{JobContext, QueueOptions, WorkerBuilder, WorkerOptions};
use serde_json::json;

pub(crate) const QUEUES: [(&str, usize); 3] = [("alpha", 11), ("beta", 11), ("gamma", 10)];

/// Every history row, by walking the pages.
pub(crate) async fn all_history<S: Storage>(storage: &S) -> Vec<HistoryRecord> {
    let mut filter = HistoryFilter {
        limit: MAX_PAGE_SIZE,
        ..HistoryFilter::default()
    };
    let mut out = Vec::new();
    loop {
        let page = storage.list_history(&filter).await.expect("list_history");
        out.extend(page.records);
        match page.next {
            Some(next) => filter.before = Some(next),
            None => return out,
        }
    }
}

pub(crate) async fn live<S: Storage>(storage: &S) -> u64 {
    storage
        .stats()
        .await
        .expect("stats")
        .iter()
        .map(|s| s.live())
        .sum()
}

/// 5,000 jobs over 3 queues and 5 priorities, total concurrency 32: every
/// job completes exactly once, and within a queue no job starts before a
/// job that comes ahead of it in dequeue order.
pub(crate) async fn five_thousand_jobs_complete_exactly_once_in_priority_order<S: Storage>(
    storage: Arc<S>,
) {
    const JOBS: usize = 5_000;
    for chunk in (0..JOBS).collect::<Vec<_>>().chunks(1_000) {
        let batch = chunk
            .iter()
            .map(|i| NewJob::new(QUEUES[i % 3].0, json!({ "i": i })).priority((i % 5) as i32))
            .collect();
        storage.enqueue_batch(batch).await.expect("enqueue_batch");
    }
    let mut builder = WorkerBuilder::from_arc(Arc::clone(&storage)).options(WorkerOptions {
        poll_interval: Duration::from_millis(50),
        ..WorkerOptions::default()
    });
    for (queue, concurrency) in QUEUES {
        builder = builder
            .queue(
                queue,
                QueueOptions::with_concurrency(concurrency),
                |ctx: JobContext| async move { Ok(Some(ctx.payload()["i"].clone())) },
            )
            .expect("queue");
    }
    let worker = builder.start().expect("start");
    let until = Instant::now() + Duration::from_secs(300);
    while live(&*storage).await > 0 {
        assert!(Instant::now() < until, "jobs left after 5 minutes");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    worker.shutdown(Duration::from_secs(10)).await;

    let records = all_history(&*storage).await;
    assert_eq!(records.len(), JOBS);
    let ids: HashSet<_> = records.iter().map(|r| r.id).collect();
    assert_eq!(ids.len(), JOBS, "a job archived twice");
    for record in &records {
        assert_eq!(
            (record.status, record.attempts),
            (FinalStatus::Completed, 1),
            "{record:?}"
        );
        assert_eq!(record.result.as_ref(), Some(&record.payload["i"]));
    }
    let mut by_queue: HashMap<String, Vec<&HistoryRecord>> = HashMap::new();
    for record in &records {
        by_queue
            .entry(record.queue.to_string())
            .or_default()
            .push(record);
    }
    for (queue, mut jobs) in by_queue {
        jobs.sort_by(|a, b| {
            (b.priority, a.created_at, a.id).cmp(&(a.priority, b.created_at, b.id))
        });
        for pair in jobs.windows(2) {
            assert!(
                pair[0].started_at <= pair[1].started_at,
                "{queue}: job {} (priority {}, created {}) started at {:?}, after job {} \
                 (priority {}, created {}) at {:?}",
                pair[0].id,
                pair[0].priority,
                pair[0].created_at,
                pair[0].started_at,
                pair[1].id,
                pair[1].priority,
                pair[1].created_at,
                pair[1].started_at,
            );
        }
    }
}

/// A run whose lease is lost (the storage's clock jumps past it, so the
/// heartbeat is refused) has its token fired and its late result dropped.
/// `storage` must read `clock`.
pub(crate) async fn lost_lease_fires_the_token_and_drops_the_result<S: Storage>(
    storage: Arc<S>,
    clock: queue_core::ManualClock,
) {
    let worker = WorkerBuilder::from_arc(Arc::clone(&storage))
        .options(WorkerOptions {
            poll_interval: Duration::from_millis(20),
            reclaim_interval: Duration::from_secs(3600),
            ..WorkerOptions::default()
        })
        .queue(
            "lease",
            QueueOptions {
                lease: Duration::from_millis(300),
                ..QueueOptions::with_concurrency(1)
            },
            |ctx: JobContext| async move {
                tokio::select! {
                    () = ctx.cancellation().cancelled() => {}
                    () = tokio::time::sleep(Duration::from_secs(20)) => {}
                }
                Ok(Some(json!("late result")))
            },
        )
        .expect("queue")
        .start()
        .expect("start");
    let id = worker
        .enqueue(NewJob::new("lease", json!(1)))
        .await
        .expect("enqueue")
        .id;
    let until = Instant::now() + Duration::from_secs(20);
    while worker.running() == 0 {
        assert!(Instant::now() < until, "never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    clock.advance(Duration::from_secs(3600));
    let cut = Instant::now();
    while worker.running() > 0 {
        assert!(
            cut.elapsed() < Duration::from_secs(10),
            "the token was not fired"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    worker.shutdown(Duration::from_secs(5)).await;
    assert_eq!(
        storage.get_history(id).await.expect("history"),
        None,
        "late result applied"
    );
    let job = storage.get_job(id).await.expect("job").expect("still live");
    assert_eq!(
        job.state(clock.now()),
        queue_core::JobState::Stalled,
        "left for reclaim"
    );
}

/// Sets its flag when dropped: shows that a handler's task was stopped.
struct SetOnDrop(Arc<std::sync::atomic::AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Shutdown lets a quick run finish and be acked, then fires the token of
/// a run that ignores it, releases that lease without counting the attempt
/// and stops its task.
pub(crate) async fn shutdown_acks_the_finished_and_releases_the_stuck<S: Storage>(storage: Arc<S>) {
    let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&stopped);
    let worker = WorkerBuilder::from_arc(Arc::clone(&storage))
        .options(WorkerOptions {
            poll_interval: Duration::from_millis(20),
            ..WorkerOptions::default()
        })
        .queue(
            "quick",
            QueueOptions::with_concurrency(1),
            |_ctx: JobContext| async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(Some(json!("finished in time")))
            },
        )
        .expect("queue")
        .queue(
            "stuck",
            QueueOptions::with_concurrency(1),
            move |_ctx: JobContext| {
                // Ignores its token; dropping its task sets the flag.
                let guard = SetOnDrop(Arc::clone(&flag));
                async move {
                    let _guard = guard;
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    Ok(None)
                }
            },
        )
        .expect("queue")
        .start()
        .expect("start");
    let quick = worker
        .enqueue(NewJob::new("quick", json!(1)))
        .await
        .expect("enqueue")
        .id;
    let stuck = worker
        .enqueue(NewJob::new("stuck", json!(1)).max_attempts(1))
        .await
        .expect("enqueue")
        .id;
    let until = Instant::now() + Duration::from_secs(20);
    while worker.running() < 2 {
        assert!(Instant::now() < until, "never both running");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let report = worker.shutdown(Duration::from_millis(500)).await;
    assert_eq!((report.cancelled, report.released), (1, 1));
    let record = storage
        .get_history(quick)
        .await
        .expect("history")
        .expect("acked before stopping");
    assert_eq!(record.result, Some(json!("finished in time")));
    let job = storage
        .get_job(stuck)
        .await
        .expect("job")
        .expect("released, not finished");
    assert_eq!(
        (job.attempts, job.lease_until),
        (0, None),
        "its only attempt is given back"
    );
    let until = Instant::now() + Duration::from_secs(5);
    while !stopped.load(std::sync::atomic::Ordering::SeqCst) {
        assert!(
            Instant::now() < until,
            "the stuck handler's task still runs after shutdown"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Runs `handler` on a job asking it to commit and one asking it to roll
/// back; the handler completes the first itself (`ack_in` with "by the
/// handler", then `mark_completed`) and fails the second without retry.
/// Checks both outcomes in history and returns (committed, rolled back).
pub(crate) async fn handler_side_completion<S, H>(
    storage: Arc<S>,
    handler: H,
) -> (queue_core::JobId, queue_core::JobId)
where
    S: Storage,
    H: queue_worker::Handler,
{
    let worker = WorkerBuilder::from_arc(Arc::clone(&storage))
        .queue("tx", QueueOptions::with_concurrency(2), handler)
        .expect("queue")
        .start()
        .expect("start");
    let committed = worker
        .enqueue(NewJob::new("tx", json!({"commit": true})))
        .await
        .expect("enqueue")
        .id;
    let rolled_back = worker
        .enqueue(NewJob::new("tx", json!({"commit": false})))
        .await
        .expect("enqueue")
        .id;
    let until = Instant::now() + Duration::from_secs(20);
    while live(&*storage).await > 0 {
        assert!(Instant::now() < until, "jobs still live");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    worker.shutdown(Duration::from_secs(5)).await;
    let done = storage
        .get_history(committed)
        .await
        .expect("history")
        .expect("archived");
    assert_eq!(
        (done.status, done.result),
        (FinalStatus::Completed, Some(json!("by the handler"))),
        "completed once, by the handler"
    );
    let failed = storage
        .get_history(rolled_back)
        .await
        .expect("history")
        .expect("archived");
    assert_eq!(failed.status, FinalStatus::DeadLetter);
    (committed, rolled_back)
}

/// Delayed jobs start within milliseconds of their time although the
/// worker polls only every 30 s: an idle worker sleeps until the next
/// scheduled job is due (`Storage::next_due`). Without it, the idle
/// back-off (10 ms doubling) would start the 700 ms job at about 1.27 s
/// and the 2 s one at about 2.55 s: 550 ms late or more, against the 450 ms
/// allowed here for a loaded machine (about 3 ms is typical; 322 ms was
/// seen with two builds and a model test on the machine's two cores).
pub(crate) async fn delayed_jobs_start_on_time_without_polling<S: Storage>(storage: Arc<S>) {
    let delays_ms = [300u64, 700, 1300, 2000];
    for (i, delay) in delays_ms.iter().enumerate() {
        storage
            .enqueue(NewJob::new("timed", json!({ "i": i })).delay(Duration::from_millis(*delay)))
            .await
            .expect("enqueue");
    }
    let lags = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = Arc::clone(&lags);
    let worker = WorkerBuilder::from_arc(Arc::clone(&storage))
        .options(WorkerOptions {
            poll_interval: Duration::from_secs(30),
            ..WorkerOptions::default()
        })
        .queue(
            "timed",
            QueueOptions::with_concurrency(4),
            move |ctx: JobContext| {
                let lag = chrono::Utc::now() - ctx.job().available_at;
                record.lock().expect("lags").push(lag);
                async { Ok(None) }
            },
        )
        .expect("queue")
        .start()
        .expect("start");
    let until = Instant::now() + Duration::from_secs(10);
    while lags.lock().expect("lags").len() < delays_ms.len() {
        assert!(Instant::now() < until, "delayed jobs did not all start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    worker.shutdown(Duration::from_secs(5)).await;
    let all: Vec<i64> = lags
        .lock()
        .expect("lags")
        .iter()
        .map(|l| l.num_milliseconds())
        .collect();
    for &ms in &all {
        assert!(
            (0..450).contains(&ms),
            "a delayed job started {ms} ms after its time (all: {all:?})"
        );
    }
}

/// A running worker is in the storage's registry with its host, process
/// id, version and queues, live; after a clean shutdown it is not.
pub(crate) async fn a_running_worker_is_listed_and_gone_after_shutdown<S: Storage>(
    storage: Arc<S>,
) {
    let idle = |_ctx: JobContext| async { Ok(None) };
    let worker = WorkerBuilder::from_arc(Arc::clone(&storage))
        .queue("emails", QueueOptions::with_concurrency(3), idle)
        .expect("queue")
        .queue("reports", QueueOptions::with_concurrency(1), idle)
        .expect("queue")
        .start()
        .expect("start");
    let id = worker.worker_id().clone();
    let ages = (Duration::from_secs(60), Duration::from_secs(600));
    let until = Instant::now() + Duration::from_secs(20);
    let record = loop {
        let listed = storage
            .list_workers(ages.0, ages.1)
            .await
            .expect("list_workers");
        if let Some(record) = listed.into_iter().find(|r| r.info.id == id) {
            break record;
        }
        assert!(Instant::now() < until, "the worker never registered");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(record.status, queue_core::WorkerStatus::Live);
    assert_eq!(record.info.pid, std::process::id());
    assert_eq!(record.info.version, env!("CARGO_PKG_VERSION"));
    assert!(!record.info.host.is_empty());
    let queues: Vec<(String, u32)> = (record.info.queues.iter())
        .map(|q| (q.queue.to_string(), q.concurrency))
        .collect();
    assert_eq!(
        queues,
        [("emails".to_owned(), 3), ("reports".to_owned(), 1)]
    );
    worker.shutdown(Duration::from_secs(5)).await;
    let listed = storage
        .list_workers(ages.0, ages.1)
        .await
        .expect("list_workers");
    assert!(
        listed.iter().all(|r| r.info.id != id),
        "the worker is still registered after a clean shutdown: {listed:?}"
    );
}

/// A worker on `storage` that polls once a minute starts, three times over,
/// a job that `producer` (another process's storage) enqueues after the
/// worker has idled for seconds, within 300 ms: woken, not polled.
pub(crate) async fn a_worker_wakes_on_another_producers_enqueue<S, P>(storage: S, producer: &P)
where
    S: Storage + Clone + 'static,
    P: Storage,
{
    let (started, mut starts) = tokio::sync::mpsc::unbounded_channel();
    let worker = WorkerBuilder::new(storage)
        .options(WorkerOptions {
            poll_interval: Duration::from_secs(60),
            ..WorkerOptions::default()
        })
        .queue(
            "wake",
            QueueOptions::with_concurrency(1),
            move |_ctx: JobContext| {
                let _ = started.send(Instant::now());
                async { Ok(None) }
            },
        )
        .expect("queue")
        .start()
        .expect("start");
    for round in 0..3 {
        // Idle long enough for the back-off to wait seconds between looks.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let sent = Instant::now();
        producer
            .enqueue(NewJob::new("wake", json!(round)))
            .await
            .expect("enqueue");
        let start = tokio::time::timeout(Duration::from_secs(10), starts.recv())
            .await
            .expect("the job starts")
            .expect("a start");
        let lag = start.duration_since(sent);
        assert!(
            lag < Duration::from_millis(300),
            "round {round}: started {lag:?} after the enqueue; polling alone waits seconds"
        );
    }
    worker.shutdown(Duration::from_secs(5)).await;
}
