//! A node of the three-node Galera cluster (scripts/galera.sh) killed and
//! rejoined under load. A binary of its own, so that it runs after
//! galera.rs's conformance suite rather than beside it: the rejoin's state
//! transfer blocks its donor node, and the suite's cases on that node
//! (each creating and dropping a database, DDL that Galera replicates in
//! total order) failed with lock wait timeouts and "not connected to
//! Primary Component" when they ran during the kill, and the kill test's
//! producers with them (a CI rehearsal, 2026-11-29). Run after the suite
//! on the same nodes it still failed (lock wait timeouts while node 3
//! rejoined), and passed on a fresh cluster: so it restarts the cluster
//! first.

mod common;

use common::GaleraFactory;
use queue_core::Clock;
use queue_testkit::suite::StorageFactory;

/// How often an enqueue or ack that failed having changed nothing is tried
/// again, a pause apart: 30 s at most, inside the run's two minutes. While
/// node 3 rejoins, the others can answer lock waits and lost
/// certifications for several seconds in a row (a CI rehearsal used up 20
/// tries without a pause).
const PATIENCE: u32 = 300;
const RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

/// Runs `scripts/galera.sh` with `args`: the kill-and-rejoin test needs
/// the local cluster that script runs (the default URLs), not any cluster
/// `QUEUE_TEST_GALERA_URLS` may name.
async fn galera_script(args: &'static [&'static str]) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/galera.sh");
    let status = tokio::task::spawn_blocking(move || {
        std::process::Command::new("bash")
            .arg(script)
            .args(args)
            .status()
    })
    .await
    .expect("the script's task")
    .unwrap_or_else(|e| panic!("scripts/galera.sh {args:?}: {e}"));
    assert!(status.success(), "scripts/galera.sh {args:?}: {status}");
}

