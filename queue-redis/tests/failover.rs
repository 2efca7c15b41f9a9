//! A Redis Cluster of three masters with a replica each
//! (scripts/redis-ha.sh, 127.0.0.1:7011-7016) through the failover of the
//! master that serves the test's queue: the master SIGKILLed, its replica
//! promoted by the cluster itself. Run when `QUEUE_TEST_REDIS_HA=1`
//! (scripts/test.sh sets it); without it the test fails naming the
//! variable. The cases run one after another in one test: each rebuilds
//! the cluster.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use queue_core::{JobId, NewJob, Storage};
use queue_redis::RedisStorage;
use queue_testkit::suite::{acks_of, request};
use serde_json::json;

const URL: &str = "redis+cluster://127.0.0.1:7011,127.0.0.1:7012,127.0.0.1:7013,\
                   127.0.0.1:7014,127.0.0.1:7015,127.0.0.1:7016";

/// The hash tag of queue `q`'s keys: its master serves them all.
const SLOT_KEY: &str = "{q}";

fn redis_ha(args: &[&str]) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/redis-ha.sh");
    let output = Command::new("bash")
        .arg(&script)
        .args(args)
        .output()
        .expect("run scripts/redis-ha.sh");
    assert!(
        output.status.success(),
        "scripts/redis-ha.sh {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// Drops the cluster when the test ends, passed or not.
struct Cluster;

impl Drop for Cluster {
    fn drop(&mut self) {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/redis-ha.sh");
        let _ = Command::new("bash").arg(&script).arg("stop").status();
    }
}

/// A fresh cluster and a storage on it; the ports of the queue's master
/// and of its replica.
/// Waits until `master`'s replica has everything `master` wrote (`WAIT 1`,
/// again while it answers 0: a replica still in its first sync, or slow
/// on a busy machine), within 30 s.
fn replicated(master: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let synced = Command::new("redis-cli")
            .args(["-p", master, "WAIT", "1", "5000"])
            .output()
            .expect("redis-cli");
        if String::from_utf8_lossy(&synced.stdout).trim() == "1" {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the replica of {master} did not acknowledge its writes within 30 s"
        );
    }
}

async fn fresh() -> (RedisStorage, String, String) {
    redis_ha(&["start"]);
    let storage = RedisStorage::connect(URL).await.expect("connect");
    storage.migrate().await.expect("migrate");
    let master = redis_ha(&["master-of", SLOT_KEY]);
    let replica = redis_ha(&["replica-of", &master]);
    assert!(
        !master.is_empty() && !replica.is_empty(),
        "{master} {replica}"
    );
    (storage, master, replica)
}

