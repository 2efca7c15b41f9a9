//! A short soak with its pressure phases on each server: an idle
//! REPEATABLE READ transaction from 6 s to 14 s (`--idle-in-tx`) and two
//! readers throughout (`--readers 2`), sampled every 5 s. While the holder
//! is open the test finds it on the server: idle in a transaction that
//! has written and keeps its snapshot (PostgreSQL: `pg_stat_activity`'s
//! `backend_xid` and `backend_xmin`; MariaDB: `INNODB_TRX`, REPEATABLE
//! READ, one row modified). Then the rows must show the holder where it
//! was open and not elsewhere, the readers at work, and the holder's old
//! snapshot (PostgreSQL `xmin_age`, MySQL `oldest_trx_s`) while it was
//! open, older than anything left after it; the summary must split the run
//! around the holder, and the scratch table must be gone afterwards.
//!
//! Servers come from `QUEUE_TEST_POSTGRES_URL` / `QUEUE_TEST_MYSQL_URL`
//! (scripts/test.sh sets them); without them the test fails.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

const SCHEMA: &str = "queue_test_bench_pressure";

fn server_url(url_var: &str) -> String {
    std::env::var(url_var).unwrap_or_else(|_| {
        panic!("{url_var} is not set: set it to a reachable server (scripts/test.sh does)")
    })
}

/// One `result` line's `key=value` pairs.
type Fields = HashMap<String, String>;

fn fields(line: &str) -> Fields {
    line.split_whitespace()
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn number(row: &Fields, key: &str) -> f64 {
    let value = row
        .get(key)
        .unwrap_or_else(|| panic!("no {key} in {row:?}"));
    value
        .parse()
        .unwrap_or_else(|_| panic!("{key}={value} is not a number in {row:?}"))
}

/// A soak running in the background, its standard output collected line
/// by line.
struct Running {
    backend: &'static str,
    child: Child,
    stdout: Arc<Mutex<Vec<String>>>,
    readers: Vec<std::thread::JoinHandle<()>>,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Running {
    fn start(backend: &'static str, url: &str) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_queue-bench"))
            .args(["--backend", backend, "--url", url, "--schema", SCHEMA])
            .args([
                "soak",
                "--rate",
                "200",
                "--duration",
                "20s",
                "--sample",
                "5s",
            ])
            .args([
                "--concurrency",
                "4",
                "--retention",
                "5s",
                "--prune-interval",
                "2s",
            ])
            // The shared server's autovacuum setting is left alone.
            .args(["--autovacuum", "keep"])
            .args(["--idle-in-tx", "6s..14s", "--readers", "2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the benchmark binary runs");
        let (stdout, stderr) = (Arc::default(), Arc::default());
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            readers.push(collect(out, Arc::clone(&stdout)));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(collect(err, Arc::clone(&stderr)));
        }
        Self {
            backend,
            child,
            stdout,
            readers,
            stderr,
        }
    }

    /// The standard output so far.
    fn stdout(&self) -> String {
        self.stdout
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .join("\n")
    }

    /// Waits for the soak to end; its samples, its summary and its output.
    fn finish(mut self) -> (Vec<Fields>, Fields, String) {
        let status = self.child.wait().expect("the soak ends");
        for reader in self.readers.drain(..) {
            reader.join().expect("the output reader");
        }
        let stdout = self.stdout();
        let stderr = self
            .stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .join("\n");
        let backend = self.backend;
        assert!(
            status.success(),
            "queue-bench {backend} soak failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
        let result = |workload: &str| -> Vec<Fields> {
            let prefix = format!("result backend={backend} workload={workload} ");
            stdout
                .lines()
                .filter(|l| l.starts_with(&prefix))
                .map(fields)
                .collect()
        };
        let samples = result("soak_sample");
        let mut summary = result("soak");
        assert_eq!(samples.len(), 4, "{stdout}");
        assert_eq!(summary.len(), 1, "{stdout}");
        (samples, summary.remove(0), stdout)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // A failed assertion mid-run: the soak does not outlive the test.
        let _ = self.child.kill();
    }
}

fn collect(
    stream: impl std::io::Read + Send + 'static,
    lines: Arc<Mutex<Vec<String>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            lines
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(line);
        }
    })
}

