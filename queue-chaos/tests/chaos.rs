//! The chaos schedule of CI on each backend: about a minute of SIGKILLs
//! (one a second), 5 freezes past the lease, 20 connection cuts and one
//! restart of the database server, in transactional mode; then half a
//! minute in plain mode. Each run checks its own history and exits 1 on a
//! violation.
//!
//! They are `#[ignore]`d: they load the machine for minutes and share the
//! run's schema or database, so `scripts/test.sh` runs them one at a time
//! (`--ignored --test-threads=1`). The transactional runs restart the
//! server and need `QUEUE_TEST_{POSTGRES,MYSQL}_{STOP,START}` (the commands
//! of the restart tests, which `scripts/test.sh` sets).

use std::process::Command;

fn run(backend: &str, url_var: &str, args: &[&str], restart: Option<&str>) {
    let url = match backend {
        // The run recreates this file.
        "sqlite" => format!(
            "sqlite://{}/queue-chaos.db?mode=rwc",
            env!("CARGO_TARGET_TMPDIR")
        ),
        _ => std::env::var(url_var)
            .unwrap_or_else(|_| panic!("{url_var} is not set (scripts/test.sh sets it)")),
    };
    let url = match backend {
        // The run recreates this database on the test server.
        "mysql" => format!("{}/queue_test_chaos", url.trim_end_matches('/')),
        _ => url,
    };
    let restart = restart.map(|prefix| {
        let var = |suffix: &str| {
            std::env::var(format!("{prefix}_{suffix}")).unwrap_or_else(|_| {
                panic!("{prefix}_STOP and {prefix}_START must hold the server's stop and start commands (scripts/test.sh sets them)")
            })
        };
        (var("STOP"), var("START"))
    });
    run_on(backend, &url, args, restart);
}

/// A run of queue-chaos on `url`, with the `(stop, start)` commands of its
/// one mid-run fault when given; checks the figures line.
fn run_on(backend: &str, url: &str, args: &[&str], restart: Option<(String, String)>) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_queue-chaos"));
    command
        .args(["run", "--backend", backend, "--url", url])
        .args(args)
        .env_remove("QUEUE_CHAOS_STOP")
        .env_remove("QUEUE_CHAOS_START");
    if let Some((stop, start)) = &restart {
        command.args(["--stop", stop, "--start", start]);
    }
    let output = command.output().expect("queue-chaos runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stdout}");
    assert!(
        output.status.success(),
        "chaos run failed:\n{stdout}\n{stderr}"
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("chaos "))
        .expect("a figures line");
    for zero in [
        "lost=0 ",
        "double_effects=0 ",
        "stale_acks=0 ",
        "unfinished=0 ",
        "duplicate_jobs=0 ",
    ] {
        assert!(line.contains(zero), "{line}");
    }
    if restart.is_some() {
        assert!(line.contains(" restarts=1 "), "{line}");
        // Jobs started again after the restart (or the failover).
        assert!(line.contains(" outage_ms="), "{line}");
        assert!(!line.contains(" outage_ms=-1"), "{line}");
    }
}

const SCHEDULE: [&str; 10] = [
    "--duration",
    "60s",
    "--kill-every",
    "1s",
    "--freezes",
    "5",
    "--cuts",
    "20",
    "--rate",
    "150",
];

#[test]
#[ignore = "restarts the PostgreSQL server: scripts/test.sh runs it with QUEUE_TEST_POSTGRES_STOP/START"]
fn postgres_survives_the_ci_schedule_transactionally() {
    run(
        "postgres",
        "QUEUE_TEST_POSTGRES_URL",
        &SCHEDULE,
        Some("QUEUE_TEST_POSTGRES"),
    );
}

#[test]
#[ignore = "restarts the MySQL server: scripts/test.sh runs it with QUEUE_TEST_MYSQL_STOP/START"]
fn mysql_survives_the_ci_schedule_transactionally() {
    run(
        "mysql",
        "QUEUE_TEST_MYSQL_URL",
        &SCHEDULE,
        Some("QUEUE_TEST_MYSQL"),
    );
}

const PLAIN: [&str; 12] = [
    "--mode",
    "plain",
    "--duration",
    "30s",
    "--kill-every",
    "1s",
    "--freezes",
    "3",
    "--cuts",
    "10",
    "--rate",
    "150",
];

#[test]
#[ignore = "a minute of load: scripts/test.sh runs the chaos tests one at a time"]
fn postgres_survives_kills_freezes_and_cuts_in_plain_mode() {
    run("postgres", "QUEUE_TEST_POSTGRES_URL", &PLAIN, None);
}

#[test]
#[ignore = "a minute of load: scripts/test.sh runs the chaos tests one at a time"]
fn mysql_survives_kills_freezes_and_cuts_in_plain_mode() {
    run("mysql", "QUEUE_TEST_MYSQL_URL", &PLAIN, None);
}

#[test]
#[ignore = "a minute of load: scripts/test.sh runs the chaos tests one at a time"]
fn sqlite_survives_kills_and_freezes_in_both_modes() {
    // A file has no connection to cut and no server to restart.
    let schedule = [
        "--duration",
        "30s",
        "--kill-every",
        "1s",
        "--freezes",
        "3",
        "--rate",
        "100",
    ];
    run("sqlite", "", &schedule, None);
    let plain = [&schedule[..], &["--mode", "plain"]].concat();
    run("sqlite", "", &plain, None);
}

/// The primary of a primary and its synchronous standby (scripts/pg-ha.sh)
/// crashes half-way through the CI schedule (without connection cuts: the
/// proxy stands in front of one server) and the standby is promoted; the
/// workers and the producer reach it through the same URL of both hosts.
/// Needs `QUEUE_TEST_PG_HA=1` (scripts/test.sh sets it where
/// pg_createcluster and root are).
#[test]
#[ignore = "builds a primary and a standby and crashes the primary: scripts/test.sh runs it with QUEUE_TEST_PG_HA=1"]
fn postgres_survives_a_failover_to_a_synchronous_standby() {
    assert!(
        std::env::var("QUEUE_TEST_PG_HA").is_ok_and(|v| v == "1"),
        "set QUEUE_TEST_PG_HA=1 to run the failover run (it creates and drops the clusters \
         qha_a and qha_b on ports 5441 and 5442 with scripts/pg-ha.sh)"
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/pg-ha.sh");
    let pg_ha = |arg: &str| format!("bash {script} {arg}");
    let started = Command::new("sh")
        .args(["-c", &pg_ha("start sync")])
        .status()
        .expect("run scripts/pg-ha.sh");
    assert!(started.success(), "scripts/pg-ha.sh start sync failed");
    let schedule: Vec<&str> = SCHEDULE
        .chunks(2)
        .flat_map(|pair| match pair {
            ["--cuts", _] => ["--cuts", "0"],
            [flag, value] => [*flag, *value],
            _ => unreachable!("SCHEDULE holds flag and value pairs"),
        })
        .collect();
    let result = std::panic::catch_unwind(|| {
        run_on(
            "postgres",
            "postgres://postgres@127.0.0.1:5441,127.0.0.1:5442/queue_test?target_session_attrs=read-write",
            &schedule,
            Some((pg_ha("kill-primary"), pg_ha("promote"))),
        );
    });
    let _ = Command::new("sh").args(["-c", &pg_ha("stop")]).status();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}