/// Until `call` succeeds, its errors transient, for 30 s at most.
async fn until_ok<T, F, Fut>(what: &str, mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = queue_core::Result<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match call().await {
            Ok(value) => return value,
            Err(error) => {
                assert!(error.is_transient(), "{what}: {error:?}");
                assert!(Instant::now() < deadline, "{what} within 30 s: {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

async fn live(storage: &RedisStorage) -> u64 {
    let stats = until_ok("stats", || storage.stats()).await;
    stats
        .iter()
        .map(|s| s.pending + s.scheduled + s.running + s.stalled)
        .sum()
}

#[tokio::test]
async fn redis_cluster_behind_a_failover() {
    assert!(
        std::env::var("QUEUE_TEST_REDIS_HA").is_ok_and(|v| v == "1"),
        "set QUEUE_TEST_REDIS_HA=1 to run the failover tests (they create and drop a \
         six-node Redis Cluster on 127.0.0.1:7011-7016 with scripts/redis-ha.sh; \
         scripts/test.sh sets it)"
    );
    let _cluster = Cluster;
    the_storage_follows_a_failover_and_keeps_what_the_replica_had().await;
    an_asynchronous_replica_loses_what_it_had_not_received().await;
    durable_writes_acknowledge_nothing_the_replica_lacks().await;
    durable_writes_refuse_bad_settings().await;
    a_cluster_with_uncovered_slots_is_refused_naming_it().await;
}

/// Writes the replica has (checked with WAIT) survive the master's death;
/// the same storage claims from the promoted replica without a restart.
async fn the_storage_follows_a_failover_and_keeps_what_the_replica_had() {
    let (storage, master, _) = fresh().await;
    let mut ids = Vec::new();
    for n in 0..50 {
        let job = NewJob::new("q", json!({ "n": n })).unique_key(format!("k{n}"));
        ids.push(storage.enqueue(job).await.expect("enqueue").id);
    }
    let claimed = storage
        .dequeue(&request(&["q"], 20, "w"))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 20);
    let acked = storage.ack_batch(&acks_of(&claimed)).await.expect("ack");
    assert!(acked.iter().all(|done| *done));
    replicated(&master);

    let killed = Instant::now();
    redis_ha(&["kill", &master]);
    let one = request(&["q"], 1, "w");
    // A claim answered while the cluster switches over may come back empty
    // (seen once in a busy fresh-clone CI run, the cause not pinned down);
    // the jobs must appear within the same 30 s, and none may be lost
    // (the counts below).
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut empty = 0;
    let first = loop {
        let claimed = until_ok("a claim after the failover", || storage.dequeue(&one)).await;
        if !claimed.is_empty() || Instant::now() >= deadline {
            break claimed;
        }
        empty += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!(
        "redis failover: first claim on the promoted replica {} ms after the kill ({empty} empty answers before it)",
        killed.elapsed().as_millis()
    );
    assert_eq!(first.len(), 1, "the promoted replica lost the live jobs");
    assert_eq!(live(&storage).await, 30);
    for job in &claimed {
        assert!(storage.get_job(job.id).await.expect("read").is_none());
    }
    let again = storage
        .enqueue(NewJob::new("q", json!({ "n": 49 })).unique_key("k49"))
        .await
        .expect("enqueue");
    assert!(again.existed && again.id == ids[49], "{again:?}");
}

/// With the replica stalled (SIGSTOP, its link cut) the master goes on
/// acknowledging:
/// when it dies, what the replica had not received is gone. Enqueues
/// acknowledged in that window are lost and jobs acked in it come back.
async fn an_asynchronous_replica_loses_what_it_had_not_received() {
    let (storage, master, replica) = fresh().await;
    let claimed = {
        for n in 0..10 {
            storage
                .enqueue(NewJob::new("q", json!({ "n": n })))
                .await
                .expect("enqueue");
        }
        storage
            .dequeue(&request(&["q"], 10, "w"))
            .await
            .expect("claim")
    };
    replicated(&master);
    redis_ha(&["stall", &replica]);
    let mut lost: Vec<JobId> = Vec::new();
    for n in 0..40 {
        let job = NewJob::new("q", json!({ "n": n })).unique_key(format!("new{n}"));
        lost.push(storage.enqueue(job).await.expect("acknowledged").id);
    }
    for job in &claimed[..5] {
        storage
            .ack(&job.lease().expect("leased"), None)
            .await
            .expect("acknowledged");
    }
    redis_ha(&["kill", &master]);
    redis_ha(&["resume", &replica]);
    redis_ha(&["wait-master", SLOT_KEY]);
    let mut gone = 0;
    for id in &lost {
        let job = until_ok("a read", || storage.get_job(*id)).await;
        gone += usize::from(job.is_none());
    }
    let mut undone = 0;
    for job in &claimed[..5] {
        undone += usize::from(storage.get_job(job.id).await.expect("read").is_some());
    }
    eprintln!(
        "redis failover (replica stalled): {gone} of 40 acknowledged enqueues lost, \
         {undone} of 5 acks undone"
    );
    assert_eq!(gone, 40);
    assert_eq!(undone, 5);
}

/// The same stalled replica with durable writes: an enqueue and an ack
/// wait for it, then fail as `Unavailable` rather than report done; after
/// the failover nothing acknowledged is missing. The promoted replica has
/// no replica of its own, so durable writes fail until the old master is
/// back as its replica; then they succeed again.
async fn durable_writes_acknowledge_nothing_the_replica_lacks() {
    let (plain, master, replica) = fresh().await;
    let storage = plain
        .clone()
        .with_durable_writes(1, Duration::from_millis(500))
        .expect("valid settings");
    let mut kept = Vec::new();
    for n in 0..2 {
        let job = NewJob::new("q", json!({ "n": n })).unique_key(format!("kept{n}"));
        kept.push(storage.enqueue(job).await.expect("acknowledged").id);
    }
    let claimed = storage
        .dequeue(&request(&["q"], 1, "w"))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1);
    redis_ha(&["stall", &replica]);
    let started = Instant::now();
    let error = storage
        .enqueue(NewJob::new("q", json!({ "n": 2 })).unique_key("unacknowledged"))
        .await
        .expect_err("an enqueue the replica never acknowledged");
    assert!(error.is_transient(), "{error:?}");
    assert!(error.to_string().contains("0 of 1 replicas"), "{error}");
    assert!(started.elapsed() >= Duration::from_millis(450));
    let error = storage
        .ack(&claimed[0].lease().expect("leased"), None)
        .await
        .expect_err("an ack the replica never acknowledged");
    assert!(error.is_transient(), "{error:?}");
    redis_ha(&["kill", &master]);
    redis_ha(&["resume", &replica]);
    redis_ha(&["wait-master", SLOT_KEY]);
    for id in &kept {
        let job = until_ok("a read", || plain.get_job(*id)).await;
        assert!(job.is_some(), "acknowledged job {id} was lost");
    }
    // Nothing replicates the new master yet: durable writes fail.
    let alone = storage
        .enqueue(NewJob::new("q", json!({ "n": 3 })))
        .await
        .expect_err("no replica to acknowledge");
    assert!(alone.is_transient(), "{alone:?}");
    // The old master rejoins as the new master's replica: they succeed.
    redis_ha(&["restart", &master]);
    let back = until_ok("a durable enqueue", || {
        storage.enqueue(NewJob::new("q", json!({ "n": 4 })).unique_key("back"))
    })
    .await;
    assert!(!back.existed);
}

async fn durable_writes_refuse_bad_settings() {
    let storage = RedisStorage::connect(URL).await.expect("connect");
    for (replicas, timeout, field) in [
        (0, Duration::from_millis(100), "replicas"),
        (1, Duration::ZERO, "timeout"),
        (1, Duration::from_micros(500), "timeout"),
        (1, Duration::from_secs(61), "timeout"),
    ] {
        let error = storage
            .clone()
            .with_durable_writes(replicas, timeout)
            .expect_err("bad settings");
        assert_eq!(error.invalid_field(), Some(field), "{error}");
    }
}

/// The master of the queue's slot and its replica both dead: the slots are
/// served by nobody. A call on the queue fails as `Unavailable` (nothing
/// is written anywhere), and a new storage is refused at connect, saying
/// why.
async fn a_cluster_with_uncovered_slots_is_refused_naming_it() {
    let (storage, master, replica) = fresh().await;
    redis_ha(&["kill", &master]);
    redis_ha(&["kill", &replica]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let error = loop {
        match storage.enqueue(NewJob::new("q", json!({ "n": 0 }))).await {
            Err(error) => break error,
            Ok(_) => {
                assert!(Instant::now() < deadline, "the slot kept taking writes");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert!(error.is_transient(), "{error:?}");
    // The survivors mark the cluster down once the nodes' timeout passes.
    let deadline = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        match RedisStorage::connect(URL).await {
            Err(error) => break error,
            Ok(_) => {
                assert!(
                    Instant::now() < deadline,
                    "a cluster without a slot's master accepted"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    let message = refused.to_string();
    assert!(message.contains("cluster_state is not ok"), "{message}");
}