/// Jobs enqueued and claimed through nodes 1 and 2 while node 3 is killed
/// and rejoined (`scripts/galera.sh`), the ready ring rotated through node
/// 1 every 10 ms: every job is claimed and acknowledged exactly once,
/// within two minutes, every acknowledgement finding its lease. (An
/// enqueue, claim, ack or rotation that loses certification more often
/// than the storage retries fails having changed nothing, and is tried
/// again, as an application would.) With the ring's `LOCK TABLES` and
/// `TRUNCATE` on Galera it failed in both of two runs: node 3's rejoin
/// did not complete in 60 s (node 1 stuck as its donor), and the
/// producers stalled at 1,405 of 3,000 jobs, node 1 then answering every
/// read with a lock wait timeout, a rotation's statement "waiting for
/// certification", until the cluster was restarted
/// (docs/high-availability.md, "MariaDB Galera").
#[tokio::test]
async fn a_node_killed_and_rejoined_under_rotations_loses_nothing_and_hangs_nothing() {
    use std::collections::HashSet;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Duration;

    use queue_core::{Ack, DequeueRequest, NewJob, QueueName, Storage, WorkerId};
    use tokio::sync::Mutex;

    const PER_PRODUCER: usize = 1_500;

    // A cluster fresh from `scripts/galera.sh start`: run right after
    // galera.rs's suite on the same nodes, the test failed here
    // (2026-11-29: producers and acks timing out on locks while node 3
    // rejoined), and passed on a fresh cluster.
    galera_script(&["stop"]).await;
    galera_script(&["start"]).await;
    let fixture = GaleraFactory.create(Clock::Database).await;
    let mut fixture = fixture;
    let second = fixture.take_second_handle().expect("a second handle").await;
    let (first, teardown) = fixture.into_parts();
    let nodes = [first, second];
    let running = Arc::new(AtomicBool::new(true));
    let acked: Arc<Mutex<Vec<i64>>> = Arc::default();
    let enqueued = Arc::new(AtomicUsize::new(0));

    let run = async {
        let mut producers = Vec::new();
        for (n, storage) in nodes.iter().enumerate() {
            let storage = storage.clone();
            let enqueued = enqueued.clone();
            producers.push(tokio::spawn(async move {
                let mut ids = Vec::new();
                for i in 0..PER_PRODUCER {
                    // A certification conflict that outlasts the
                    // storage's retries fails the enqueue, and nothing of
                    // it is committed: the producer tries again, as an
                    // application would. (A failed enqueue that did commit
                    // would show as a job acknowledged but not enqueued.)
                    let mut tries = 0;
                    let outcome = loop {
                        match storage
                            .enqueue(NewJob::new("ring", serde_json::json!([n, i])))
                            .await
                        {
                            Ok(outcome) => break outcome,
                            Err(error) if tries < PATIENCE => {
                                eprintln!("enqueue {n}/{i} failed, tried again: {error}");
                                tries += 1;
                                tokio::time::sleep(RETRY_PAUSE).await;
                            }
                            Err(error) => panic!("enqueue {n}/{i}: {error}"),
                        }
                    };
                    ids.push(outcome.id.get());
                    enqueued.fetch_add(1, Ordering::Relaxed);
                    if i % 50 == 0 {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
                ids
            }));
        }
        let mut background = Vec::new();
        for (n, storage) in nodes.iter().enumerate() {
            for w in 0..2 {
                let storage = storage.clone();
                let acked = acked.clone();
                let running = running.clone();
                background.push(tokio::spawn(async move {
                    let request = DequeueRequest::new(
                        vec![QueueName::new("ring").expect("valid")],
                        10,
                        Duration::from_secs(600),
                        WorkerId::new(format!("w{n}-{w}")).expect("valid"),
                    )
                    .expect("valid request");
                    while running.load(Ordering::Relaxed) {
                        // A claim that loses certification more often
                        // than the storage retries fails, having leased
                        // nothing: a worker claims again.
                        let jobs = match storage.dequeue(&request).await {
                            Ok(jobs) => jobs,
                            Err(error) => {
                                eprintln!("claim failed, tried again: {error}");
                                continue;
                            }
                        };
                        if jobs.is_empty() {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        }
                        let acks: Vec<Ack> = jobs
                            .iter()
                            .map(|job| Ack {
                                lease: job.lease().expect("claimed"),
                                result: None,
                            })
                            .collect();
                        // An ack that loses certification more often than
                        // the storage retries fails having changed nothing,
                        // so trying it again must find every lease current.
                        let mut tries = 0;
                        let done = loop {
                            match storage.ack_batch(&acks).await {
                                Ok(done) => break done,
                                Err(error) if tries < PATIENCE => {
                                    eprintln!("ack failed, tried again: {error}");
                                    tries += 1;
                                    tokio::time::sleep(RETRY_PAUSE).await;
                                }
                                Err(error) => panic!("ack: {error}"),
                            }
                        };
                        assert!(done.iter().all(|d| *d), "an ack of a fresh lease failed");
                        acked
                            .lock()
                            .await
                            .extend(jobs.iter().map(|job| job.id.get()));
                    }
                }));
            }
        }
        // Rotations through node 1, as often as they can: a failed one
        // (a lost certification) is tried again, as claims do.
        let rotator = nodes[0].clone();
        let rotating = running.clone();
        background.push(tokio::spawn(async move {
            while rotating.load(Ordering::Relaxed) {
                if let Err(error) = rotator.rotate_ready_ring_now().await {
                    eprintln!("rotation failed, tried again: {error}");
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }));
        tokio::time::sleep(Duration::from_secs(1)).await;
        galera_script(&["kill", "3"]).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        galera_script(&["rejoin", "3"]).await;
        let mut ids = Vec::new();
        for producer in producers {
            ids.extend(producer.await.expect("producer"));
        }
        while acked.lock().await.len() < ids.len() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        running.store(false, Ordering::Relaxed);
        for task in background {
            task.await.expect("worker or rotation");
        }
        ids
    };
    let Ok(enqueued) = tokio::time::timeout(Duration::from_secs(120), run).await else {
        panic!(
            "not done in two minutes (the cluster hung, or jobs were lost): {} enqueued, {} acknowledged",
            enqueued.load(Ordering::Relaxed),
            acked.lock().await.len()
        );
    };

    let acked = acked.lock().await.clone();
    let unique: HashSet<i64> = acked.iter().copied().collect();
    assert_eq!(unique.len(), acked.len(), "a job acknowledged twice");
    let expected: HashSet<i64> = enqueued.iter().copied().collect();
    assert_eq!(expected.len(), enqueued.len(), "an id enqueued twice");
    let missing: Vec<_> = expected.difference(&unique).take(10).collect();
    assert!(missing.is_empty(), "jobs never claimed, e.g. {missing:?}");
    assert_eq!(unique, expected, "jobs claimed that were not enqueued");
    let stats = nodes[1].stats().await.expect("stats through node 2");
    assert!(
        stats
            .iter()
            .all(|s| s.pending + s.running + s.scheduled == 0),
        "jobs left: {stats:?}"
    );
    drop(nodes);
    if let Some(teardown) = teardown {
        teardown.await;
    }
}
