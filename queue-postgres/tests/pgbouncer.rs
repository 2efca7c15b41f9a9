//! What sqlx does through PgBouncer in transaction pooling mode, shown on
//! the wire rather than assumed (docs/high-availability.md, "PgBouncer").
//!
//! The tests need `QUEUE_TEST_PGBOUNCER_URL`: a PgBouncer in transaction
//! pooling mode with a small server pool in front of the test database
//! (`scripts/pgbouncer.sh start` runs one on 127.0.0.1:6432 with 4 server
//! connections; scripts/test.sh starts it and sets the variable). Without
//! it they fail naming the variable.

use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, PgPool};

/// The variable naming a PgBouncer in transaction pooling mode.
const URL_VAR: &str = "QUEUE_TEST_PGBOUNCER_URL";

/// Clients, and distinct statements each runs, concurrently: well beyond
/// the server pool of 4, so that clients share server connections.
const CLIENTS: usize = 16;
const STATEMENTS: usize = 40;

/// One test at a time: the LISTEN test's notifications reach whichever
/// client has its server connection, which must not be another test's.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn url() -> String {
    std::env::var(URL_VAR).unwrap_or_else(|_| {
        panic!(
            "{URL_VAR} is not set: these tests need a PgBouncer in transaction pooling mode \
             (scripts/pgbouncer.sh start; then {URL_VAR}=postgres://postgres@127.0.0.1:6432/queue_test)"
        )
    })
}

/// A pool of one connection per client through PgBouncer, with sqlx's
/// statement cache at `cache` entries.
async fn client(cache: usize) -> PgPool {
    let options = PgConnectOptions::from_str(&url())
        .unwrap_or_else(|e| panic!("{URL_VAR} is not a valid URL: {e}"))
        .statement_cache_capacity(cache);
    PgPoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {URL_VAR}: {e}"))
}

/// Statement `n` of client `c`: distinct text per client and statement, and
/// a distinct number of parameters per client, so a Bind that reaches
/// another client's statement fails rather than passing unnoticed.
fn statement(c: usize, n: usize) -> (String, Vec<i64>) {
    let params: Vec<i64> = (0..=c as i64).map(|i| i + n as i64).collect();
    let sum = (1..=params.len())
        .map(|i| format!("${i}::int8"))
        .collect::<Vec<_>>()
        .join(" + ");
    (format!("SELECT ({sum}) + 0 * {n} + 0 * {c} AS v"), params)
}

/// The expected value of [`statement`]'s query.
fn expected(params: &[i64]) -> i64 {
    params.iter().sum()
}

/// Runs every client's statements concurrently, `how` deciding how one is
/// run; returns the errors (wrong results count as errors).
async fn run_all(cache: usize, in_transaction: bool, persistent: bool) -> Vec<String> {
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        tasks.push(tokio::spawn(async move {
            let pool = client(cache).await;
            let mut errors = Vec::new();
            for n in 0..STATEMENTS {
                let (sql, params) = statement(c, n);
                let mut query =
                    sqlx::query_scalar::<_, i64>(AssertSqlSafe(sql)).persistent(persistent);
                for p in &params {
                    query = query.bind(*p);
                }
                let got = if in_transaction {
                    match pool.begin().await {
                        Ok(mut tx) => match query.fetch_one(&mut *tx).await {
                            Ok(v) => tx.commit().await.map(|()| v),
                            Err(e) => Err(e),
                        },
                        Err(e) => Err(e),
                    }
                } else {
                    query.fetch_one(&pool).await
                };
                match got {
                    Ok(v) if v == expected(&params) => {}
                    Ok(v) => errors.push(format!("client {c} statement {n}: got {v}")),
                    Err(e) => errors.push(format!("client {c} statement {n}: {e}")),
                }
            }
            pool.close().await;
            errors
        }));
    }
    let mut errors = Vec::new();
    for task in tasks {
        errors.extend(task.await.expect("a client task panicked"));
    }
    eprintln!(
        "cache {cache}, in transactions {in_transaction}, persistent {persistent}: {} of {} failed, first: {:?}",
        errors.len(),
        CLIENTS * STATEMENTS,
        errors.first()
    );
    errors
}

/// sqlx's defaults (named statements, cached per connection) through
/// transaction pooling: a statement prepared on one server connection is
/// then run on another, where it does not exist or is another client's.
/// This is the failure the storage's PgBouncer mode avoids.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn named_statements_break_through_transaction_pooling() {
    let _serial = SERIAL.lock().await;
    let errors = run_all(100, false, true).await;
    assert!(
        !errors.is_empty(),
        "expected sqlx's cached named statements to fail through transaction pooling"
    );
}

/// The statement cache off, each statement in a transaction: since sqlx
/// 0.9.1 a persistent query on a connection without a cache is prepared
/// unnamed (0.9.0 named it `sqlx_s_N` and never closed it, so another
/// client's `sqlx_s_1` already existed on the server it landed on: 606-624
/// of 640 failed), which makes it the working case below.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn statement_cache_off_in_transactions_works() {
    let _serial = SERIAL.lock().await;
    let errors = run_all(0, true, true).await;
    assert!(
        errors.is_empty(),
        "{} failures: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
}

/// Unnamed statements outside a transaction: Parse/Describe/Sync and
/// Bind/Execute/Sync are two round trips, and PgBouncer hands the server
/// back between them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unnamed_statements_outside_transactions_break() {
    let _serial = SERIAL.lock().await;
    let errors = run_all(0, false, false).await;
    assert!(
        !errors.is_empty(),
        "expected unnamed statements outside transactions to fail through transaction pooling"
    );
}

/// The way that works: unnamed statements (`persistent(false)`), each in a
/// transaction, which keeps one server connection from Parse to Commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unnamed_statements_in_transactions_work() {
    let _serial = SERIAL.lock().await;
    let errors = run_all(0, true, false).await;
    assert!(
        errors.is_empty(),
        "{} failures: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
}

/// LISTEN through transaction pooling: the LISTEN is a transaction of its
/// own, after which PgBouncer gives its server connection to other clients;
/// the listener keeps waiting on a client connection that no server is
/// linked to. Notifications sent meanwhile do not reach it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn listen_through_transaction_pooling_misses_notifications() {
    let _serial = SERIAL.lock().await;
    let direct = std::env::var("QUEUE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| panic!("QUEUE_TEST_POSTGRES_URL is not set"));
    let channel = format!("pgbouncer_test_{}", std::process::id());
    let mut listener = sqlx::postgres::PgListener::connect(&url())
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {URL_VAR}: {e}"));
    listener.listen(&channel).await.expect("LISTEN");
    // Other clients keep the servers busy meanwhile.
    let busy = tokio::spawn(run_all(0, true, false));
    let notifier = PgPoolOptions::new()
        .max_connections(1)
        .connect(&direct)
        .await
        .expect("connect directly");
    let mut received = 0;
    for i in 0..5 {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(&channel)
            .bind(i.to_string())
            .execute(&notifier)
            .await
            .expect("NOTIFY");
        if let Ok(Ok(_)) =
            tokio::time::timeout(std::time::Duration::from_millis(500), listener.recv()).await
        {
            received += 1;
        }
    }
    let _ = busy.await;
    eprintln!("notifications received through transaction pooling: {received} of 5");
    assert!(
        received < 5,
        "every notification arrived through transaction pooling"
    );
}
