//! The soak's pressure phases (PostgreSQL and MySQL / MariaDB), each on
//! connections of its own, never the storage's pool: an idle REPEATABLE
//! READ transaction (`--idle-in-tx FROM..TO`) and reading sessions
//! (`--readers N`). [`PressureState`] tells the sampler when the holder was
//! open and how many readers ran. What each phase does:
//! docs/design-notes.md, "queue-bench: the soak's pressure phases".

use std::str::FromStr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::BenchError;
use crate::args::{Backend, SoakArgs, Window};
use crate::target::Setup;

/// How long each reader keeps its transaction open after its scans.
pub(crate) const READER_HOLD: Duration = Duration::from_secs(1);

/// How long [`Pressure::finish`] waits for a task to roll back and close.
const FINISH_LIMIT: Duration = Duration::from_secs(15);

/// The scratch table the holder writes to, in the run's schema.
const HOLDER_TABLE: &str = "soak_holder";

/// Where the pressure tasks are: waiting for the run, in it, or told to
/// stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Waiting,
    /// The run started enqueueing at this instant (the windows' zero).
    Running(Instant),
    Stopped,
}

/// The holder and the readers of one soak, started with the run and
/// finished after it.
#[derive(Debug)]
pub(crate) struct Pressure {
    control: watch::Sender<Phase>,
    tasks: Vec<(String, JoinHandle<Result<(), BenchError>>)>,
    state: Arc<PressureState>,
}

impl Pressure {
    /// Connects the holder (creating its scratch table) and the readers the
    /// arguments ask for; none of them does anything until
    /// [`Pressure::start`]. Nothing to connect without `--idle-in-tx` and
    /// `--readers`.
    pub(crate) async fn prepare(args: &SoakArgs, setup: &Setup) -> Result<Self, BenchError> {
        let (control, _) = watch::channel(Phase::Waiting);
        let mut pressure = Self {
            control,
            tasks: Vec::new(),
            state: Arc::new(PressureState::default()),
        };
        if args.idle_in_tx.is_none() && args.readers == 0 {
            return Ok(pressure);
        }
        if !matches!(setup.backend, Backend::Postgres | Backend::Mysql) {
            return Err("--idle-in-tx and --readers need --backend postgres or mysql".into());
        }
        let sql = Sql::new(setup);
        if let Some(window) = args.idle_in_tx {
            let mut session = Session::connect(setup, "queue-bench soak holder").await?;
            if let Err(error) = session.run(&sql.create_holder_table).await {
                session.close().await;
                return Err(format!("{}: {error}", sql.create_holder_table).into());
            }
            println!("soak: {}", sql.create_holder_table);
            let task = hold(
                session,
                sql.clone(),
                window,
                Control(pressure.control.subscribe()),
                Arc::clone(&pressure.state),
            );
            pressure.spawn("holder".to_owned(), task);
        }
        let window = args.readers_window();
        for n in 1..=args.readers {
            let session = match Session::connect(setup, "queue-bench soak reader").await {
                Ok(session) => session,
                Err(error) => {
                    let _ = pressure.finish().await;
                    return Err(format!("reader {n}: {error}").into());
                }
            };
            let task = read(
                session,
                sql.clone(),
                window,
                Control(pressure.control.subscribe()),
                Arc::clone(&pressure.state),
            );
            pressure.spawn(format!("reader {n}"), task);
        }
        Ok(pressure)
    }

    /// Runs `task`, saying at once on standard error if it fails (the run
    /// fails with its error at the end).
    fn spawn(
        &mut self,
        name: String,
        task: impl Future<Output = Result<(), BenchError>> + Send + 'static,
    ) {
        let label = name.clone();
        let task = tokio::spawn(async move {
            let outcome = task.await;
            if let Err(error) = &outcome {
                eprintln!("soak {label}: {error}");
            }
            outcome
        });
        self.tasks.push((name, task));
    }

    /// The run started enqueueing at `start`: the windows count from here.
    pub(crate) fn start(&self, start: Instant) {
        self.control.send_replace(Phase::Running(start));
    }

    /// What the holder and the readers did, for the samples.
    pub(crate) fn state(&self) -> &PressureState {
        &self.state
    }

    /// Tells every task to stop (the holder rolls back now if it is still
    /// open, the readers commit), waits for them and drops the scratch
    /// table. The first task's error, if any.
    pub(crate) async fn finish(self) -> Result<(), BenchError> {
        self.control.send_replace(Phase::Stopped);
        let mut outcome = Ok(());
        for (name, mut task) in self.tasks {
            let error = match tokio::time::timeout(FINISH_LIMIT, &mut task).await {
                Ok(Ok(Ok(()))) => continue,
                Ok(Ok(Err(error))) => error.to_string(),
                Ok(Err(join)) => join.to_string(),
                Err(_) => {
                    // Dropping its connection ends its transaction on the
                    // server.
                    task.abort();
                    format!("did not stop within {FINISH_LIMIT:?}; its connection was dropped")
                }
            };
            if outcome.is_ok() {
                outcome = Err(format!("soak {name}: {error}").into());
            }
        }
        outcome
    }
}

