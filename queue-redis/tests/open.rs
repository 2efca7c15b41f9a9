//! Connecting and bad input: unreachable servers, wrong passwords, servers
//! without scripting, clusters without slots, payloads over the limit,
//! namespaces and wake-ups; stored forms (older samples, a fair queue's
//! weighted turns).

mod common;
#[path = "common/server.rs"]
mod server;

use std::time::Duration;

use futures_util::StreamExt;
use queue_core::{NewJob, QueueError, QueueName, Storage, Wakeup};
use queue_redis::RedisStorage;
use serde_json::json;
use server::{Server, free_port};

fn source_text(error: &QueueError) -> String {
    std::error::Error::source(error)
        .map(ToString::to_string)
        .unwrap_or_else(|| error.to_string())
}

#[tokio::test]
async fn an_unreachable_server_is_unavailable_naming_it() {
    let port = free_port();
    let error = RedisStorage::connect(&format!("redis://127.0.0.1:{port}"))
        .await
        .expect_err("nobody listens there");
    assert!(error.is_transient(), "{error:?}");
    assert!(
        source_text(&error).contains(&format!("127.0.0.1:{port}")),
        "{error}"
    );
}

#[tokio::test]
async fn a_wrong_password_is_refused_naming_the_node_but_not_the_password() {
    let server = Server::start(&["--requirepass", "right-secret"]);
    let error = RedisStorage::connect(&server.url(":wrong-secret@"))
        .await
        .expect_err("wrong password");
    let text = source_text(&error);
    assert!(matches!(error, QueueError::Backend(_)), "{error:?}");
    assert!(
        text.contains(&format!("127.0.0.1:{}", server.port())),
        "{text}"
    );
    assert!(
        !text.contains("wrong-secret"),
        "the password leaked: {text}"
    );
    let storage = RedisStorage::connect(&server.url(":right-secret@"))
        .await
        .expect("the right password");
    storage
        .enqueue(NewJob::new("q", json!({})))
        .await
        .expect("enqueue with the right password");
}

#[tokio::test]
async fn a_server_without_scripting_is_refused_at_connect() {
    let server = Server::start(&[
        "--user",
        "default",
        "on",
        "nopass",
        "~*",
        "&*",
        "+@all",
        "-@scripting",
    ]);
    let error = RedisStorage::connect(&server.url(""))
        .await
        .expect_err("no scripting");
    assert!(matches!(error, QueueError::Backend(_)), "{error:?}");
    let text = error.to_string();
    assert!(
        text.contains("Lua scripts") && text.contains(&server.port().to_string()),
        "{text}"
    );
}

#[tokio::test]
async fn a_cluster_without_slots_is_refused_naming_it() {
    let server = Server::start(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
    ]);
    let error = RedisStorage::connect_cluster(&[server.url("").as_str()])
        .await
        .expect_err("no slot is served");
    let text = format!("{error} {}", source_text(&error));
    assert!(text.contains(&server.port().to_string()), "{text}");
}

#[tokio::test]
async fn a_payload_over_the_limit_is_invalid_and_nothing_is_written() {
    let namespace = common::fresh_namespace();
    let storage = common::connect(false)
        .await
        .with_namespace(&namespace)
        .expect("namespace")
        .with_max_payload_bytes(1024);
    let small = NewJob::new("q", json!({"n": 1}));
    let big = NewJob::new("q", json!({"blob": "x".repeat(2048)}));
    let error = storage
        .enqueue_batch(vec![small, big])
        .await
        .expect_err("over the limit");
    match &error {
        QueueError::InvalidInput { field, reason } => {
            assert_eq!(*field, "payload");
            assert!(reason.contains("1024"), "{reason}");
        }
        other => panic!("expected InvalidInput, got {other:?}"),
    }
    assert!(
        storage.stats().await.expect("stats").is_empty(),
        "something was written"
    );
    common::purge(false, namespace).await;
}

#[tokio::test]
async fn a_namespace_with_braces_is_invalid() {
    let error = common::connect(false)
        .await
        .with_namespace("a{b}")
        .expect_err("braces");
    assert_eq!(error.invalid_field(), Some("namespace"));
}

/// Waits for the next wake-up naming `queue` (others may come first).
async fn woken(wakeups: &mut queue_core::Wakeups, queue: &str) {
    let queue = QueueName::new(queue).expect("valid");
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match wakeups.next().await {
                Some(Ok(Wakeup::Queue(q))) if q == queue => return,
                Some(Ok(_)) => continue,
                other => panic!("wake-up stream: {other:?}"),
            }
        }
    })
    .await
    .expect("woken within 5 s");
}

async fn check_wakeups(cluster: bool) {
    let namespace = common::fresh_namespace();
    let storage = common::connect(cluster)
        .await
        .with_namespace(&namespace)
        .expect("namespace");
    let mut wakeups = storage
        .subscribe()
        .await
        .expect("subscribe")
        .expect("a stream");
    // Another connection enqueues: the signal crosses processes.
    let other = common::connect(cluster)
        .await
        .with_namespace(&namespace)
        .expect("namespace");
    for queue in ["alpha", "beta", "gamma"] {
        other
            .enqueue(NewJob::new(queue, json!({})))
            .await
            .expect("enqueue");
        woken(&mut wakeups, queue).await;
    }
    let q = QueueName::new("beta").expect("valid");
    other.pause_queue(&q).await.expect("pause");
    other.resume_queue(&q).await.expect("resume");
    woken(&mut wakeups, "beta").await;
    drop(wakeups);
    common::purge(cluster, namespace).await;
}

