//! Durability: with `appendonly yes` and `appendfsync always`, a server
//! killed (SIGKILL, like a crash) and restarted in the middle of a run
//! loses no acknowledged enqueue and completes no job twice.

#[path = "common/server.rs"]
mod server;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queue_core::{Ack, DequeueRequest, FinalStatus, JobId, NewJob, QueueName, Storage, WorkerId};
use queue_redis::RedisStorage;
use serde_json::json;
use server::Server;

const JOBS: usize = 1_000;
const LEASE: Duration = Duration::from_secs(2);
const PAUSE: Duration = Duration::from_millis(20);

fn request() -> DequeueRequest {
    DequeueRequest::new(
        vec![QueueName::new("durable").expect("valid")],
        10,
        LEASE,
        WorkerId::new("consumer").expect("valid"),
    )
    .expect("valid request")
}

/// Enqueues job `n` until the server acknowledges it (a unique key per
/// job: a retry after a lost reply finds the first write, never a second
/// job); returns its id.
async fn enqueue_until_acknowledged(storage: &RedisStorage, n: usize) -> JobId {
    loop {
        let job = NewJob::new("durable", json!({"n": n})).unique_key(format!("job-{n}"));
        match storage.enqueue(job).await {
            Ok(outcome) => return outcome.id,
            Err(_) => tokio::time::sleep(PAUSE).await,
        }
    }
}

/// Claims and acks until told to stop; records every ack the server
/// confirmed. Reclaims leases lost in the crash.
async fn consume(storage: RedisStorage, acked: Arc<Mutex<Vec<JobId>>>, stop: Arc<Mutex<bool>>) {
    while !*stop.lock().expect("stop flag") {
        let _ = storage.reclaim_stalled(100).await;
        let jobs = match storage.dequeue(&request()).await {
            Ok(jobs) => jobs,
            Err(_) => {
                tokio::time::sleep(PAUSE).await;
                continue;
            }
        };
        if jobs.is_empty() {
            tokio::time::sleep(PAUSE).await;
            continue;
        }
        let acks: Vec<Ack> = jobs
            .iter()
            .map(|job| Ack {
                lease: job.lease().expect("claimed"),
                result: Some(json!("done")),
            })
            .collect();
        if let Ok(done) = storage.ack_batch(&acks).await {
            let mut acked = acked.lock().expect("acked");
            for (ack, ok) in acks.iter().zip(done) {
                if ok {
                    acked.push(ack.lease.job_id);
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_with_aof_always_loses_no_acknowledged_enqueue_and_completes_no_job_twice() {
    let mut server = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let storage = RedisStorage::connect(&server.url(""))
        .await
        .expect("connect");
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(Mutex::new(false));
    let consumer = tokio::spawn(consume(storage.clone(), acked.clone(), stop.clone()));

    let mut enqueued = Vec::with_capacity(JOBS);
    for n in 0..JOBS {
        if n == JOBS / 2 {
            server.kill();
            tokio::time::sleep(Duration::from_millis(200)).await;
            server.restart();
        }
        enqueued.push(enqueue_until_acknowledged(&storage, n).await);
    }

    // Done when every acknowledged enqueue is completed in history (an ack
    // the server applied may have lost its reply in the crash: the server's
    // history, not the consumer's record, is the truth).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut waiting: Vec<JobId> = enqueued.clone();
    while !waiting.is_empty() {
        let mut still = Vec::new();
        for id in waiting {
            match storage.get_history(id).await {
                Ok(Some(record)) => {
                    assert_eq!(record.status, FinalStatus::Completed, "job {id}")
                }
                _ => still.push(id),
            }
        }
        waiting = still;
        assert!(
            Instant::now() < deadline,
            "{} of {JOBS} acknowledged jobs not completed after 60 s",
            waiting.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    *stop.lock().expect("stop flag") = true;
    consumer.await.expect("consumer");

    let acked = acked.lock().expect("acked").clone();
    let distinct: HashSet<JobId> = acked.iter().copied().collect();
    assert_eq!(distinct.len(), acked.len(), "a job was completed twice");
    let enqueued: HashSet<JobId> = enqueued.into_iter().collect();
    assert!(
        distinct.is_subset(&enqueued),
        "an ack completed a job nobody enqueued"
    );
    assert!(
        // At most one ack batch (10 jobs) was in flight at the crash.
        acked.len() + 10 >= JOBS,
        "only {} of {JOBS} acks were confirmed",
        acked.len()
    );
}
