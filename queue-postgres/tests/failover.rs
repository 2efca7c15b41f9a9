//! A storage on a URL of two hosts, a primary and its synchronous standby
//! (scripts/pg-ha.sh: two local clusters on 5441 and 5442), through a
//! failover driven by the test: the primary stopped with `-m immediate`,
//! the standby promoted. Run when `QUEUE_TEST_PG_HA=1` (scripts/test.sh
//! sets it); without it the test fails naming the variable. The cases run
//! in one test, one after another: each rebuilds the clusters.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use futures_util::{FutureExt, StreamExt};
use queue_core::{NewJob, QueueError, Storage, Wakeup};
use queue_postgres::PgStorage;
use queue_testkit::suite::{acks_of, request};
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

/// Fresh clusters (`mode`: a `sync` or `async` standby) with an empty
/// `queue_test` database.
async fn fresh_clusters(mode: &str) {
    pg_ha(&["start", mode]);
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

/// The next wake-up, within 10 s.
async fn next(wakeups: &mut queue_core::Wakeups) -> queue_core::Result<Wakeup> {
    tokio::time::timeout(Duration::from_secs(10), wakeups.next())
        .await
        .expect("a wake-up within 10 s")
        .expect("the stream goes on")
}

#[tokio::test]
async fn postgres_behind_a_failover() {
    assert!(
        std::env::var("QUEUE_TEST_PG_HA").is_ok_and(|v| v == "1"),
        "set QUEUE_TEST_PG_HA=1 to run the failover tests (they create and drop the clusters \
         qha_a and qha_b on ports 5441 and 5442 with scripts/pg-ha.sh; scripts/test.sh sets it)"
    );
    let _clusters = Clusters;
    fresh_clusters("sync").await;
    the_first_host_that_accepts_writes_is_chosen().await;
    a_url_of_hosts_that_take_no_writes_is_refused_naming_them().await;
    the_storage_follows_a_failover_and_loses_nothing_acknowledged().await;
    fresh_clusters("sync").await;
    claims_in_flight_at_the_promotion_never_give_a_job_two_live_leases().await;
    fresh_clusters("sync").await;
    a_synchronous_primary_acknowledges_nothing_its_standby_lacks().await;
    fresh_clusters("async").await;
    an_asynchronous_standby_loses_what_it_had_not_received().await;
    fresh_clusters("sync").await;
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
    let claimed = storage
        .dequeue(&request(&["q"], 20, "w"))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 20);
    let acked = storage.ack_batch(&acks_of(&claimed)).await.expect("ack");
    assert!(acked.iter().all(|done| *done));

    let live_before = live(&storage).await;
    // A worker's wake-ups: heard before, on the new primary after.
    let mut wakeups = storage
        .subscribe()
        .await
        .expect("subscribe")
        .expect("PostgreSQL has wake-ups");
    tokio::time::sleep(Duration::from_millis(300)).await;
    while wakeups.next().now_or_never().flatten().is_some() {}

    let killed = Instant::now();
    pg_ha(&["kill-primary"]);
    pg_ha(&["promote"]);
    // The same handle, until the first claim on the new primary.
    let deadline = killed + Duration::from_secs(30);
    let first = loop {
        match storage.dequeue(&request(&["q"], 1, "w")).await {
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
    // The listener finds its connection gone and says so (`All`: look at
    // every queue, signals may have been missed), reconnects to the new
    // primary and listens there.
    let mut told = next(&mut wakeups).await;
    while let Ok(Wakeup::Queue(_)) = told {
        told = next(&mut wakeups).await;
    }
    assert!(matches!(told, Ok(Wakeup::All)), "{told:?}");
    storage
        .enqueue(NewJob::new("q", json!({"n": 51})).unique_key("k51"))
        .await
        .expect("enqueue on the new primary");
    let heard = next(&mut wakeups).await;
    assert!(
        matches!(&heard, Ok(Wakeup::Queue(q)) if q.as_str() == "q"),
        "no wake-up from the new primary: {heard:?}"
    );
    drop(wakeups);
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

/// Claimers loop while the primary crashes and the standby is promoted.
/// Every claim a claimer saw succeed is still leased to it on the new
/// primary (its lease acks there), and a second handle that then claims
/// every free job takes none of them: no job has two live leases. Claims
/// that committed while their answer was lost are held by nobody and come
/// back when their lease expires (counted, not forbidden).
async fn claims_in_flight_at_the_promotion_never_give_a_job_two_live_leases() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    const JOBS: u64 = 2_000;
    let storage = PgStorage::connect(&url(&[PRIMARY, STANDBY]))
        .await
        .expect("connect");
    storage.migrate().await.expect("migrate");
    let jobs: Vec<_> = (0..JOBS)
        .map(|n| NewJob::new("q", json!({ "n": n })))
        .collect();
    storage.enqueue_batch(jobs).await.expect("enqueue");

    let stop = Arc::new(AtomicBool::new(false));
    let claimers: Vec<_> = (0..4)
        .map(|_| {
            let storage = storage.clone();
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let mut held = Vec::new();
                let mut errors = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    match storage.dequeue(&request(&["q"], 1, "w")).await {
                        Ok(jobs) => held.extend(jobs.into_iter().map(|job| (Instant::now(), job))),
                        Err(error) => {
                            assert!(error.is_transient(), "{error:?}");
                            errors += 1;
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                (held, errors)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let killed = Instant::now();
    pg_ha(&["kill-primary"]);
    pg_ha(&["promote"]);
    let promoted = Instant::now();
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    stop.store(true, Ordering::Relaxed);
    let mut held = Vec::new();
    let mut errors = 0;
    for claimer in claimers {
        let (jobs, failed) = claimer.await.expect("claimer");
        held.extend(jobs);
        errors += failed;
    }
    assert_eq!(storage.current_host(), Some(STANDBY));
    // Claims were answered by the old primary and by the new one (a claim
    // during the failover waits for a connection, or fails as Unavailable).
    let before = held.iter().filter(|(at, _)| *at < killed).count();
    let after = held.iter().filter(|(at, _)| *at > promoted).count();
    assert!(
        before > 0 && after > 0,
        "claims before: {before}, after: {after}"
    );
    let held: Vec<_> = held.into_iter().map(|(_, job)| job).collect();
    let mut ids: Vec<_> = held.iter().map(|job| job.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len(),
        held.len(),
        "a job claimed twice through one handle"
    );

    // A second handle, straight to the new primary, takes every free job.
    let other = PgStorage::connect(&format!("postgres://postgres@{STANDBY}/queue_test"))
        .await
        .expect("connect to the new primary");
    let mut taken = Vec::new();
    loop {
        let jobs = other
            .dequeue(&request(&["q"], 100, "w"))
            .await
            .expect("claim");
        if jobs.is_empty() {
            break;
        }
        taken.extend(jobs);
    }
    assert!(!taken.is_empty(), "the claimers took every job");
    for job in &taken {
        assert!(
            ids.binary_search(&job.id).is_err(),
            "job {} has two live leases",
            job.id
        );
    }
    let running: u64 = storage
        .stats()
        .await
        .expect("stats")
        .iter()
        .map(|s| s.running)
        .sum();
    assert_eq!(running, JOBS, "every job is leased once: {running}");
    let orphans = running - (held.len() + taken.len()) as u64;
    eprintln!(
        "failover: {before} claims answered before the kill, {after} after the promotion, \
         {errors} failed claims, {orphans} claims committed without an answer (back after \
         their lease)"
    );
    // Every claim a claimer saw is its lease on the new primary.
    for job in &held {
        storage
            .ack(&job.lease().expect("leased"), None)
            .await
            .unwrap_or_else(|error| panic!("job {}'s lease was lost: {error}", job.id));
    }
    other.pool().close().await;
    storage.pool().close().await;
}

/// With the synchronous standby away, the primary acknowledges no commit:
/// an enqueue waits, fails when the primary crashes, and its job is not
/// on the promoted standby. Nothing acknowledged was lost, at the price of
/// writes that stop while the one synchronous standby is down.
async fn a_synchronous_primary_acknowledges_nothing_its_standby_lacks() {
    let storage = PgStorage::connect(&url(&[PRIMARY, STANDBY]))
        .await
        .expect("connect");
    storage.migrate().await.expect("migrate");
    let before = storage
        .enqueue(NewJob::new("q", json!({ "n": 0 })).unique_key("before"))
        .await
        .expect("enqueue with the standby there");
    pg_ha(&["stop-standby"]);
    let waiting = {
        let storage = storage.clone();
        tokio::spawn(async move {
            storage
                .enqueue(NewJob::new("q", json!({ "n": 1 })).unique_key("during"))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert!(
        !waiting.is_finished(),
        "an enqueue returned without the synchronous standby: {:?}",
        waiting.await
    );
    pg_ha(&["kill-primary"]);
    let outcome = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiting enqueue ends with the primary")
        .expect("task");
    let error = outcome.expect_err("an enqueue acknowledged without its standby");
    assert!(error.is_transient(), "{error:?}");
    pg_ha(&["start-standby"]);
    pg_ha(&["promote"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let again = loop {
        match storage
            .enqueue(NewJob::new("q", json!({ "n": 1 })).unique_key("during"))
            .await
        {
            Ok(outcome) => break outcome,
            Err(error) => {
                assert!(error.is_transient(), "{error:?}");
                assert!(Instant::now() < deadline, "no enqueue within 30 s: {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert!(!again.existed, "the unacknowledged job reached the standby");
    assert!(storage.get_job(before.id).await.expect("read").is_some());
    storage.pool().close().await;
}

/// An asynchronous standby acknowledges nothing: what it had not received
/// when the primary crashed is gone after the promotion. The standby is
/// stopped to make that window wide and exact; with it streaming, the
/// window is the replication lag (docs/high-availability.md). Enqueues
/// acknowledged in the window are lost, and jobs acked in it come back to
/// run again.
async fn an_asynchronous_standby_loses_what_it_had_not_received() {
    const LOST: usize = 40;
    let storage = PgStorage::connect(&url(&[PRIMARY, STANDBY]))
        .await
        .expect("connect");
    storage.migrate().await.expect("migrate");
    for n in 0..10 {
        storage
            .enqueue(NewJob::new("q", json!({ "n": n })).unique_key(format!("old{n}")))
            .await
            .expect("enqueue");
    }
    let claimed = storage
        .dequeue(&request(&["q"], 10, "w"))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 10);
    // The standby has everything so far.
    let caught_up = "SELECT count(*) FROM pg_stat_replication \
                     WHERE replay_lsn = pg_current_wal_lsn()";
    let deadline = Instant::now() + Duration::from_secs(10);
    while sqlx::query_scalar::<_, i64>(caught_up)
        .fetch_one(storage.pool())
        .await
        .expect("replication state")
        == 0
    {
        assert!(Instant::now() < deadline, "the standby never caught up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    pg_ha(&["stop-standby"]);

    let mut lost = Vec::new();
    for n in 0..LOST {
        lost.push(
            storage
                .enqueue(NewJob::new("q", json!({ "n": n })).unique_key(format!("new{n}")))
                .await
                .expect("acknowledged without the standby")
                .id,
        );
    }
    for job in &claimed[..5] {
        storage
            .ack(&job.lease().expect("leased"), None)
            .await
            .expect("acked without the standby");
    }
    pg_ha(&["kill-primary"]);
    pg_ha(&["start-standby"]);
    pg_ha(&["promote"]);

    let deadline = Instant::now() + Duration::from_secs(30);
    let mut gone = 0;
    for id in &lost {
        let job = loop {
            match storage.get_job(*id).await {
                Ok(job) => break job,
                Err(error) => {
                    assert!(error.is_transient(), "{error:?}");
                    assert!(Instant::now() < deadline, "no read within 30 s: {error}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        gone += usize::from(job.is_none());
    }
    let mut undone = 0;
    for job in &claimed[..5] {
        let back = storage.get_job(job.id).await.expect("read");
        undone += usize::from(back.is_some());
    }
    assert_eq!(storage.current_host(), Some(STANDBY));
    assert_eq!(
        gone, LOST,
        "acknowledged enqueues the standby never received"
    );
    assert_eq!(undone, 5, "acks the standby never received");
    // The key of a lost job is free again; its id may be given again too
    // (the standby's sequence is where its last received WAL put it).
    let mut reused = 0;
    for n in 0..LOST {
        let outcome = storage
            .enqueue(NewJob::new("q", json!({ "n": n })).unique_key(format!("new{n}")))
            .await
            .expect("enqueue on the new primary");
        assert!(!outcome.existed);
        reused += usize::from(lost.contains(&outcome.id));
    }
    eprintln!(
        "failover (asynchronous, standby away): {gone} of {LOST} acknowledged enqueues lost, \
         {undone} of 5 acks undone (their jobs run again), {reused} lost ids given to new jobs"
    );
    storage.pool().close().await;
}