#[tokio::test]
async fn wakeups_follow_enqueue_and_resume() {
    check_wakeups(false).await;
}

#[tokio::test]
async fn wakeups_follow_enqueue_and_resume_on_the_cluster() {
    check_wakeups(true).await;
}

#[tokio::test]
async fn migrate_records_the_layout_once_and_refuses_another() {
    let namespace = common::fresh_namespace();
    let storage = common::standalone_in(&namespace).await;
    assert_eq!(
        storage.migrate().await.expect("first"),
        vec![queue_redis::LAYOUT_VERSION]
    );
    assert!(storage.migrate().await.expect("second").is_empty());
    let mut conn = common::raw_connection().await;
    let _: () = redis::cmd("SET")
        .arg(common::layout_key(&namespace))
        .arg("99")
        .query_async(&mut conn)
        .await
        .expect("a future layout");
    let error = storage.migrate().await.expect_err("another layout");
    assert!(matches!(error, QueueError::Conflict { .. }), "{error:?}");
    common::purge(false, namespace).await;
}

#[tokio::test]
async fn migrate_upgrades_layout_one_to_the_index_of_levels() {
    let namespace = common::fresh_namespace();
    let storage = common::standalone_in(&namespace).await;
    let mut jobs = Vec::new();
    for priority in [-5, 3, -5, 3] {
        let job = NewJob::new("upgraded", json!({})).priority(priority);
        jobs.push(storage.enqueue(job).await.expect("enqueue").id);
    }
    let mut conn = common::raw_connection().await;
    // What a layout-1 version left: its version, its pending index by
    // available_at, and no index of levels.
    let layout = common::layout_key(&namespace);
    let prefix = format!("{namespace}:{{upgraded}}");
    let _: () = redis::pipe()
        .cmd("SET")
        .arg(&layout)
        .arg("1")
        .ignore()
        .cmd("ZADD")
        .arg(format!("{prefix}:ready_at"))
        .arg(1)
        .arg(format!("{:019}", jobs[0].get()))
        .ignore()
        .cmd("DEL")
        .arg(format!("{prefix}:levels"))
        .ignore()
        .query_async(&mut conn)
        .await
        .expect("a layout-1 namespace");
    assert_eq!(
        storage.migrate().await.expect("upgrade"),
        vec![queue_redis::LAYOUT_VERSION]
    );
    let left: bool = redis::cmd("EXISTS")
        .arg(format!("{prefix}:ready_at"))
        .query_async(&mut conn)
        .await
        .expect("exists");
    assert!(!left, "the layout-1 index is gone");
    common::assert_current_layout(&mut conn, &namespace).await;
    // Each level's oldest job: the first of each priority.
    let levels: Vec<(String, i64)> = redis::cmd("ZRANGE")
        .arg(format!("{prefix}:levels"))
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(&mut conn)
        .await
        .expect("levels");
    let mut expected = Vec::new();
    for (level, id) in [("5", jobs[0]), ("-3", jobs[1])] {
        let job = storage.get_job(id).await.expect("read").expect("live");
        expected.push((level.to_owned(), job.available_at.timestamp_micros()));
    }
    assert_eq!(levels, expected);
    assert!(storage.migrate().await.expect("again").is_empty());
    let stats = storage.stats().await.expect("stats");
    assert_eq!(stats[0].pending, 4, "the jobs are still pending: {stats:?}");
    common::purge(false, namespace).await;
}

#[tokio::test]
async fn a_cluster_url_connects_to_the_cluster() {
    let seed = common::cluster_url();
    let url = seed.replacen("redis://", "redis+cluster://", 1);
    let storage = RedisStorage::connect(&url).await.expect("cluster URL");
    assert!(
        format!("{storage:?}").contains("cluster: true"),
        "{storage:?}"
    );
}

async fn check_clear(cluster: bool) {
    let namespace = common::fresh_namespace();
    let storage = common::connect(cluster)
        .await
        .with_namespace(&namespace)
        .expect("namespace");
    let jobs = (0..20)
        .map(|n| NewJob::new(format!("q{n}"), json!({})))
        .collect();
    storage.enqueue_batch(jobs).await.expect("enqueue");
    assert!(storage.clear().await.expect("clear") > 20);
    assert!(storage.stats().await.expect("stats").is_empty());
    assert_eq!(storage.clear().await.expect("clear again"), 0);
}

#[tokio::test]
async fn clear_removes_every_key_of_the_namespace() {
    check_clear(false).await;
}

#[tokio::test]
async fn clear_removes_every_key_of_the_namespace_on_every_cluster_node() {
    check_clear(true).await;
}

