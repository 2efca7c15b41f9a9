//! `queue-bench portable`, the public benchmark's adapter, run as the
//! harness runs it: the built binary with its environment, JSONL read from
//! standard output, SIGTERM at the end.
//!
//! - A 6 s run at 200 jobs/s with 4 handlers and 1 s ticks: every line is
//!   JSON, the first the descriptor (matching `adapter.json`), every tick
//!   on a whole second with every required metric and sane values; SIGTERM
//!   ends it with status 0 within 5 s, and the database holds at least the
//!   completions reported.
//! - Depth-target mode: the producer keeps the queue near `TARGET_DEPTH`
//!   while the handlers drain it, neither stalling nor overfilling.
//! - Harness pacing: `ENQUEUE <n>` lines on standard input are inserted,
//!   scaled by the rate-control file.
//! - Bad input is refused with one line on standard error and status 2,
//!   before any connection.
//!
//! The server comes from `QUEUE_TEST_POSTGRES_URL` (scripts/test.sh sets
//! it); each test runs in a schema of its own, dropped afterwards.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_queue-bench");
const REQUIRED: [&str; 6] = [
    "claim_p50_ms",
    "claim_p95_ms",
    "claim_p99_ms",
    "enqueue_rate",
    "completion_rate",
    "queue_depth",
];

fn server_url() -> String {
    std::env::var("QUEUE_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "QUEUE_TEST_POSTGRES_URL is not set: set it to a reachable server (scripts/test.sh does)"
        )
    })
}

/// A schema of the test's own, dropped before and after.
struct Schema {
    name: String,
    url: String,
    runtime: tokio::runtime::Runtime,
    pool: sqlx::PgPool,
}

impl Schema {
    fn new(test: &str) -> Self {
        let url = server_url();
        let name = format!("queue_test_portable_{test}_{}", std::process::id());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        // On a fresh server the test database does not exist yet: the
        // testkit's harness creates it (with a schema, dropped at once).
        runtime.block_on(async {
            queue_testkit::harness::postgres::TestSchema::create()
                .await
                .drop_schema()
                .await;
        });
        let pool = runtime
            .block_on(
                sqlx::postgres::PgPoolOptions::new()
                    .max_connections(1)
                    .connect(&url),
            )
            .expect("the test server is reachable");
        let schema = Self {
            name,
            url,
            runtime,
            pool,
        };
        schema.drop_schema();
        schema
    }

    fn drop_schema(&self) {
        let sql = format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name);
        self.runtime
            .block_on(sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&self.pool))
            .expect("drop the test schema");
    }

    fn count(&self, sql: &str) -> i64 {
        let sql = sql.replace("{schema}", &self.name);
        self.runtime
            .block_on(sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql)).fetch_one(&self.pool))
            .expect("count")
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        self.drop_schema();
    }
}

/// The adapter running, its output collected line by line.
struct Adapter {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Adapter {
    /// Waits up to a minute for the first line (the descriptor, written
    /// after migrating), failing at once if the adapter exits first.
    fn wait_for_first_line(&mut self) {
        let until = Instant::now() + Duration::from_secs(60);
        while self.stdout().is_empty() && Instant::now() < until {
            assert_eq!(
                self.child.try_wait().expect("wait"),
                None,
                "{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn start(env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(BIN);
        command
            .arg("portable")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("the benchmark binary runs");
        let stdout = Arc::default();
        let stderr = Arc::default();
        if let Some(out) = child.stdout.take() {
            collect(out, Arc::clone(&stdout));
        }
        if let Some(err) = child.stderr.take() {
            collect(err, Arc::clone(&stderr));
        }
        let stdin = child.stdin.take();
        Self {
            child,
            stdin,
            stdout,
            stderr,
        }
    }

    fn stdout(&self) -> Vec<String> {
        self.stdout
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .join("\n")
    }

    /// Waits up to `limit` for the process to exit; its status code.
    fn wait_for_exit(&mut self, limit: Duration) -> Option<i32> {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return Some(status.code().unwrap_or(-1));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    fn sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -TERM failed");
    }
}

impl Drop for Adapter {
    fn drop(&mut self) {
        // A failed assertion mid-run: the adapter does not outlive the test.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn collect(stream: impl std::io::Read + Send + 'static, lines: Arc<Mutex<Vec<String>>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            lines
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(line);
        }
    });
}

/// `adapter.json`, its schema replaced by `schema`.
fn manifest_list(key: &str, schema: &str) -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../bench/portable/queue-bench/adapter.json"
    );
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("adapter.json")).expect("json");
    assert_eq!(manifest["system"], "queue-rs");
    manifest[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in adapter.json"))
        .iter()
        .map(|v| {
            let name = v.as_str().expect("a string");
            let (s, rest) = name.split_once('.').expect("schema.name");
            assert_eq!(s, "queue_rs", "{name}");
            format!("{schema}.{rest}")
        })
        .collect()
}

