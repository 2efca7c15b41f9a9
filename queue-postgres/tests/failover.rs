//! A storage on a URL of two hosts, a primary and its synchronous standby
//! (scripts/pg-ha.sh: two local clusters on 5441 and 5442), through a
//! failover driven by the test: the primary stopped with `-m immediate`,
//! the standby promoted. Run when `QUEUE_TEST_PG_HA=1` (scripts/test.sh
//! sets it); without it the test fails naming the variable. The cases run
//! in one test, one after another: each rebuilds the clusters.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use queue_core::{DequeueRequest, NewJob, QueueError, QueueName, Storage, WorkerId};
use queue_postgres::PgStorage;
use serde_json::json;

const PRIMARY: &str = "127.0.0.1:5441";
const STANDBY: &str = "127.0.0.1:5442";

fn pg_ha_status(args: &[&str]) -> std::io::Result<std::process::ExitStatus> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/pg-ha.sh");
    Command::new("bash").arg(&script).args(args).status()
}

fn pg_ha(args: &[&str]) {
    let status = pg_ha_status(args).expect("run scripts/pg-ha.sh");
    assert!(status.success(), "scripts/pg-ha.sh {args:?} failed");
}

fn url(hosts: &[&str]) -> String {
    format!(
        "postgres://postgres@{}/queue_test?target_session_attrs=read-write",
        hosts.join(",")
    )
}

