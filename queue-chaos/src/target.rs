//! What differs between backends: a fresh place to run in, the effects
//! table, and the handler that records an effect with or without the ack.

use std::time::Duration;

use diesel::sql_types::{BigInt, Integer, Text};
use diesel_async::{AsyncConnection, RunQueryDsl};
use mysql_async::prelude::Queryable;
use queue::mysql::MySqlStorage;
use queue::postgres::PgStorage;
use queue::sqlite::SqliteStorage;
use queue::{AnyStorage, JobContext, JobError};

use crate::Failure;
use crate::args::{Backend, Mode};

/// The queue every job of a run goes to.
pub(crate) const QUEUE: &str = "chaos";
/// The PostgreSQL schema of a run.
const PG_SCHEMA: &str = "queue_chaos";

/// One recorded effect: the job, the attempt that ran it, its worker.
pub(crate) type Effect = (i64, i32, String);

/// Drops and recreates the run's place, migrates it, adds the effects table.
pub(crate) async fn prepare(backend: Backend, url: &str) -> Result<AnyStorage, Failure> {
    match backend {
        Backend::Postgres => {
            queue::postgres::create_database_if_missing(url).await?;
            // Through the storage's connect: a URL may name a primary and
            // its standby (the failover run).
            let storage = PgStorage::connect(url).await?;
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP SCHEMA IF EXISTS {PG_SCHEMA} CASCADE"
            )))
            .execute(storage.pool())
            .await?;
            let storage = storage.with_schema(PG_SCHEMA)?;
            storage.migrate().await?;
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "CREATE TABLE {PG_SCHEMA}.chaos_effects (job_id BIGINT NOT NULL, attempt INT NOT NULL, worker TEXT NOT NULL)"
            )))
            .execute(storage.pool())
            .await?;
            Ok(storage.into())
        }
        Backend::Mysql => {
            let opts = mysql_async::Opts::from_url(url)
                .map_err(|e| Failure(queue::redact_secrets(&e.to_string(), url)))?;
            let Some(database) = opts.db_name().map(str::to_owned) else {
                return Err(Failure(
                    "name the run's database in the URL, e.g. mysql://root@127.0.0.1:3306/queue_chaos".into(),
                ));
            };
            let server = mysql_async::OptsBuilder::from_opts(opts).db_name(None::<String>);
            let mut conn = mysql_async::Conn::new(server).await?;
            conn.query_drop(format!("DROP DATABASE IF EXISTS `{database}`"))
                .await?;
            conn.query_drop(format!(
                "CREATE DATABASE `{database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
            ))
            .await?;
            conn.query_drop(format!(
                "CREATE TABLE `{database}`.chaos_effects (job_id BIGINT NOT NULL, attempt INT NOT NULL, worker VARCHAR(191) NOT NULL)"
            ))
            .await?;
            conn.disconnect().await?;
            let storage = MySqlStorage::connect(url)?;
            storage.migrate().await?;
            Ok(storage.into())
        }
        Backend::Sqlite => {
            let path = sqlite_path(url);
            for file in [
                path.to_owned(),
                format!("{path}-wal"),
                format!("{path}-shm"),
            ] {
                match std::fs::remove_file(&file) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                    _ => {}
                }
            }
            let storage = SqliteStorage::connect(url).await?;
            sqlx::raw_sql(
                "CREATE TABLE chaos_effects (job_id INTEGER NOT NULL, attempt INTEGER NOT NULL, worker TEXT NOT NULL)",
            )
            .execute(storage.pool())
            .await?;
            Ok(storage.into())
        }
    }
}

/// The file of a `sqlite://path?...` URL.
fn sqlite_path(url: &str) -> &str {
    let rest = url.trim_start_matches("sqlite://");
    rest.split('?').next().unwrap_or(rest)
}

/// The run's storage at `url` (already prepared).
pub(crate) async fn open(backend: Backend, url: &str) -> Result<AnyStorage, Failure> {
    Ok(match backend {
        Backend::Postgres => PgStorage::connect(url)
            .await?
            .with_schema(PG_SCHEMA)?
            .into(),
        Backend::Mysql => MySqlStorage::connect(url)?.into(),
        Backend::Sqlite => SqliteStorage::connect(url).await?.into(),
    })
}

/// Every recorded effect.
pub(crate) async fn effects(storage: &AnyStorage, url: &str) -> Result<Vec<Effect>, Failure> {
    if let Some(pg) = storage.as_postgres() {
        let sql = format!("SELECT job_id, attempt, worker FROM {PG_SCHEMA}.chaos_effects");
        return Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .fetch_all(pg.pool())
            .await?);
    }
    if let Some(sqlite) = storage.as_sqlite() {
        return Ok(
            sqlx::query_as("SELECT job_id, attempt, worker FROM chaos_effects")
                .fetch_all(sqlite.pool())
                .await?,
        );
    }
    let opts = mysql_async::Opts::from_url(url)
        .map_err(|e| Failure(queue::redact_secrets(&e.to_string(), url)))?;
    let mut conn = mysql_async::Conn::new(opts).await?;
    let rows: Vec<Effect> = conn
        .query("SELECT job_id, attempt, worker FROM chaos_effects")
        .await?;
    conn.disconnect().await?;
    Ok(rows)
}