fn sorted(mut list: Vec<String>) -> Vec<String> {
    list.sort();
    list
}

#[test]
fn a_run_reports_every_metric_every_tick_and_stops_on_sigterm() {
    let schema = Schema::new("run");
    let mut adapter = Adapter::start(&[
        ("DATABASE_URL", &schema.url),
        ("QUEUE_RS_SCHEMA", &schema.name),
        ("SCENARIO", "long_horizon"),
        ("PRODUCER_MODE", "fixed"),
        ("PRODUCER_RATE", "200"),
        ("WORKER_COUNT", "4"),
        ("SAMPLE_EVERY_S", "1"),
        ("BENCH_INSTANCE_ID", "2"),
    ]);
    // The descriptor comes after migrating; then ~6 s of ticks.
    adapter.wait_for_first_line();
    std::thread::sleep(Duration::from_millis(6_300));
    adapter.sigterm();
    let signalled = Instant::now();
    let code = adapter.wait_for_exit(Duration::from_secs(5));
    assert_eq!(
        code,
        Some(0),
        "exit within 5 s of SIGTERM\n{}",
        adapter.stderr()
    );
    assert!(signalled.elapsed() < Duration::from_secs(5));
    // The reader threads see end of file once the process is gone.
    std::thread::sleep(Duration::from_millis(200));
    let lines = adapter.stdout();
    let stderr = adapter.stderr();
    let records: Vec<Value> = lines
        .iter()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n{stderr}"))
        })
        .collect();

    // The descriptor, first, as adapter.json says.
    let descriptor = &records[0];
    assert_eq!(descriptor["kind"], "descriptor", "{descriptor}");
    assert_eq!(descriptor["system"], "queue-rs");
    assert_eq!(descriptor["instance_id"], 2);
    assert_eq!(descriptor["extensions"], serde_json::json!([]));
    let db_name = schema.url.rsplit('/').next().expect("a database");
    assert_eq!(descriptor["db_name"], db_name);
    assert!(
        descriptor["started_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert!(
        descriptor["version"]
            .as_str()
            .is_some_and(|v| !v.is_empty())
    );
    assert!(
        descriptor["schema_version"]
            .as_str()
            .and_then(|v| v.parse::<u32>().ok())
            .is_some_and(|v| v >= 11),
        "{descriptor}"
    );
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .expect("a list")
            .iter()
            .map(|s| s.as_str().expect("a string").to_owned())
            .collect()
    };
    assert_eq!(
        strings(&descriptor["event_tables"]),
        manifest_list("event_tables", &schema.name)
    );
    assert_eq!(
        sorted(strings(&descriptor["event_indexes"])),
        sorted(manifest_list("event_indexes", &schema.name)),
        "the indexes the migrations create differ from adapter.json's"
    );

    // The samples, grouped by tick.
    let mut ticks: BTreeMap<String, BTreeMap<String, (f64, f64)>> = BTreeMap::new();
    for record in &records[1..] {
        assert_eq!(record["kind"], "adapter", "{record}");
        assert_eq!(record["subject_kind"], "adapter", "{record}");
        assert_eq!(record["system"], "queue-rs", "{record}");
        assert_eq!(record["instance_id"], 2, "{record}");
        let t = record["t"].as_str().expect("t").to_owned();
        let metric = record["metric"].as_str().expect("metric").to_owned();
        let value = record["value"].as_f64().expect("value");
        let window = record["window_s"].as_f64().expect("window_s");
        assert!(value.is_finite() && value >= 0.0, "{record}");
        let previous = ticks.entry(t).or_default().insert(metric, (value, window));
        assert!(previous.is_none(), "a metric twice in one tick: {record}");
    }
    assert!(
        ticks.len() >= 5,
        "{} ticks in ~6 s:\n{}",
        ticks.len(),
        lines.join("\n")
    );
    let times: Vec<chrono::DateTime<chrono::Utc>> = ticks
        .keys()
        .map(|t| {
            assert!(t.ends_with(".000Z"), "not on a whole second: {t}");
            t.parse().expect("an ISO time")
        })
        .collect();
    for pair in times.windows(2) {
        assert_eq!(pair[1] - pair[0], chrono::Duration::seconds(1), "{times:?}");
    }
    let mut enqueued = 0.0;
    let mut completed = 0.0;
    for (i, (t, metrics)) in ticks.iter().enumerate() {
        // Jobs may not have started before the very first tick; from the
        // second on, every required metric is there.
        let required: &[&str] = if i == 0 { &REQUIRED[3..] } else { &REQUIRED };
        for metric in required {
            assert!(
                metrics.contains_key(*metric),
                "{metric} missing at {t}: {metrics:?}"
            );
        }
        // The rates' window is the real time since the previous tick:
        // part of a second at the first, about a second after.
        let (enqueue_rate, w) = metrics["enqueue_rate"];
        let (completion_rate, w2) = metrics["completion_rate"];
        assert_eq!(w, w2, "{t}: {metrics:?}");
        if i == 0 {
            assert!(0.0 < w && w <= 1.1, "{t}: {metrics:?}");
        } else {
            assert!((w - 1.0).abs() < 0.1, "{t}: {metrics:?}");
        }
        assert_eq!(metrics["queue_depth"].1, 0.0);
        enqueued += enqueue_rate * w;
        completed += completion_rate * w;
        if i == 0 {
            continue;
        }
        assert!(
            completion_rate > 0.0,
            "nothing completed at {t}: {metrics:?}"
        );
        assert!(
            (100.0..=300.0).contains(&enqueue_rate),
            "enqueue rate {enqueue_rate} at {t}, 200 offered"
        );
        let (p50, w) = metrics["claim_p50_ms"];
        assert_eq!(w, 30.0);
        let (p95, _) = metrics["claim_p95_ms"];
        let (p99, _) = metrics["claim_p99_ms"];
        assert!(0.0 < p50 && p50 <= p95 && p95 <= p99, "{t}: {metrics:?}");
        assert!(p99 < 5_000.0, "pickup p99 {p99} ms at {t}");
        // 4 handlers at 1 ms each keep up with 200 jobs/s.
        assert!(metrics["queue_depth"].0 < 200.0, "{t}: {metrics:?}");
    }
    // The ticks' rates times their windows add up to the run's jobs (as
    // the harness integrates them; to a job, rates being rounded), and
    // every completion reported is an ack the database holds.
    let in_history = schema
        .count("SELECT count(*) FROM \"{schema}\".job_history WHERE status_final = 'completed'");
    let in_queue = schema.count("SELECT count(*) FROM \"{schema}\".job_queue");
    assert!(enqueued >= 800.0, "{enqueued} jobs reported enqueued");
    assert!(completed >= 700.0, "{completed} jobs reported completed");
    assert!(
        in_history as f64 >= completed - 1.0,
        "{completed} completions reported, {in_history} in history"
    );
    assert!(
        (in_history + in_queue) as f64 >= enqueued - 1.0,
        "{enqueued} enqueues reported, {in_history} + {in_queue} jobs in the tables"
    );
    assert!(
        stderr.contains("queue-bench portable: stopping"),
        "{stderr}"
    );
}