/// Asks `probe` every 200 ms, from 6.5 s to 13.5 s after the soak
/// started (the holder's window is 6 s to 14 s of the run, which starts a
/// little after the process), until it answers `Some`.
async fn while_held<F, Fut>(started: Instant, mut probe: F) -> Option<String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<String>>,
{
    tokio::time::sleep_until((started + Duration::from_millis(6_500)).into()).await;
    while started.elapsed() < Duration::from_millis(13_500) {
        if let Some(seen) = probe().await {
            return Some(seen);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    None
}

/// What both servers must show in the rows; `age` is the column of the
/// oldest snapshot's age, at least `min_held` while the holder was open.
fn check(samples: &[Fields], summary: &Fields, stdout: &str, age: &str, min_held: f64) {
    // Samples end at 5, 10, 15, 20 s; the holder is open from 6 to 14 s.
    let holder: Vec<f64> = samples.iter().map(|s| number(s, "holder")).collect();
    assert_eq!(holder, [0.0, 1.0, 1.0, 0.0], "{stdout}");
    for sample in samples {
        assert_eq!(number(sample, "readers"), 2.0, "{stdout}");
        assert!(number(sample, "reader_scans") >= 1.0, "{stdout}");
    }
    assert!(stdout.contains("soak: holder open at t="), "{stdout}");
    assert!(
        stdout.contains("soak: holder rolled back at t="),
        "{stdout}"
    );
    // The sample at 10 s is the one taken while the holder was open (4 s
    // old); after it only the readers' one-second snapshots are left.
    let held = number(&samples[1], age);
    let after = number(&samples[3], age);
    assert!(
        held >= min_held,
        "{age} while the holder was open: {held}, expected at least {min_held}: {stdout}"
    );
    assert!(
        held > after,
        "{age} while the holder was open ({held}) is not above the one after it ({after}): \
         {stdout}"
    );
    assert_eq!(
        summary.get("idle_in_tx").map(String::as_str),
        Some("6s..14s")
    );
    assert_eq!(summary.get("readers").map(String::as_str), Some("2"));
    assert_eq!(number(summary, "holder_samples"), 2.0, "{stdout}");
    for key in [
        "lag_p99_before_ms",
        "lag_p99_holder_ms",
        "lag_p99_after_ms",
        "lag_p99_holder_ratio",
        "queue_mib_before",
        "queue_mib_holder_max",
        "queue_mib_after_max",
        "queue_holder_growth",
    ] {
        number(summary, key);
    }
    assert!(summary.contains_key("queue_back_s"), "{stdout}");
}

#[tokio::test]
async fn soak_pressure_is_seen_on_postgres() {
    let url = server_url("QUEUE_TEST_POSTGRES_URL");
    let pool = sqlx::PgPool::connect(&url).await.expect("the server");
    let started = Instant::now();
    let running = Running::start("postgres", &url);
    // The holder on the server: its own connection, idle in a transaction
    // that has written (an xid) and keeps its snapshot (an xmin: a READ
    // COMMITTED transaction has none between statements).
    let seen = while_held(started, || async {
        let row: Option<(String, bool, bool, String)> = sqlx::query_as(
            "SELECT state, backend_xid IS NOT NULL, backend_xmin IS NOT NULL, query \
             FROM pg_stat_activity WHERE application_name = 'queue-bench soak holder'",
        )
        .fetch_optional(&pool)
        .await
        .expect("pg_stat_activity");
        match row {
            Some((state, true, true, query)) if state == "idle in transaction" => Some(query),
            _ => None,
        }
    })
    .await;
    let query = seen.unwrap_or_else(|| {
        panic!(
            "no holder idle in a transaction with an xid and an xmin:\n{}",
            running.stdout()
        )
    });
    assert!(
        query.contains(&format!("FROM \"{SCHEMA}\".job_queue")),
        "{query}"
    );
    let (samples, summary, stdout) = running.finish();
    check(&samples, &summary, &stdout, "xmin_age", 1.0);
    assert!(
        number(&summary, "xmin_age_holder_max") > number(&summary, "xmin_age_before_max"),
        "{stdout}"
    );
    let scratch: Option<String> =
        sqlx::query_scalar("SELECT to_regclass($1 || '.soak_holder')::text")
            .bind(SCHEMA)
            .fetch_one(&pool)
            .await
            .expect("to_regclass");
    assert_eq!(scratch, None, "the scratch table was left behind");
    pool.close().await;
}

#[tokio::test]
async fn soak_pressure_is_seen_on_mysql() {
    let url = server_url("QUEUE_TEST_MYSQL_URL");
    let opts = mysql_async::Opts::from_url(&url).expect("a MySQL URL");
    let conn = Mutex::new(Some(
        mysql_async::Conn::new(opts).await.expect("the server"),
    ));
    let started = Instant::now();
    let running = Running::start("mysql", &url);
    // The holder on the server (its connection id from the soak's line):
    // a REPEATABLE READ transaction that wrote one row, between statements.
    let seen = while_held(started, || async {
        let stdout = running.stdout();
        let id: u64 = stdout
            .split("soak: holder open at ")
            .nth(1)?
            .split("(connection id ")
            .nth(1)?
            .split(')')
            .next()?
            .parse()
            .ok()?;
        let mut taken = conn.lock().unwrap_or_else(PoisonError::into_inner).take()?;
        let row: Option<(String, u64, String, Option<String>)> = taken
            .exec_first(
                "SELECT trx_isolation_level, trx_rows_modified, trx_state, trx_query \
                 FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ?",
                (id,),
            )
            .await
            .expect("INNODB_TRX");
        *conn.lock().unwrap_or_else(PoisonError::into_inner) = Some(taken);
        match row {
            Some((isolation, 1, state, None)) if isolation == "REPEATABLE READ" => Some(state),
            _ => None,
        }
    })
    .await;
    seen.unwrap_or_else(|| {
        panic!(
            "no holder idle in a REPEATABLE READ transaction that wrote a row:\n{}",
            running.stdout()
        )
    });
    let (samples, summary, stdout) = running.finish();
    // The holder is 4 s old at the sample of 10 s; a reader's transaction
    // at most a second or two.
    check(&samples, &summary, &stdout, "oldest_trx_s", 3.0);
    number(&summary, "purge_lag_holder_max");
    let mut conn = conn
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
        .expect("the connection");
    let scratch: Option<u64> = conn
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'soak_holder'",
            (SCHEMA,),
        )
        .await
        .expect("information_schema");
    assert_eq!(scratch, Some(0), "the scratch table was left behind");
    let _ = conn.disconnect().await;
}