/// What the holder and the readers did, read by the sampler.
#[derive(Debug, Default)]
pub(crate) struct PressureState {
    /// When the holder's transaction began and ended.
    holder: Mutex<(Option<Instant>, Option<Instant>)>,
    /// Readers in their loop now.
    readers_active: AtomicUsize,
    /// The most readers in their loop at once since the last sample.
    readers_peak: AtomicUsize,
    /// Reader transactions committed since the last sample.
    reader_scans: AtomicU64,
}

impl PressureState {
    /// Whether the holder's transaction was open at some moment from
    /// `from` to `to`.
    pub(crate) fn holder_open_between(&self, from: Instant, to: Instant) -> bool {
        let (opened, closed) = *self.holder.lock().unwrap_or_else(PoisonError::into_inner);
        opened.is_some_and(|opened| opened <= to && closed.is_none_or(|closed| closed >= from))
    }

    /// The most readers running at once since the last call, and their
    /// transactions committed since.
    pub(crate) fn take_readers(&self) -> (usize, u64) {
        let active = self.readers_active.load(Ordering::SeqCst);
        let peak = self.readers_peak.swap(active, Ordering::SeqCst);
        (
            peak.max(active),
            self.reader_scans.swap(0, Ordering::SeqCst),
        )
    }

    fn holder_opened(&self, at: Instant) {
        self.holder.lock().unwrap_or_else(PoisonError::into_inner).0 = Some(at);
    }

    fn holder_closed(&self, at: Instant) {
        self.holder.lock().unwrap_or_else(PoisonError::into_inner).1 = Some(at);
    }

    fn reader_started(&self) {
        let active = self.readers_active.fetch_add(1, Ordering::SeqCst) + 1;
        self.readers_peak.fetch_max(active, Ordering::SeqCst);
    }