/// The metrics of every tick after the first, in time order.
fn tick_metrics(lines: &[String]) -> Vec<BTreeMap<String, f64>> {
    let mut ticks: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    for line in lines.iter().skip(1) {
        let record: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let t = record["t"].as_str().expect("t").to_owned();
        let metric = record["metric"].as_str().expect("metric").to_owned();
        let value = record["value"].as_f64().expect("value");
        ticks.entry(t).or_default().insert(metric, value);
    }
    ticks.into_values().skip(1).collect()
}

/// `PRODUCER_MODE=depth-target`: 8 handlers taking 20 ms a job drain about
/// 400 jobs/s; the producer tops the queue up to `TARGET_DEPTH` (300) as
/// they do. From the third second on, every tick's depth is near the
/// target (the producer neither stalls, leaving the queue empty, nor
/// overfills it), jobs complete steadily, and as many are enqueued as
/// completed.
#[test]
fn depth_target_mode_keeps_the_queue_near_its_target() {
    let schema = Schema::new("depth");
    let mut adapter = Adapter::start(&[
        ("DATABASE_URL", &schema.url),
        ("QUEUE_RS_SCHEMA", &schema.name),
        ("PRODUCER_MODE", "depth-target"),
        ("TARGET_DEPTH", "300"),
        ("PRODUCER_BATCH_MAX", "100"),
        ("WORKER_COUNT", "8"),
        ("JOB_WORK_MS", "20"),
        ("SAMPLE_EVERY_S", "1"),
    ]);
    adapter.wait_for_first_line();
    std::thread::sleep(Duration::from_millis(7_300));
    adapter.sigterm();
    assert_eq!(
        adapter.wait_for_exit(Duration::from_secs(5)),
        Some(0),
        "{}",
        adapter.stderr()
    );
    std::thread::sleep(Duration::from_millis(200));
    let ticks = tick_metrics(&adapter.stdout());
    assert!(ticks.len() >= 5, "{} ticks: {ticks:?}", ticks.len());
    let steady = &ticks[1..];
    let (mut enqueued, mut completed) = (0.0, 0.0);
    for metrics in steady {
        let depth = metrics["queue_depth"];
        assert!(
            (150.0..=450.0).contains(&depth),
            "depth {depth} with a target of 300: {ticks:?}"
        );
        assert!(
            metrics["completion_rate"] >= 100.0,
            "the handlers starved: {ticks:?}"
        );
        enqueued += metrics["enqueue_rate"];
        completed += metrics["completion_rate"];
    }
    assert!(
        (enqueued - completed).abs() <= 0.2 * completed,
        "{enqueued} enqueued against {completed} completed over the steady ticks: {ticks:?}"
    );
    assert!(
        schema.count("SELECT count(*) FROM \"{schema}\".job_queue") <= 450,
        "the queue was overfilled"
    );
}