/// Runs one job: records its effect, in the ack's transaction or before it.
pub(crate) async fn handle(
    storage: AnyStorage,
    mode: Mode,
    ctx: JobContext,
) -> Result<Option<serde_json::Value>, JobError> {
    let pause = Duration::from_millis(rand::random::<u64>() % 15);
    tokio::time::sleep(pause).await;
    let lease = ctx.lease().clone();
    let (job, attempt, worker) = (
        lease.job_id.get(),
        i32::try_from(lease.attempt).map_err(JobError::retry)?,
        lease.worker_id.as_str().to_owned(),
    );
    if let Some(pg) = storage.as_postgres() {
        let insert = format!(
            "INSERT INTO {PG_SCHEMA}.chaos_effects (job_id, attempt, worker) VALUES ($1, $2, $3)"
        );
        let mut tx = pg.pool().begin().await?;
        sqlx::query(sqlx::AssertSqlSafe(insert))
            .bind(job)
            .bind(attempt)
            .bind(worker)
            .execute(&mut *tx)
            .await?;
        if mode == Mode::Transactional {
            pg.ack_in(&mut tx, &lease, None)
                .await
                .map_err(JobError::retry)?;
            tx.commit().await?;
            ctx.mark_completed();
        } else {
            tx.commit().await?;
        }
        return Ok(None);
    }
    if let Some(sqlite) = storage.as_sqlite() {
        // IMMEDIATE: take the write lock up front, as the storage does.
        let mut tx = sqlite.pool().begin_with("BEGIN IMMEDIATE").await?;
        sqlx::query("INSERT INTO chaos_effects (job_id, attempt, worker) VALUES (?, ?, ?)")
            .bind(job)
            .bind(attempt)
            .bind(worker)
            .execute(&mut *tx)
            .await?;
        if mode == Mode::Transactional {
            sqlite
                .ack_in(&mut tx, &lease, None)
                .await
                .map_err(JobError::retry)?;
            tx.commit().await?;
            ctx.mark_completed();
        } else {
            tx.commit().await?;
        }
        return Ok(None);
    }
    let Some(mysql) = storage.as_mysql() else {
        return Err(JobError::discard("a storage of no chaos backend"));
    };
    let mut conn = mysql.pool().get().await.map_err(JobError::retry)?;
    let transactional = mode == Mode::Transactional;
    conn.transaction(async |conn| {
        diesel::sql_query("INSERT INTO chaos_effects (job_id, attempt, worker) VALUES (?, ?, ?)")
            .bind::<BigInt, _>(job)
            .bind::<Integer, _>(attempt)
            .bind::<Text, _>(worker)
            .execute(conn)
            .await?;
        if transactional {
            mysql.ack_in(conn, &lease, None).await?;
        }
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    })
    .await
    .map_err(JobError::retry)?;
    if transactional {
        ctx.mark_completed();
    }
    Ok(None)
}

/// Whether `url` names several hosts (a primary and its standbys): the
/// proxy, which stands in front of one server, cannot serve it.
pub(crate) fn several_hosts(url: &str) -> bool {
    let start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[start..];
    rest[..rest.find(['/', '?']).unwrap_or(rest.len())].contains(',')
}

/// `url` with its host and port replaced by the proxy's.
pub(crate) fn via_proxy(url: &str, port: u16) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[start..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let userinfo_end = rest[..authority_end].rfind('@').map_or(0, |i| i + 1);
    format!(
        "{}{}127.0.0.1:{port}{}",
        &url[..start],
        &rest[..userinfo_end],
        &rest[authority_end..]
    )
}

/// The database server's `host:port` in `url` (default port by scheme).
pub(crate) fn server_address(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[start..];
    let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    if host_port.contains(':') {
        host_port.to_owned()
    } else if url.starts_with("mysql") {
        format!("{host_port}:3306")
    } else {
        format!("{host_port}:5432")
    }
}

#[cfg(test)]
mod tests {
    use super::{server_address, via_proxy};

    #[test]
    fn the_proxy_replaces_only_host_and_port() {
        assert_eq!(
            via_proxy("postgres://u:p@db:5432/app?x=1", 7000),
            "postgres://u:p@127.0.0.1:7000/app?x=1"
        );
        assert_eq!(
            via_proxy("mysql://127.0.0.1:3306/c", 7001),
            "mysql://127.0.0.1:7001/c"
        );
        assert_eq!(server_address("mysql://root@127.0.0.1/c"), "127.0.0.1:3306");
        assert_eq!(server_address("postgres://u@h:6000/d"), "h:6000");
    }
}
