//! Runs every workload of the benchmark binary at a tiny size on each
//! server, so the benchmark cannot rot: each run verifies its own drains
//! (every job completed once, archived, none left) and fails otherwise.
//!
//! Servers come from `QUEUE_TEST_POSTGRES_URL` / `QUEUE_TEST_MYSQL_URL` /
//! `QUEUE_TEST_REDIS_URL`
//! (scripts/test.sh sets them); without them the test fails. The benchmark
//! creates the PostgreSQL database when it is missing.
//!
//! `hosts` (worker processes of the benchmark binary against one server)
//! runs apart from `smoke`, on the servers only: its processes each open
//! the schema the run made, which a SQLite file per measurement does not
//! allow.

use std::process::Command;

fn server_url(url_var: &str) -> String {
    std::env::var(url_var).unwrap_or_else(|_| {
        panic!("{url_var} is not set: set it to a reachable server (scripts/test.sh does)")
    })
}

fn smoke(backend: &str, url: &str, schema: &str) {
    let output = Command::new(env!("CARGO_BIN_EXE_queue-bench"))
        .args([
            "--backend",
            backend,
            "--url",
            url,
            "--schema",
            schema,
            "smoke",
        ])
        .output()
        .expect("the benchmark binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "queue-bench {backend} smoke failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let results: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("result "))
        .collect();
    // Every backend has group keys (`Capability::GroupLimits`) and
    // dependencies (`Capability::Dependencies`; Redis standalone only,
    // which the smoke runs on).
    let fairness = ["fairness_groups", "fairness_tenants"];
    let workflow = ["workflow"];
    for workload in [
        "enqueue",
        "drain",
        "latency",
        "scheduled_backlog",
        "idle_claim",
        "scheduled",
        "backlog",
        "ops",
        "inspect",
        "soak_sample",
        "soak",
    ]
    .iter()
    .chain(&fairness)
    .chain(&workflow)
    {
        assert!(
            results
                .iter()
                .any(|l| l.contains(&format!("backend={backend} workload={workload} "))),
            "no {workload} result in:\n{stdout}"
        );
    }
    // enqueue batch + single, drain at two concurrencies, latency, the
    // scheduled backlog's enqueue, idle claims, scheduled, backlog empty +
    // two variants, eleven storage operations, three soak samples and the
    // soak's summary; with groups, the group drain and the tenants' lag;
    // with dependencies, the workflow's row.
    let (reads, others): (Vec<&&str>, Vec<&&str>) = results
        .iter()
        .partition(|l| l.contains(" workload=inspect "));
    assert_eq!(
        others.len(),
        26 + fairness.len() + workflow.len(),
        "{stdout}"
    );
    // The operator reads: stats, the overview, throughput, every listing
    // and every page, each listing or page against its target.
    for read in [
        "read=stats ",
        "read=overview ",
        "read=list_jobs(queue,state=running) ",
        "read=list_jobs(queue of retries,state=scheduled) ",
        "read=list_dead_letters ",
        "read=page / ",
        "read=page /jobs?state=scheduled ",
    ] {
        assert!(
            reads.iter().any(|l| l.contains(read)),
            "no inspect {read} in:\n{stdout}"
        );
    }
    assert!(
        reads.len() >= 50,
        "{} operator reads: {stdout}",
        reads.len()
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with(&format!("settings backend={backend} ")))
    );
}

/// `hosts` at a tiny size: one and two worker processes, then the limit
/// check at two; the results present and the limit held, with more
/// leases than the limit at once when there was none. The limit check
/// drains 600 jobs: at 200, a CI run (the three backends' checks at once
/// on two cores) saw no lease at all in MariaDB's unlimited drain, over
/// in a quarter of a second.
fn hosts(backend: &str, url: &str, schema: &str) {
    let limit = 3;
    let output = Command::new(env!("CARGO_BIN_EXE_queue-bench"))
        .args(["--backend", backend, "--url", url, "--schema", schema])
        .args(["hosts", "--n", "200", "--procs", "1,2", "--limit-n", "600"])
        .args(["--limit", &limit.to_string()])
        .output()
        .expect("the benchmark binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "queue-bench {backend} hosts failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for procs in [1, 2] {
        let prefix = format!("result backend={backend} workload=hosts procs={procs} c=16 n=200 ");
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no hosts result at {procs} processes in:\n{stdout}"));
        assert!(figure(line, "jobs_per_s") > 0, "{line}");
    }
    let prefix = format!("result backend={backend} workload=hosts_limit procs=2 ");
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no hosts_limit result in:\n{stdout}"));
    assert!(line.contains(" held=true"), "{line}");
    let limited = figure(line, "limited_max_leased");
    assert!((1..=limit).contains(&limited), "{line}");
    assert!(figure(line, "unlimited_max_leased") > limit, "{line}");
}

/// The whole-number figure `key` of a result line.
fn figure(line: &str, key: &str) -> u64 {
    line.split_whitespace()
        .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no whole number {key} in {line}"))
}

#[test]
fn hosts_run_on_postgres() {
    hosts(
        "postgres",
        &server_url("QUEUE_TEST_POSTGRES_URL"),
        "queue_test_bench_hosts",
    );
}

#[test]
fn hosts_run_on_mysql() {
    hosts(
        "mysql",
        &server_url("QUEUE_TEST_MYSQL_URL"),
        "queue_test_bench_hosts",
    );
}

#[test]
fn hosts_run_on_redis() {
    hosts(
        "redis",
        &server_url("QUEUE_TEST_REDIS_URL"),
        "queue_test_bench_hosts",
    );
}

#[test]
fn every_workload_runs_on_postgres() {
    smoke(
        "postgres",
        &server_url("QUEUE_TEST_POSTGRES_URL"),
        "queue_test_bench_smoke",
    );
}

#[test]
fn every_workload_runs_on_mysql() {
    smoke(
        "mysql",
        &server_url("QUEUE_TEST_MYSQL_URL"),
        "queue_test_bench_smoke",
    );
}

#[test]
fn every_workload_runs_on_sqlite() {
    let url = format!(
        "sqlite://{}/queue-bench-smoke.db?mode=rwc",
        env!("CARGO_TARGET_TMPDIR")
    );
    smoke("sqlite", &url, "unused");
}

#[test]
fn every_workload_runs_on_redis() {
    smoke(
        "redis",
        &server_url("QUEUE_TEST_REDIS_URL"),
        "queue_test_bench_smoke",
    );
}