/// Fresh clusters (synchronous standby) with an empty `queue_test` database.
async fn fresh_clusters() {
    pg_ha(&["start", "sync"]);
    let admin = PgStorage::connect(&format!("postgres://postgres@{PRIMARY}/postgres"))
        .await
        .expect("connect to the primary");
    sqlx::query("CREATE DATABASE queue_test")
        .execute(admin.pool())
        .await
        .expect("create queue_test");
    admin.pool().close().await;
    // A synchronous commit waits for the standby's flush, not its replay:
    // wait until the standby has the database too.
    let standby = format!("postgres://postgres@{STANDBY}/queue_test");
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Err(error) = sqlx::PgPool::connect(&standby).await.map(drop) {
        assert!(
            Instant::now() < deadline,
            "the standby never had queue_test: {error}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The live jobs of every queue.
async fn live(storage: &PgStorage) -> u64 {
    let stats = storage.stats().await.expect("stats");
    stats
        .iter()
        .map(|s| s.pending + s.scheduled + s.running + s.stalled)
        .sum()
}

fn request(limit: u32) -> DequeueRequest {
    DequeueRequest::new(
        vec![QueueName::new("q").expect("valid")],
        limit,
        Duration::from_secs(60),
        WorkerId::new("w").expect("valid"),
    )
    .expect("valid request")
}

#[tokio::test]
async fn postgres_behind_a_failover() {
    assert!(
        std::env::var("QUEUE_TEST_PG_HA").is_ok_and(|v| v == "1"),
        "set QUEUE_TEST_PG_HA=1 to run the failover tests (they create and drop the clusters \
         qha_a and qha_b on ports 5441 and 5442 with scripts/pg-ha.sh; scripts/test.sh sets it)"
    );
    let _clusters = Clusters;
    fresh_clusters().await;
    the_first_host_that_accepts_writes_is_chosen().await;
    a_url_of_hosts_that_take_no_writes_is_refused_naming_them().await;
    the_storage_follows_a_failover_and_loses_nothing_acknowledged().await;
    fresh_clusters().await;
    operators_reads_go_to_the_read_pool_on_the_standby().await;
}

/// Drops both clusters when the test ends, passed or not.
struct Clusters;

impl Drop for Clusters {
    fn drop(&mut self) {
        // Also while a failed assertion unwinds: no second panic.
        let _ = pg_ha_status(&["stop"]);
    }
}

/// The standby first in the URL: the storage connects to the primary.
async fn the_first_host_that_accepts_writes_is_chosen() {
    let storage = PgStorage::connect(&url(&[STANDBY, PRIMARY]))
        .await
        .expect("connect");
    assert_eq!(storage.current_host(), Some(PRIMARY));
    storage.migrate().await.expect("migrate");
    storage
        .enqueue(NewJob::new("q", json!({"n": 0})))
        .await
        .expect("enqueue through the primary");
    storage.pool().close().await;
}

/// The standby and a port where nothing listens: a typed error naming both.
async fn a_url_of_hosts_that_take_no_writes_is_refused_naming_them() {
    let error = PgStorage::connect(&url(&[STANDBY, "127.0.0.1:5449"]))
        .await
        .expect_err("no host takes writes");
    assert!(matches!(error, QueueError::Unavailable(_)), "{error:?}");
    let message = error.to_string();
    for part in ["127.0.0.1:5442 (a standby)", "127.0.0.1:5449 (unreachable"] {
        assert!(message.contains(part), "{part} in: {message}");
    }
}

/// Jobs enqueued and acked before the primary's crash are all on the
/// promoted standby (synchronous replication); the same storage handle
/// enqueues and claims there without a restart.
async fn the_storage_follows_a_failover_and_loses_nothing_acknowledged() {
    let storage = PgStorage::connect(&url(&[PRIMARY, STANDBY]))
        .await
        .expect("connect");
    let mut enqueued = Vec::new();
    for n in 1..=50 {
        let outcome = storage
            .enqueue(NewJob::new("q", json!({"n": n})).unique_key(format!("k{n}")))
            .await
            .expect("enqueue");
        enqueued.push(outcome.id);
    }
    let claimed = storage.dequeue(&request(20)).await.expect("claim");
    assert_eq!(claimed.len(), 20);
    for job in &claimed {
        storage
            .ack(&job.lease().expect("leased"), None)
            .await
            .expect("ack");
    }

    let live_before = live(&storage).await;

    let killed = Instant::now();
    pg_ha(&["kill-primary"]);
    pg_ha(&["promote"]);
    // The same handle, until the first claim on the new primary.
    let deadline = killed + Duration::from_secs(30);
    let first = loop {
        match storage.dequeue(&request(1)).await {
            Ok(jobs) if !jobs.is_empty() => break jobs,
            Ok(_) => panic!("the promoted standby lost the live jobs"),
            Err(error) => {
                assert!(
                    error.is_transient(),
                    "a failover error is Unavailable: {error:?}"
                );
                assert!(Instant::now() < deadline, "no claim within 30 s: {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    eprintln!(
        "failover: first claim on the new primary {} ms after the kill",
        killed.elapsed().as_millis()
    );
    assert_eq!(storage.current_host(), Some(STANDBY));

    // Nothing acknowledged is lost: the same live jobs (one now leased).
    assert_eq!(live(&storage).await, live_before);
    for job in &claimed {
        assert!(
            storage.get_job(job.id).await.expect("read").is_none(),
            "acked job {} came back",
            job.id
        );
    }
    storage
        .ack(&first[0].lease().expect("leased"), None)
        .await
        .expect("ack on the new primary");
    // Unique keys still hold there.
    let again = storage
        .enqueue(NewJob::new("q", json!({"n": 50})).unique_key("k50"))
        .await
        .expect("enqueue on the new primary");
    assert!(again.existed && again.id == enqueued[49], "{again:?}");
    storage.pool().close().await;
}

/// A storage on the primary with its read pool on the standby: stats,
/// listings and job reads answer from the standby (they keep answering
/// when the primary is down), while writes need the primary.
async fn operators_reads_go_to_the_read_pool_on_the_standby() {
    let several = PgStorage::connect(&format!("postgres://postgres@{PRIMARY}/queue_test"))
        .await
        .expect("connect to the primary")
        .with_read_url(&url(&[STANDBY, PRIMARY]))
        .await
        .expect_err("a read URL of several hosts is refused");
    assert_eq!(several.invalid_field(), Some("read_url"), "{several}");

    let storage = PgStorage::connect(&format!("postgres://postgres@{PRIMARY}/queue_test"))
        .await
        .expect("connect to the primary")
        .with_read_url(&format!("postgres://postgres@{STANDBY}/queue_test"))
        .await
        .expect("the read pool on the standby");
    storage.migrate().await.expect("migrate");
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(
            storage
                .enqueue(NewJob::new("q", json!({"n": n})))
                .await
                .expect("enqueue")
                .id,
        );
    }
    // The standby replays within its lag (the migration's tables too).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stats = storage.stats().await;
        let shown: u64 = stats.iter().flatten().map(|s| s.pending).sum();
        if shown == 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the standby never showed the jobs: {stats:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    pg_ha(&["kill-primary"]);
    assert_eq!(live(&storage).await, 3, "stats from the standby");
    let page = storage
        .list_jobs(&queue_core::JobFilter::default())
        .await
        .expect("a listing from the standby");
    assert_eq!(page.jobs.len(), 3);
    assert!(storage.get_job(ids[0]).await.expect("read").is_some());
    let error = storage
        .enqueue(NewJob::new("q", json!({"n": 3})))
        .await
        .expect_err("writes need the primary");
    assert!(error.is_transient(), "{error:?}");
}