    fn reader_stopped(&self) {
        self.readers_active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A task's view of [`Phase`].
#[derive(Debug)]
struct Control(watch::Receiver<Phase>);

impl Control {
    /// When the run started; `None` if told to stop before it did.
    async fn started(&mut self) -> Option<Instant> {
        loop {
            match *self.0.borrow_and_update() {
                Phase::Running(start) => return Some(start),
                Phase::Stopped => return None,
                Phase::Waiting => {}
            }
            if self.0.changed().await.is_err() {
                return None;
            }
        }
    }

    /// Sleeps until `at`; `false` if told to stop first.
    async fn sleep_until(&mut self, at: Instant) -> bool {
        tokio::select! {
            () = tokio::time::sleep_until(at.into()) => true,
            () = self.stopped() => false,
        }
    }

    async fn stopped(&mut self) {
        loop {
            if *self.0.borrow_and_update() == Phase::Stopped || self.0.changed().await.is_err() {
                return;
            }
        }
    }
}

/// The holder: waits for FROM, opens its transaction, leaves it idle
/// until TO (or a stop), rolls back, drops the scratch table.
async fn hold(
    mut session: Session,
    sql: Sql,
    window: Window,
    mut control: Control,
    state: Arc<PressureState>,
) -> Result<(), BenchError> {
    let mut start = None;
    let held = async {
        let Some(at) = control.started().await else {
            return Ok(());
        };
        start = Some(at);
        if !control.sleep_until(at + window.from).await {
            return Ok(());
        }
        state.holder_opened(Instant::now());
        for statement in &sql.holder_begin {
            session
                .run(statement)
                .await
                .map_err(|e| format!("{statement}: {e}"))?;
        }
        let rows = session
            .count(&sql.holder_read)
            .await
            .map_err(|e| format!("{}: {e}", sql.holder_read))?;
        println!(
            "soak: holder open at t={:.1}s ({} {}): {}; {} ({rows} rows); idle in transaction \
             until t={:.1}s",
            at.elapsed().as_secs_f64(),
            sql.session_kind,
            session.id,
            sql.holder_begin.join("; "),
            sql.holder_read,
            window.to.as_secs_f64(),
        );
        if !control.sleep_until(at + window.to).await {
            println!("soak: holder told to stop before its end (the run stopped)");
        }
        Ok::<(), BenchError>(())
    }
    .await;
    // Rolled back on every path (a no-op when no transaction is open).
    let rolled_back = session.run("ROLLBACK").await;
    if state
        .holder
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .0
        .is_some()
    {
        state.holder_closed(Instant::now());
        let t = start.map_or(0.0, |at| at.elapsed().as_secs_f64());
        match &rolled_back {
            Ok(()) => println!("soak: holder rolled back at t={t:.1}s"),
            Err(error) => eprintln!("soak: holder's ROLLBACK at t={t:.1}s failed: {error}"),
        }
    }
    let dropped = session.run(&sql.drop_holder_table).await;
    match &dropped {
        Ok(()) => println!("soak: {}", sql.drop_holder_table),
        Err(error) => eprintln!(
            "soak: could not drop the scratch table ({error}); run by hand: {}",
            sql.drop_holder_table
        ),
    }
    session.close().await;
    held?;
    rolled_back.map_err(|e| format!("ROLLBACK: {e}"))?;
    dropped.map_err(|e| format!("{}: {e}", sql.drop_holder_table))?;
    Ok(())
}

/// A reader: from FROM to TO, transactions of [`Sql::reader_scans`] held
/// [`READER_HOLD`] each.
async fn read(
    mut session: Session,
    sql: Sql,
    window: Window,
    mut control: Control,
    state: Arc<PressureState>,
) -> Result<(), BenchError> {
    let outcome = async {
        let Some(start) = control.started().await else {
            return Ok(());
        };
        if !control.sleep_until(start + window.from).await {
            return Ok(());
        }
        state.reader_started();
        let looped = async {
            let end = start + window.to;
            while Instant::now() < end {
                for statement in sql.reader_begin.iter().chain(&sql.reader_scans) {
                    session
                        .run(statement)
                        .await
                        .map_err(|e| format!("{statement}: {e}"))?;
                }
                let go_on = control
                    .sleep_until((Instant::now() + READER_HOLD).min(end))
                    .await;
                session
                    .run("COMMIT")
                    .await
                    .map_err(|e| format!("COMMIT: {e}"))?;
                state.reader_scans.fetch_add(1, Ordering::SeqCst);
                if !go_on {
                    break;
                }
            }
            Ok::<(), BenchError>(())
        }
        .await;
        state.reader_stopped();
        looped
    }
    .await;
    if outcome.is_err() {
        let _ = session.run("ROLLBACK").await;
    }
    session.close().await;
    outcome
}

/// The statements of the holder and the readers on the run's backend, the
/// tables named with the run's schema.
#[derive(Debug, Clone)]
struct Sql {
    /// What [`Session::id`] is.
    session_kind: &'static str,
    create_holder_table: String,
    drop_holder_table: String,
    /// Opens the holder's transaction and gives it a transaction id.
    holder_begin: Vec<String>,
    /// The holder's read of `job_queue`, which takes its snapshot.
    holder_read: String,
    /// Opens a reader's transaction.
    reader_begin: Vec<String>,
    /// A reader's scans.
    reader_scans: Vec<String>,
}

impl Sql {
    fn new(setup: &Setup) -> Self {
        let schema = &setup.schema;
        match setup.backend {
            Backend::Mysql => {
                let table = |name: &str| format!("`{schema}`.{name}");
                let holder = table(HOLDER_TABLE);
                let isolation = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ".to_owned();
                Self {
                    session_kind: "connection id",
                    create_holder_table: format!(
                        "CREATE TABLE IF NOT EXISTS {holder} (at DATETIME(6) NOT NULL) \
                         ENGINE=InnoDB"
                    ),
                    drop_holder_table: format!("DROP TABLE IF EXISTS {holder}"),
                    holder_begin: vec![
                        isolation.clone(),
                        "START TRANSACTION".to_owned(),
                        format!("INSERT INTO {holder} (at) VALUES (UTC_TIMESTAMP(6))"),
                    ],
                    holder_read: format!("SELECT COUNT(*) FROM {}", table("job_queue")),
                    reader_begin: vec![isolation, "START TRANSACTION".to_owned()],
                    reader_scans: vec![
                        format!(
                            "SELECT COUNT(*), MAX(created_at) FROM {}",
                            table("job_queue")
                        ),
                        format!(
                            "SELECT COUNT(*) FROM {} \
                             WHERE finished_at > UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE",
                            table("job_history")
                        ),
                    ],
                }
            }
            _ => {
                let table = |name: &str| format!("\"{schema}\".{name}");
                let holder = table(HOLDER_TABLE);
                let begin = "BEGIN ISOLATION LEVEL REPEATABLE READ".to_owned();
                Self {
                    session_kind: "pid",
                    create_holder_table: format!(
                        "CREATE TABLE IF NOT EXISTS {holder} (at timestamptz NOT NULL)"
                    ),
                    drop_holder_table: format!("DROP TABLE IF EXISTS {holder}"),
                    holder_begin: vec![
                        begin.clone(),
                        format!("INSERT INTO {holder} (at) VALUES (now())"),
                    ],
                    holder_read: format!("SELECT count(*) FROM {}", table("job_queue")),
                    reader_begin: vec![begin],
                    reader_scans: vec![
                        format!(
                            "SELECT count(*), max(created_at) FROM {}",
                            table("job_queue")
                        ),
                        format!(
                            "SELECT count(*) FROM {} \
                             WHERE finished_at > now() - interval '1 minute'",
                            table("job_history")
                        ),
                    ],
                }
            }
        }
    }
}

/// A connection of the pressure's own.
#[derive(Debug)]
struct Session {
    conn: Conn,
    /// The server's id of the session (PostgreSQL's backend pid, MySQL's
    /// connection id), printed for an operator to find it.
    id: i64,
}

#[derive(Debug)]
enum Conn {
    Postgres(PgConnection),
    Mysql(mysql_async::Conn),
}

impl Session {
    /// A new connection to the run's server (PostgreSQL: named
    /// `application_name` in `pg_stat_activity`).
    async fn connect(setup: &Setup, name: &str) -> Result<Self, BenchError> {
        let mut conn = match setup.backend {
            Backend::Mysql => {
                let opts = mysql_async::Opts::from_url(&setup.url)
                    .map_err(|e| BenchError::from(e.to_string()))?;
                Conn::Mysql(mysql_async::Conn::new(opts).await?)
            }
            _ => Conn::Postgres(
                PgConnectOptions::from_str(&setup.url)?
                    .application_name(name)
                    .connect()
                    .await?,
            ),
        };
        let id = match &mut conn {
            Conn::Postgres(conn) => {
                sqlx::query_scalar("SELECT pg_backend_pid()::bigint")
                    .fetch_one(conn)
                    .await?
            }
            Conn::Mysql(conn) => conn
                .query_first::<i64, _>("SELECT CONNECTION_ID()")
                .await?
                .unwrap_or_default(),
        };
        Ok(Self { conn, id })
    }

    /// Runs `sql`, dropping any rows.
    async fn run(&mut self, sql: &str) -> Result<(), BenchError> {
        match &mut self.conn {
            Conn::Postgres(conn) => {
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
                    .execute(conn)
                    .await?;
            }
            Conn::Mysql(conn) => conn.query_drop(sql).await?,
        }
        Ok(())
    }

    /// The count `sql` answers.
    async fn count(&mut self, sql: &str) -> Result<i64, BenchError> {
        Ok(match &mut self.conn {
            Conn::Postgres(conn) => {
                sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
                    .fetch_one(conn)
                    .await?
            }
            Conn::Mysql(conn) => conn.query_first::<i64, _>(sql).await?.unwrap_or_default(),
        })
    }

    async fn close(self) {
        match self.conn {
            Conn::Postgres(conn) => {
                let _ = conn.close().await;
            }
            Conn::Mysql(conn) => {
                let _ = conn.disconnect().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_counts_where_it_overlaps_a_sample() {
        let state = PressureState::default();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert!(!state.holder_open_between(at(0), at(5)));
        state.holder_opened(at(6));
        assert!(!state.holder_open_between(at(0), at(5)));
        assert!(state.holder_open_between(at(5), at(10)));
        assert!(state.holder_open_between(at(100), at(105)));
        state.holder_closed(at(14));
        assert!(state.holder_open_between(at(10), at(15)));
        assert!(!state.holder_open_between(at(15), at(20)));
    }

    #[test]
    fn readers_are_counted_at_their_peak_per_sample() {
        let state = PressureState::default();
        assert_eq!(state.take_readers(), (0, 0));
        state.reader_started();
        state.reader_started();
        state.reader_scans.fetch_add(3, Ordering::SeqCst);
        state.reader_stopped();
        state.reader_stopped();
        assert_eq!(state.take_readers(), (2, 3));
        assert_eq!(state.take_readers(), (0, 0));
    }

    #[test]
    fn the_holder_touches_only_its_table_and_reads_the_queue() {
        for backend in [Backend::Postgres, Backend::Mysql] {
            let setup = Setup {
                url: backend.default_url().to_owned(),
                schema: "bench_soak".to_owned(),
                pool: 1,
                notify: false,
                prefetch: 0,
                completion_batch: None,
                samples: true,
                backend,
                keyless_indexed: true,
                async_claims: false,
                transaction_pooling: false,
                listen_url: None,
                wait_replicas: None,
            };
            let sql = Sql::new(&setup);
            let insert = sql.holder_begin.last().expect("statements");
            assert!(insert.starts_with("INSERT INTO "), "{insert}");
            assert!(insert.contains("soak_holder"), "{insert}");
            assert!(
                sql.holder_read.contains("bench_soak"),
                "{}",
                sql.holder_read
            );
            assert!(
                sql.holder_begin
                    .iter()
                    .any(|s| s.contains("REPEATABLE READ")),
                "{:?}",
                sql.holder_begin
            );
            assert!(sql.drop_holder_table.contains("soak_holder"));
        }
    }
}
