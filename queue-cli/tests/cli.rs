//! The `queue` binary against real servers: every command, its exit code,
//! its one-line errors, and nothing written by a rejected command.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use queue::{NewJob, QueueName, Retry, Storage};
use queue_testkit::harness::mysql::TestDatabase;
use queue_testkit::harness::postgres::TestSchema;
use serde_json::{Value, json};

/// Runs `queue` with `args` on `url` (and `schema`), feeding `stdin`.
fn queue(url: &str, schema: Option<&str>, args: &[&str], stdin: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_queue"));
    command
        .args(args)
        .env("QUEUE_DATABASE_URL", url)
        .env_remove("QUEUE_SCHEMA")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(schema) = schema {
        command.env("QUEUE_SCHEMA", schema);
    }
    let mut child = command.spawn().expect("the queue binary runs");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .expect("write stdin");
    drop(input);
    child.wait_with_output().expect("the queue binary finishes")
}

/// `args` must succeed; returns standard output.
fn ok(url: &str, schema: Option<&str>, args: &[&str], stdin: Option<&str>) -> String {
    let out = queue(url, schema, args, stdin);
    assert!(
        out.status.success(),
        "queue {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// `args` must fail with `code` and one line on standard error.
fn fails(url: &str, schema: Option<&str>, args: &[&str], code: i32) -> String {
    let out = queue(url, schema, args, None);
    assert_eq!(out.status.code(), Some(code), "queue {args:?}: {out:?}");
    let stderr = String::from_utf8(out.stderr).expect("UTF-8");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(stderr.starts_with("queue: "), "{stderr}");
    stderr
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// The whole tour on one database, through `url` (and `schema`).
async fn tour(url: &str, schema: Option<&str>) {
    assert!(ok(url, schema, &["migrate"], None).contains("applied"));
    assert_eq!(ok(url, schema, &["migrate"], None).trim(), "up to date");

    // Enqueue from an argument and from standard input; a unique key.
    let first = json_of(&ok(
        url,
        schema,
        &["enqueue", "emails", r#"{"to":"ada"}"#, "--json"],
        None,
    ));
    assert_eq!(first["existed"], json!(false));
    let id = first["id"].as_i64().expect("an id");
    let keyed = ok(
        url,
        schema,
        &["enqueue", "emails", "--unique-key", "k", "--delay", "5m"],
        Some(r#"{"to":"bob"}"#),
    );
    let keyed_id: i64 = keyed.trim().parse().expect("the id alone");
    let again = json_of(&ok(
        url,
        schema,
        &["enqueue", "emails", "{}", "--unique-key", "k", "--json"],
        None,
    ));
    assert_eq!(again, json!({ "id": keyed_id, "existed": true }));

    // Rejected input: usage errors, nothing written.
    fails(url, schema, &["enqueue", "emails", "not json"], 2);
    fails(url, schema, &["enqueue", "", "{}"], 2);
    fails(
        url,
        schema,
        &["enqueue", "emails", "{}", "--max-attempts", "0"],
        2,
    );
    fails(
        url,
        schema,
        &["enqueue", "emails", "{}", "--max-attempts", "2147483648"],
        2,
    );
    fails(
        url,
        schema,
        &["enqueue", "emails", "{}", "--delay", "soon"],
        2,
    );
    let from_stdin = queue(url, schema, &["enqueue", "emails"], Some("not json"));
    assert_eq!(from_stdin.status.code(), Some(2), "{from_stdin:?}");
    let stderr = String::from_utf8(from_stdin.stderr).expect("UTF-8");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(stderr.starts_with("queue: "), "{stderr}");
    let stats = json_of(&ok(url, schema, &["stats", "--json"], None));
    assert_eq!(stats.as_array().map(Vec::len), Some(1), "{stats}");
    assert_eq!(stats[0]["queue"], json!("emails"));
    assert_eq!(
        (stats[0]["pending"].clone(), stats[0]["scheduled"].clone()),
        (json!(1), json!(1))
    );

    // Show a live job; discard it; show it from history.
    let shown = json_of(&ok(url, schema, &["show", &id.to_string(), "--json"], None));
    assert_eq!(
        (shown["live"].clone(), shown["state"].clone()),
        (json!(true), json!("pending"))
    );
    assert_eq!(shown["job"]["payload"], json!({ "to": "ada" }));
    ok(url, schema, &["discard", &id.to_string()], None);
    let shown = json_of(&ok(url, schema, &["show", &id.to_string(), "--json"], None));
    assert_eq!(
        (shown["live"].clone(), shown["record"]["status"].clone()),
        (json!(false), json!("discarded"))
    );
    fails(url, schema, &["discard", &id.to_string()], 1);
    fails(url, schema, &["discard", "999999"], 1);
    fails(url, schema, &["show", "999999"], 1);

    // A dead letter, made through the library, retried from the command line.
    let storage = queue::connect(url).await.expect("connect");
    let storage = match schema {
        Some(schema) => storage.with_schema(schema).expect("schema"),
        None => storage,
    };
    let dead = storage
        .enqueue(NewJob::new("reports", json!({ "n": 1 })).max_attempts(1))
        .await
        .expect("enqueue")
        .id;
    let request = queue::DequeueRequest::new(
        vec![QueueName::new("reports").expect("name")],
        1,
        std::time::Duration::from_secs(30),
        queue::WorkerId::new("cli-test").expect("worker id"),
    )
    .expect("request");
    let job = storage
        .dequeue(&request)
        .await
        .expect("dequeue")
        .pop()
        .expect("a job");
    storage
        .nack(
            job.lease().as_ref().expect("leased"),
            json!({ "message": "<script>boom</script>" }),
            Retry::Never,
        )
        .await
        .expect("nack");
    let page = json_of(&ok(
        url,
        schema,
        &["history", "--status", "dead-letter", "--json"],
        None,
    ));
    assert_eq!(page["records"][0]["id"], json!(dead.get()));
    let shown = ok(url, schema, &["show", &dead.get().to_string()], None);
    assert!(
        shown.contains("dead_letter") && shown.contains("<script>boom</script>"),
        "{shown}"
    );
    ok(url, schema, &["retry", &dead.get().to_string()], None);
    fails(url, schema, &["retry", &dead.get().to_string()], 1);
    assert!(
        storage.get_job(dead).await.expect("read").is_some(),
        "live again"
    );

    // Pause and resume show in the stats.
    ok(url, schema, &["pause", "emails"], None);
    let stats = json_of(&ok(url, schema, &["stats", "--json"], None));
    let emails = stats
        .as_array()
        .expect("a list")
        .iter()
        .find(|s| s["queue"] == "emails")
        .cloned();
    assert_eq!(emails.expect("emails")["paused"], json!(true));
    ok(url, schema, &["resume", "emails"], None);

    // Prune everything finished before now (the discarded job).
    let pruned = json_of(&ok(
        url,
        schema,
        &["prune", "--older-than", "0s", "--json"],
        None,
    ));
    assert_eq!(pruned, json!({ "deleted": 1 }));
    fails(url, schema, &["show", &id.to_string()], 1);
}

/// `jobs`, and `run-now`, `discard` and `retry` by id and by filter.
async fn bulk_tour(url: &str, schema: Option<&str>) {
    ok(url, schema, &["migrate"], None);
    let enqueue = |args: &[&str]| -> i64 {
        let mut all = vec!["enqueue", "bulk", "{}", "--json"];
        all.extend_from_slice(args);
        json_of(&ok(url, schema, &all, None))["id"]
            .as_i64()
            .expect("an id")
    };
    let scheduled: Vec<i64> = (0..5).map(|_| enqueue(&["--delay", "1h"])).collect();
    let pending = enqueue(&[]);
    enqueue(&["--unique-key", "only-me"]);

    let listed = json_of(&ok(
        url,
        schema,
        &["jobs", "--queue", "bulk", "--state", "scheduled", "--json"],
        None,
    ));
    let ids: Vec<i64> = listed["jobs"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|j| j["job"]["id"].as_i64().expect("id"))
        .collect();
    let mut newest_first = scheduled.clone();
    newest_first.reverse();
    assert_eq!(ids, newest_first);
    let page = json_of(&ok(url, schema, &["jobs", "--limit", "2", "--json"], None));
    assert_eq!(page["jobs"].as_array().map(Vec::len), Some(2));
    assert!(page["next"].is_i64(), "{page}");
    let text = ok(url, schema, &["jobs", "--unique-key", "only-me"], None);
    assert_eq!(text.lines().count(), 2, "a header and one job: {text}");

    // A filter without --yes, standard input not a terminal: refused.
    let refused = fails(url, schema, &["run-now", "--queue", "bulk"], 2);
    assert!(
        refused.contains("run now 5 jobs") && refused.contains("--yes"),
        "{refused}"
    );
    fails(url, schema, &["run-now"], 2);
    fails(url, schema, &["discard", "1", "--queue", "bulk"], 2);
    let not_scheduled = fails(url, schema, &["run-now", &pending.to_string()], 1);
    assert!(not_scheduled.contains("not scheduled"), "{not_scheduled}");
    ok(url, schema, &["run-now", &scheduled[0].to_string()], None);
    let moved = json_of(&ok(
        url,
        schema,
        &["run-now", "--queue", "bulk", "--yes", "--json"],
        None,
    ));
    assert_eq!(moved, json!({ "made_available": 4 }));
    let stats = json_of(&ok(url, schema, &["stats", "--json"], None));
    assert_eq!(
        (stats[0]["pending"].clone(), stats[0]["scheduled"].clone()),
        (json!(7), json!(0))
    );

    let discarded = json_of(&ok(
        url,
        schema,
        &["discard", "--all", "--yes", "--json"],
        None,
    ));
    assert_eq!(discarded, json!({ "discarded": 7 }));
    let empty = json_of(&ok(url, schema, &["jobs", "--json"], None));
    assert_eq!(empty["jobs"], json!([]));

    // Dead letters, made through the library, retried by queue.
    let storage = queue::connect(url).await.expect("connect");
    let storage = match schema {
        Some(schema) => storage.with_schema(schema).expect("schema"),
        None => storage,
    };
    for _ in 0..3 {
        storage
            .enqueue(NewJob::new("failing", json!({})).max_attempts(1))
            .await
            .expect("enqueue");
    }
    let request = queue::DequeueRequest::new(
        vec![QueueName::new("failing").expect("name")],
        3,
        std::time::Duration::from_secs(30),
        queue::WorkerId::new("cli-test").expect("worker id"),
    )
    .expect("request");
    for job in storage.dequeue(&request).await.expect("dequeue") {
        storage
            .nack(
                job.lease().as_ref().expect("leased"),
                json!("no"),
                Retry::Never,
            )
            .await
            .expect("nack");
    }
    fails(url, schema, &["retry"], 2);
    let retried = json_of(&ok(
        url,
        schema,
        &["retry", "--queue", "failing", "--yes", "--json"],
        None,
    ));
    assert_eq!(retried, json!({ "retried": 3 }));
    let again = json_of(&ok(url, schema, &["retry", "--all", "--json"], None));
    assert_eq!(
        again,
        json!({ "retried": 0 }),
        "nothing left, nothing asked"
    );

    // A search of the payload, live and in history.
    let seven = json_of(&ok(
        url,
        schema,
        &["enqueue", "search", r#"{"customer_id": 7}"#, "--json"],
        None,
    ))["id"]
        .as_i64()
        .expect("an id");
    ok(
        url,
        schema,
        &["enqueue", "search", r#"{"customer_id": 8}"#],
        None,
    );
    let found = json_of(&ok(
        url,
        schema,
        &["jobs", "--where", "payload.customer_id = 7", "--json"],
        None,
    ));
    let ids: Vec<i64> = (found["jobs"].as_array().expect("a list").iter())
        .map(|j| j["job"]["id"].as_i64().expect("id"))
        .collect();
    assert_eq!(ids, vec![seven], "{found}");
    assert_eq!(found["budget_spent"], json!(false), "{found}");
    assert!(found["scanned"].as_u64().is_some_and(|n| n >= 2), "{found}");
    let spent = json_of(&ok(
        url,
        schema,
        &[
            "jobs",
            "--where",
            "payload.customer_id = 9",
            "--scan",
            "1",
            "--json",
        ],
        None,
    ));
    assert_eq!(spent["scanned"], json!(1), "{spent}");
    assert_eq!(spent["budget_spent"], json!(true), "{spent}");
    assert!(spent["next"].is_i64(), "{spent}");
    let history = json_of(&ok(
        url,
        schema,
        &["history", "--where", "payload.customer_id = 7", "--json"],
        None,
    ));
    assert_eq!(history["records"], json!([]), "{history}");
    let bad = fails(url, schema, &["jobs", "--where", "customer_id = 7"], 2);
    assert!(bad.contains("payload_match"), "{bad}");
    let bad = fails(
        url,
        schema,
        &["history", "--where", "payload.a = 1", "--scan", "0"],
        2,
    );
    assert!(bad.contains("scan"), "{bad}");
    fails(url, schema, &["jobs", "--scan", "5"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_on_postgres() {
    let schema = TestSchema::create().await;
    tour(schema.url(), Some(schema.name())).await;
    schema.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_on_mysql() {
    let db = TestDatabase::create().await;
    tour(&db.url(), None).await;
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_commands_on_postgres() {
    let schema = TestSchema::create().await;
    bulk_tour(schema.url(), Some(schema.name())).await;
    schema.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_commands_on_mysql() {
    let db = TestDatabase::create().await;
    bulk_tour(&db.url(), None).await;
    db.drop_database().await;
}

/// Dependencies from the command line: `enqueue --depends-on`, the waiting
/// state in `jobs` and `stats`, both ends of a link in `show`, and the
/// refusal of an unknown dependency (a usage error, nothing written).
async fn workflow_tour(url: &str, schema: Option<&str>) {
    ok(url, schema, &["migrate"], None);
    let first: i64 = ok(url, schema, &["enqueue", "q", "{}"], None)
        .trim()
        .parse()
        .expect("an id");
    let first_arg = first.to_string();
    let waiting = json_of(&ok(
        url,
        schema,
        &[
            "enqueue",
            "after",
            "{}",
            "--depends-on",
            &first_arg,
            "--json",
        ],
        None,
    ));
    let waiting_id = waiting["id"].as_i64().expect("an id");
    let listed = json_of(&ok(
        url,
        schema,
        &["jobs", "--state", "waiting", "--json"],
        None,
    ));
    let ids: Vec<i64> = listed["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|listed| listed["job"]["id"].as_i64().expect("id"))
        .collect();
    assert_eq!(ids, [waiting_id]);
    let stats = json_of(&ok(url, schema, &["stats", "--json"], None));
    let after = stats
        .as_array()
        .expect("stats")
        .iter()
        .find(|s| s["queue"] == json!("after"))
        .expect("stats of after")
        .clone();
    assert_eq!(
        (after["waiting"].clone(), after["pending"].clone()),
        (json!(1), json!(0)),
        "{after}"
    );
    let shown = json_of(&ok(
        url,
        schema,
        &["show", &waiting_id.to_string(), "--json"],
        None,
    ));
    assert_eq!(
        shown["links"]["dependencies"],
        json!([{
            "id": first,
            "queue": "q",
            "status": { "kind": "live", "state": "pending" },
            "result": null,
        }]),
        "{shown}"
    );
    let text = ok(url, schema, &["show", &waiting_id.to_string()], None);
    assert!(text.contains("depends on:"), "{text}");
    assert!(
        text.contains("available at:  once its dependencies have finished"),
        "{text}"
    );
    assert!(text.contains(&format!("{first:>10} q")), "{text}");
    let text = ok(url, schema, &["show", &first_arg], None);
    assert!(text.contains("dependants:"), "{text}");
    assert!(text.contains(&format!("{waiting_id:>10} after")), "{text}");

    // The waiting job is a batch's callback: a job joins it, and its
    // progress counts both; a job joining a job that does not wait is
    // refused (exit 1), nothing written.
    let waiting_arg = waiting_id.to_string();
    ok(
        url,
        schema,
        &["enqueue", "q", "{}", "--joins", &waiting_arg],
        None,
    );
    let text = ok(url, schema, &["show", &waiting_arg], None);
    assert!(
        text.contains(
            "depends on: 0 of 2 finished (0 completed, 0 dead-lettered, 0 discarded, 0 cancelled)"
        ),
        "{text}"
    );
    let closed = fails(
        url,
        schema,
        &["enqueue", "q", "{}", "--joins", &first_arg],
        1,
    );
    assert!(closed.contains("closed"), "{closed}");

    let refused = fails(
        url,
        schema,
        &["enqueue", "after", "{}", "--depends-on", "999999999"],
        2,
    );
    assert!(refused.contains("depends_on"), "{refused}");
    assert!(refused.contains("999999999"), "{refused}");
    fails(
        url,
        schema,
        &["enqueue", "after", "{}", "--run-if-dependency-fails"],
        2,
    );
    let stats = json_of(&ok(url, schema, &["stats", "--json"], None));
    let total: i64 = stats
        .as_array()
        .expect("stats")
        .iter()
        .map(|s| {
            ["pending", "scheduled", "waiting"]
                .iter()
                .map(|k| s[*k].as_i64().unwrap_or(0))
                .sum::<i64>()
        })
        .sum();
    assert_eq!(total, 3, "a refused enqueue wrote nothing: {stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependencies_on_postgres() {
    let schema = TestSchema::create().await;
    workflow_tour(schema.url(), Some(schema.name())).await;
    schema.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependencies_on_mysql() {
    let db = TestDatabase::create().await;
    workflow_tour(&db.url(), None).await;
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependencies_on_sqlite() {
    let path = format!("{}/cli-dependencies.db", env!("CARGO_TARGET_TMPDIR"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{path}{suffix}"));
    }
    workflow_tour(&format!("sqlite://{path}?mode=rwc"), None).await;
}

#[test]
fn usage_errors_are_one_line_with_exit_code_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_queue"))
        .arg("stats")
        .env_remove("QUEUE_DATABASE_URL")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "queue: no database: pass --database-url or set QUEUE_DATABASE_URL"
    );
    let stderr = fails("mongodb://127.0.0.1/", None, &["stats"], 2);
    assert!(
        stderr.contains("mongodb://127.0.0.1/: expected sqlite://, postgres://"),
        "{stderr}"
    );
}

#[test]
fn a_read_url_is_for_postgresql_and_one_line_when_refused() {
    let sqlite = format!(
        "sqlite://{}/read-url.db?mode=rwc",
        env!("CARGO_TARGET_TMPDIR")
    );
    let stderr = fails(
        &sqlite,
        None,
        &["--read-url", "postgres://127.0.0.1:9/x", "stats"],
        2,
    );
    assert!(
        stderr.contains("--read-url reads from a PostgreSQL standby; the sqlite backend has none"),
        "{stderr}"
    );
    let postgres = std::env::var("QUEUE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| panic!("QUEUE_TEST_POSTGRES_URL is not set (scripts/test.sh sets it)"));
    let stderr = fails(
        &postgres,
        None,
        &[
            "--read-url",
            "postgres://app:hunter2@127.0.0.1:9/app",
            "stats",
        ],
        1,
    );
    assert!(
        stderr.contains("--read-url postgres://app:***@127.0.0.1:9/app"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
    let stderr = fails(
        &postgres,
        None,
        &[
            "--read-url",
            "postgres://127.0.0.1:5441,127.0.0.1:5442/x",
            "stats",
        ],
        2,
    );
    assert!(stderr.contains("name one host"), "{stderr}");
}

#[test]
fn an_unreachable_server_is_one_line_naming_the_url_without_its_password() {
    let stderr = fails(
        "postgres://app:hunter2@127.0.0.1:9/app",
        None,
        &["stats"],
        1,
    );
    assert!(
        stderr.contains("postgres://app:***@127.0.0.1:9/app"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

#[test]
fn the_dashboard_refuses_to_listen_beyond_loopback_without_a_token() {
    let stderr = fails(
        "postgres://postgres@127.0.0.1:5432/queue_test",
        None,
        &["dashboard", "--bind", "0.0.0.0:0"],
        2,
    );
    assert!(stderr.contains("--token"), "{stderr}");
    let stderr = fails(
        "postgres://postgres@127.0.0.1:5432/queue_test",
        None,
        &["dashboard", "--token", "short"],
        2,
    );
    assert!(stderr.contains("16 or more"), "{stderr}");
    let stderr = fails(
        "postgres://postgres@127.0.0.1:5432/queue_test",
        None,
        &["dashboard", "--allowed-host", "dash example"],
        2,
    );
    assert!(stderr.contains("allowed host"), "{stderr}");
}

/// `queue dashboard` serves pages and /healthz over HTTP on a real database,
/// to loopback names and `--allowed-host`, not to others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_serves_the_overview_on_postgres() {
    use std::io::Read;
    use std::net::TcpStream;

    let schema = TestSchema::create().await;
    ok(schema.url(), Some(schema.name()), &["migrate"], None);
    ok(
        schema.url(),
        Some(schema.name()),
        &["enqueue", "emails", "{}"],
        None,
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut server = Command::new(env!("CARGO_BIN_EXE_queue"))
        .args([
            "dashboard",
            "--bind",
            &format!("127.0.0.1:{port}"),
            "--allowed-host",
            "dash.example.com",
        ])
        .env("QUEUE_DATABASE_URL", schema.url())
        .env("QUEUE_SCHEMA", schema.name())
        .stderr(Stdio::null())
        .spawn()
        .expect("the dashboard starts");
    let fetch_from = |host: &str, path: &str| -> Option<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
        write!(stream, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").ok()?;
        let mut text = String::new();
        stream.read_to_string(&mut text).ok()?;
        Some(text)
    };
    let fetch = |path: &str| fetch_from("localhost", path);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let health = loop {
        if let Some(reply) = fetch("/healthz") {
            break reply;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the dashboard never answered"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let overview = fetch("/").expect("the overview");
    let proxied = fetch_from("dash.example.com:443", "/").expect("the overview");
    let rebound = fetch_from("evil.example", "/").expect("a refusal");
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        health.starts_with("HTTP/1.0 200") && health.ends_with("ok\n"),
        "{health}"
    );
    assert!(overview.starts_with("HTTP/1.0 200"), "{overview}");
    assert!(overview.contains(">emails</a>"), "{overview}");
    assert!(proxied.starts_with("HTTP/1.0 200"), "{proxied}");
    assert!(rebound.starts_with("HTTP/1.0 421"), "{rebound}");
    schema.drop_schema().await;
}

/// Bytes that are not UTF-8 on standard input: a usage error in one line,
/// nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_that_is_not_utf8_is_refused_and_nothing_is_written() {
    use std::io::Write as _;

    let schema = TestSchema::create().await;
    ok(schema.url(), Some(schema.name()), &["migrate"], None);
    let mut child = Command::new(env!("CARGO_BIN_EXE_queue"))
        .args(["enqueue", "emails"])
        .env("QUEUE_DATABASE_URL", schema.url())
        .env("QUEUE_SCHEMA", schema.name())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"{\"to\": \"\xff\xfe\"}")
        .expect("write");
    let out = child.wait_with_output().expect("finishes");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let stats = json_of(&ok(
        schema.url(),
        Some(schema.name()),
        &["stats", "--json"],
        None,
    ));
    assert_eq!(stats, json!([]), "nothing written");
    schema.drop_schema().await;
}

/// `config`, `queues`, `cancel` and `schedules` on one database.
async fn flow_tour(url: &str, schema: Option<&str>) {
    ok(url, schema, &["migrate"], None);
    let none = ok(url, schema, &["queues"], None);
    assert_eq!(none.trim(), "no queue is paused or limited");
    ok(
        url,
        schema,
        &[
            "config",
            "mail",
            "--concurrency",
            "5",
            "--rate",
            "2.5",
            "--lease",
            "45s",
        ],
        None,
    );
    let listed = ok(url, schema, &["queues"], None);
    assert_eq!(
        listed.trim(),
        "mail: concurrency 5, 2.5/s (burst 3), lease 45s",
        "{listed}"
    );
    let json = json_of(&ok(url, schema, &["queues", "--json"], None));
    assert_eq!(json[0]["concurrency"], json!(5));
    assert_eq!(json[0]["burst"], json!(3));
    assert_eq!(json[0]["lease_ms"], json!(45_000));
    // A bad limit: a one-line usage error, and the settings unchanged.
    let refused = fails(url, schema, &["config", "mail", "--concurrency", "0"], 2);
    assert!(refused.contains("concurrency"), "{refused}");
    assert_eq!(ok(url, schema, &["queues"], None), listed);
    ok(url, schema, &["config", "mail"], None);
    let cleared = ok(url, schema, &["queues"], None);
    assert_eq!(cleared.trim(), "no queue is paused or limited");

    let id = json_of(&ok(url, schema, &["enqueue", "mail", "{}", "--json"], None))["id"]
        .as_i64()
        .expect("an id");
    ok(url, schema, &["cancel", &id.to_string()], None);
    let shown = json_of(&ok(url, schema, &["show", &id.to_string(), "--json"], None));
    assert!(shown.to_string().contains("\"cancelled\""), "{shown}");
    let again = fails(url, schema, &["cancel", &id.to_string()], 1);
    assert!(again.contains(&id.to_string()), "{again}");

    let schedules = ok(url, schema, &["schedules"], None);
    assert_eq!(schedules.trim(), "no periodic schedule has fired");
    assert_eq!(
        json_of(&ok(url, schema, &["schedules", "--json"], None)),
        json!([])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flow_commands_on_postgres() {
    let schema = TestSchema::create().await;
    flow_tour(schema.url(), Some(schema.name())).await;
    schema.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flow_commands_on_mysql() {
    let db = TestDatabase::create().await;
    flow_tour(&db.url(), None).await;
    db.drop_database().await;
}

/// `workers` lists what a worker registered, as a table and as JSON, and
/// nothing once it deregistered.
async fn workers_tour(url: &str, schema: Option<&str>) {
    ok(url, schema, &["migrate"], None);
    assert_eq!(
        ok(url, schema, &["workers"], None).trim(),
        "no worker is registered"
    );
    let storage = queue::connect(url).await.expect("connect");
    let storage = match schema {
        Some(schema) => storage.with_schema(schema).expect("schema"),
        None => storage,
    };
    let info = queue::WorkerInfo {
        id: queue::WorkerId::new("web-1-77-beef").expect("id"),
        host: "web-1".into(),
        pid: 77,
        version: "0.1.0".into(),
        queues: vec![queue::WorkerQueue {
            queue: QueueName::new("emails").expect("queue"),
            concurrency: 4,
        }],
        started_at: chrono::Utc::now(),
    };
    storage.register_worker(&info).await.expect("register");
    let listed = json_of(&ok(url, schema, &["workers", "--json"], None));
    assert_eq!(listed[0]["id"], json!("web-1-77-beef"), "{listed}");
    assert_eq!(listed[0]["status"], json!("live"));
    assert_eq!(listed[0]["pid"], json!(77));
    assert_eq!(
        listed[0]["queues"],
        json!([{ "queue": "emails", "concurrency": 4 }])
    );
    let text = ok(url, schema, &["workers"], None);
    assert!(
        text.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("web-1-77-beef")
                && l.contains(" live ")
                && l.ends_with("emails:4")),
        "{text}"
    );
    storage
        .deregister_worker(&info.id)
        .await
        .expect("deregister");
    assert_eq!(ok(url, schema, &["workers", "--json"], None).trim(), "[]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_on_postgres() {
    let schema = TestSchema::create().await;
    workers_tour(schema.url(), Some(schema.name())).await;
    schema.drop_schema().await;
}

/// `group-limit` gives one group of a configured queue its own limit,
/// `groups` lists it (and as JSON), `--clear` lifts it; a queue without a
/// config row, a limit of 0 and an empty group key are refused in one
/// line with nothing written; `enqueue --group` stores the job's group,
/// which `show` prints.
#[test]
fn group_limit_sets_lists_and_lifts_one_groups_limit() {
    let path = format!("{}/group-limit.db", env!("CARGO_TARGET_TMPDIR"));
    let _ = std::fs::remove_file(&path);
    let url = format!("sqlite://{path}?mode=rwc");
    ok(&url, None, &["migrate"], None);
    let unconfigured = fails(&url, None, &["group-limit", "imports", "big", "3"], 1);
    assert!(unconfigured.contains("queue_config"), "{unconfigured}");
    ok(
        &url,
        None,
        &["config", "imports", "--group-concurrency", "1"],
        None,
    );
    ok(&url, None, &["group-limit", "imports", "big", "3"], None);
    let zero = fails(&url, None, &["group-limit", "imports", "big", "0"], 2);
    assert!(zero.contains("limit"), "{zero}");
    let empty = fails(&url, None, &["group-limit", "imports", "", "2"], 2);
    assert!(empty.contains("group"), "{empty}");
    let listed = ok(&url, None, &["groups"], None);
    assert_eq!(listed.trim(), "imports/big: limit 3", "{listed}");
    let json = json_of(&ok(&url, None, &["groups", "--json"], None));
    assert_eq!(
        json,
        json!([{ "queue": "imports", "group": "big", "limit": 3 }])
    );
    fails(&url, None, &["group-limit", "imports", "big"], 2);
    ok(
        &url,
        None,
        &["group-limit", "imports", "big", "--clear"],
        None,
    );
    assert_eq!(
        ok(&url, None, &["groups"], None).trim(),
        "no group has its own limit or weight"
    );
    let id = ok(
        &url,
        None,
        &["enqueue", "imports", "{}", "--group", "customer-7"],
        None,
    );
    let shown = ok(&url, None, &["show", id.trim()], None);
    assert!(shown.contains("customer-7"), "{shown}");
}

/// `config --group-concurrency` on SQLite, which has group limits: set,
/// listed and shown as JSON; 0 refused naming the field, nothing changed;
/// a later `config` without it lifts it.
#[test]
fn config_sets_a_group_concurrency() {
    let path = format!("{}/group-concurrency.db", env!("CARGO_TARGET_TMPDIR"));
    let _ = std::fs::remove_file(&path);
    let url = format!("sqlite://{path}?mode=rwc");
    ok(&url, None, &["migrate"], None);
    ok(
        &url,
        None,
        &["config", "imports", "--group-concurrency", "2"],
        None,
    );
    let listed = ok(&url, None, &["queues"], None);
    assert_eq!(listed.trim(), "imports: group concurrency 2", "{listed}");
    let json = json_of(&ok(&url, None, &["queues", "--json"], None));
    assert_eq!(json[0]["group_concurrency"], json!(2));
    let refused = fails(
        &url,
        None,
        &["config", "imports", "--group-concurrency", "0"],
        2,
    );
    assert!(refused.contains("group_concurrency"), "{refused}");
    assert_eq!(ok(&url, None, &["queues"], None), listed);
    ok(&url, None, &["config", "imports"], None);
    let cleared = ok(&url, None, &["queues"], None);
    assert_eq!(cleared.trim(), "no queue is paused or limited");
}

/// `config --fair-groups` where the storage claims fairly between groups:
/// set, listed and shown as JSON; a later `config` without it lifts it.
fn fair_groups_tour(url: &str, schema: Option<&str>) {
    ok(url, schema, &["migrate"], None);
    ok(
        url,
        schema,
        &["config", "tenants", "--concurrency", "4", "--fair-groups"],
        None,
    );
    let listed = ok(url, schema, &["queues"], None);
    assert_eq!(
        listed.trim(),
        "tenants: concurrency 4, fair groups",
        "{listed}"
    );
    let json = json_of(&ok(url, schema, &["queues", "--json"], None));
    assert_eq!(json[0]["fair_groups"], json!(true));
    ok(url, schema, &["config", "tenants"], None);
    let cleared = ok(url, schema, &["queues"], None);
    assert_eq!(cleared.trim(), "no queue is paused or limited");
}

#[test]
fn config_sets_fair_groups_on_sqlite() {
    let path = format!("{}/fair-groups.db", env!("CARGO_TARGET_TMPDIR"));
    let _ = std::fs::remove_file(&path);
    fair_groups_tour(&format!("sqlite://{path}?mode=rwc"), None);
}

/// On PostgreSQL (whose first `config --fair-groups` also builds the index
/// the fair claim reads: `migrations::an_upgrade_to_fair_groups_keeps_jobs_and_limits`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_sets_fair_groups_on_postgres() {
    let schema = TestSchema::create().await;
    let (url, name) = (schema.url().to_owned(), schema.name().to_owned());
    tokio::task::spawn_blocking(move || fair_groups_tour(&url, Some(&name)))
        .await
        .expect("the tour");
    schema.drop_schema().await;
}

/// On MySQL / MariaDB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_sets_fair_groups_on_mysql() {
    let db = TestDatabase::create().await;
    let url = db.url();
    tokio::task::spawn_blocking(move || fair_groups_tour(&url, None))
        .await
        .expect("the tour");
    db.drop_database().await;
}

/// `config --priority-aging` on SQLite, which has priority aging: set,
/// listed and shown as JSON; a period under a second refused in one line
/// naming the field, nothing changed; a later `config` without it lifts
/// it.
#[test]
fn config_sets_a_priority_aging_period() {
    let path = format!("{}/priority-aging.db", env!("CARGO_TARGET_TMPDIR"));
    let _ = std::fs::remove_file(&path);
    let url = format!("sqlite://{path}?mode=rwc");
    ok(&url, None, &["migrate"], None);
    ok(
        &url,
        None,
        &["config", "reports", "--priority-aging", "90s"],
        None,
    );
    let listed = ok(&url, None, &["queues"], None);
    assert_eq!(listed.trim(), "reports: priority aging 90s", "{listed}");
    let json = json_of(&ok(&url, None, &["queues", "--json"], None));
    assert_eq!(json[0]["priority_aging_ms"], json!(90_000));
    let refused = fails(
        &url,
        None,
        &["config", "reports", "--priority-aging", "500ms"],
        2,
    );
    assert!(refused.contains("priority_aging"), "{refused}");
    assert_eq!(refused.trim().lines().count(), 1, "{refused}");
    assert_eq!(ok(&url, None, &["queues"], None), listed);
    ok(&url, None, &["config", "reports"], None);
    let cleared = ok(&url, None, &["queues"], None);
    assert_eq!(cleared.trim(), "no queue is paused or limited");
}

/// `group-weight` gives one group of a fair queue its own weight, which
/// orders the claims and `groups` lists beside the group's limit (and as
/// JSON); `--clear` lifts it; a weight of 0, above 1000 or negative, and
/// a queue without a config row are refused in one line with nothing
/// written.
#[tokio::test]
async fn group_weight_sets_lists_and_lifts_one_groups_weight() {
    let path = format!("{}/group-weight.db", env!("CARGO_TARGET_TMPDIR"));
    let _ = std::fs::remove_file(&path);
    let url = format!("sqlite://{path}?mode=rwc");
    ok(&url, None, &["migrate"], None);
    let unconfigured = fails(&url, None, &["group-weight", "imports", "big", "3"], 1);
    assert!(unconfigured.contains("queue_config"), "{unconfigured}");
    ok(&url, None, &["config", "imports", "--fair-groups"], None);
    ok(&url, None, &["group-weight", "imports", "big", "3"], None);
    ok(&url, None, &["group-limit", "imports", "big", "5"], None);
    ok(&url, None, &["group-weight", "imports", "small", "1"], None);
    for (weight, exit) in [("0", 2), ("1001", 2), ("-1", 2)] {
        let refused = fails(
            &url,
            None,
            &["group-weight", "imports", "big", weight],
            exit,
        );
        assert_eq!(refused.trim().lines().count(), 1, "{refused}");
        assert!(
            refused.contains("weight") || refused.contains("WEIGHT"),
            "{refused}"
        );
    }
    let listed = ok(&url, None, &["groups"], None);
    assert_eq!(
        listed.trim(),
        "imports/big: limit 5, weight 3\nimports/small: weight 1",
        "{listed}"
    );
    let json = json_of(&ok(&url, None, &["groups", "--json"], None));
    assert_eq!(
        json,
        json!([
            { "queue": "imports", "group": "big", "limit": 5, "weight": 3 },
            { "queue": "imports", "group": "small", "weight": 1 }
        ])
    );
    // Three of big's jobs for one of small's.
    for group in ["big", "big", "big", "big", "small", "small"] {
        ok(
            &url,
            None,
            &["enqueue", "imports", "{}", "--group", group],
            None,
        );
    }
    let storage = queue::connect(&url).await.expect("connect");
    let request = queue::DequeueRequest::new(
        vec![QueueName::new("imports").expect("name")],
        5,
        std::time::Duration::from_secs(30),
        queue::WorkerId::new("cli-test").expect("worker id"),
    )
    .expect("request");
    let claimed = storage.dequeue(&request).await.expect("dequeue");
    let groups: Vec<&str> = (claimed.iter())
        .map(|job| job.group_key.as_ref().expect("a group").as_str())
        .collect();
    assert_eq!(groups, ["big", "big", "big", "small", "big"]);
    ok(
        &url,
        None,
        &["group-weight", "imports", "big", "--clear"],
        None,
    );
    ok(
        &url,
        None,
        &["group-weight", "imports", "small", "--clear"],
        None,
    );
    assert_eq!(
        ok(&url, None, &["groups"], None).trim(),
        "imports/big: limit 5"
    );
}