#[test]
fn harness_tokens_are_inserted_scaled_by_the_control_file() {
    let schema = Schema::new("tokens");
    let dir = std::env::temp_dir().join(format!("queue-rs-portable-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let control = dir.join("producer_rate.txt");
    // Launched at 100 jobs/s; the file says 150 (a high-load phase).
    std::fs::write(&control, "150.0").expect("control file");
    let mut adapter = Adapter::start(&[
        ("DATABASE_URL", &schema.url),
        ("QUEUE_RS_SCHEMA", &schema.name),
        ("PRODUCER_PACING", "harness"),
        ("PRODUCER_RATE", "100"),
        ("PRODUCER_BATCH_MAX", "64"),
        ("PRODUCER_RATE_CONTROL_FILE", &control.display().to_string()),
        ("WORKER_COUNT", "8"),
        ("JOB_WORK_MS", "0"),
        ("SAMPLE_EVERY_S", "1"),
    ]);
    adapter.wait_for_first_line();
    // 6 tokens of 100: 900 jobs at 1.5x, in batches of at most 64.
    let mut stdin = adapter.stdin.take().expect("stdin");
    for _ in 0..6 {
        stdin.write_all(b"ENQUEUE 100\n").expect("write a token");
    }
    stdin.write_all(b"something else\n").expect("write");
    stdin.flush().expect("flush");
    let total = "SELECT (SELECT count(*) FROM \"{schema}\".job_queue) \
                 + (SELECT count(*) FROM \"{schema}\".job_history)";
    let until = Instant::now() + Duration::from_secs(20);
    while schema.count(total) < 900 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    // No more than the tokens asked for, even a while later.
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(schema.count(total), 900, "{}", adapter.stderr());
    adapter.sigterm();
    assert_eq!(adapter.wait_for_exit(Duration::from_secs(5)), Some(0));
    drop(stdin);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_is_refused_in_one_line_before_connecting() {
    // Nothing listens on port 1: a run that tried to connect would keep
    // retrying for a minute, not exit at once.
    let unreachable = "postgres://bench@127.0.0.1:1/queue_rs_bench";
    for (key, value, expected) in [
        (
            "SCENARIO",
            "chaos_crash_recovery",
            "SCENARIO=chaos_crash_recovery",
        ),
        ("PRODUCER_RATE", "fast", "PRODUCER_RATE=fast"),
        ("WORKER_COUNT", "0", "WORKER_COUNT=0"),
        ("PRODUCER_MODE", "burst", "PRODUCER_MODE=burst"),
        ("SAMPLE_EVERY_S", "-1", "SAMPLE_EVERY_S=-1"),
    ] {
        let started = Instant::now();
        let mut adapter = Adapter::start(&[("DATABASE_URL", unreachable), (key, value)]);
        let code = adapter.wait_for_exit(Duration::from_secs(5));
        assert_eq!(code, Some(2), "{key}={value}: {}", adapter.stderr());
        assert!(started.elapsed() < Duration::from_secs(3), "{key}={value}");
        std::thread::sleep(Duration::from_millis(100));
        let stderr = adapter.stderr();
        assert_eq!(stderr.lines().count(), 1, "{key}={value}: {stderr}");
        assert!(stderr.starts_with("queue-bench portable: "), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
        assert!(adapter.stdout().is_empty(), "{:?}", adapter.stdout());
    }
    // No database at all, and an argument the adapter does not take.
    let mut adapter = Adapter::start(&[]);
    assert_eq!(adapter.wait_for_exit(Duration::from_secs(5)), Some(2));
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        adapter.stderr(),
        "queue-bench portable: DATABASE_URL is not set"
    );
    let mut extra = Command::new(BIN)
        .args(["portable", "--rate", "5"])
        .env("DATABASE_URL", unreachable)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    let status = extra.wait().expect("exits");
    assert_eq!(status.code(), Some(2));
}