#[tokio::test]
async fn a_tls_url_is_invalid_in_this_build() {
    let error = RedisStorage::connect("rediss://127.0.0.1:6379")
        .await
        .expect_err("no TLS support is built in");
    assert_eq!(error.invalid_field(), Some("url"), "{error:?}");
}

/// Samples recorded a hash field per lag bucket (the first charts
/// release's form) still read, and add up with the same minute's lags
/// recorded now, one field per queue and minute.
#[tokio::test]
async fn samples_kept_a_field_per_bucket_read_beside_the_newer_form() {
    let namespace = common::fresh_namespace();
    let storage = common::standalone_in(&namespace).await;
    storage.migrate().await.expect("migrate");
    let minute = queue_core::minute_of(storage.now().await.expect("now"));
    let micros = minute.timestamp_micros().to_string();
    let bucket = queue_core::lag_bucket(Duration::from_millis(40));
    let mut conn = common::raw_connection().await;
    let _: () = redis::pipe()
        .cmd("HSET")
        .arg(format!("{{{namespace}}}:sample:{micros}"))
        .arg(format!("l{bucket:03}emails"))
        .arg(5)
        .ignore()
        .cmd("ZADD")
        .arg(format!("{{{namespace}}}:sample_minutes"))
        .arg(&micros)
        .arg(&micros)
        .ignore()
        .query_async(&mut conn)
        .await
        .expect("samples in the older form");
    let mut now = queue_core::QueueSample::new(QueueName::new("emails").expect("name"), minute);
    now.lag.record(Duration::from_millis(40));
    now.lag.record(Duration::from_millis(3));
    storage.record_samples(&[now]).await.expect("record");
    let read = storage
        .samples(Duration::from_secs(3600))
        .await
        .expect("samples");
    assert_eq!(read.len(), 1, "{read:?}");
    let buckets: Vec<(u8, u64)> = read[0].lag.buckets().collect();
    let mut expected = vec![
        (queue_core::lag_bucket(Duration::from_millis(3)), 1),
        (bucket, 6),
    ];
    expected.sort();
    assert_eq!(buckets, expected);
    common::purge(false, namespace).await;
}

/// A fair queue's turns as `P:turns` keeps them: `<at>` (the form before
/// weights, still read as nothing taken) or `<at>:<taken>` while a group
/// of weight w has taken fewer than w jobs since its turn last moved; a
/// moved turn is the queue's claim count (`P:claims`) at the job that
/// moved it.
#[tokio::test]
async fn weighted_turns_are_stored_as_at_and_taken() {
    let namespace = common::fresh_namespace();
    let storage = common::standalone_in(&namespace).await;
    let queue = QueueName::new("q").expect("name");
    let limits = queue_core::QueueLimits {
        fair_groups: true,
        ..queue_core::QueueLimits::default()
    };
    storage
        .configure_queue(&queue, &limits)
        .await
        .expect("fair");
    for (group, weight) in [("a", 3), ("b", 2)] {
        let group = queue_core::GroupKey::new(group).expect("group");
        (storage.set_group_weight(&queue, &group, Some(weight)))
            .await
            .expect("weight");
    }
    // "a" has taken 2 of its 3 at turn 3, "b" nothing at turn 3.
    let turns = format!("{namespace}:{{q}}:turns");
    let claims = format!("{namespace}:{{q}}:claims");
    let mut conn = common::raw_connection().await;
    let _: () = redis::pipe()
        .cmd("HSET")
        .arg(&turns)
        .arg("a")
        .arg("3:2")
        .arg("b")
        .arg("3")
        .ignore()
        .cmd("SET")
        .arg(&claims)
        .arg(10)
        .ignore()
        .query_async(&mut conn)
        .await
        .expect("planted turns");
    for group in ["a", "a", "b", "b", "b"] {
        (storage.enqueue(NewJob::new("q", json!({})).group_key(group)))
            .await
            .expect("enqueue");
    }
    let request = queue_core::DequeueRequest::new(
        vec![queue.clone()],
        1,
        Duration::from_secs(30),
        queue_core::WorkerId::new("w").expect("worker"),
    )
    .expect("request");
    let mut served = Vec::new();
    let mut stored = Vec::new();
    for _ in 0..4 {
        let jobs = storage.dequeue(&request).await.expect("dequeue");
        served.extend(jobs.into_iter().filter_map(|job| job.group_key));
        let mut hash: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg(&turns)
            .query_async(&mut conn)
            .await
            .expect("turns");
        hash.sort();
        stored.push(hash);
    }
    let served: Vec<&str> = served.iter().map(|g| g.as_str()).collect();
    assert_eq!(served, ["a", "b", "b", "a"]);
    let pair = |a: &str, b: &str| {
        vec![
            ("a".to_owned(), a.to_owned()),
            ("b".to_owned(), b.to_owned()),
        ]
    };
    assert_eq!(
        stored,
        [
            pair("11", "3"),
            pair("11", "3:1"),
            pair("11", "13"),
            pair("11:1", "13")
        ],
        "a's third job moves its turn to claim 11; b's second, to claim 13"
    );
    common::purge(false, namespace).await;
}
