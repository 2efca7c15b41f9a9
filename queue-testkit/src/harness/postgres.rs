//! An isolated PostgreSQL schema per test.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool};

use queue_core::backend::{RetryPolicy, retrying};
use queue_core::redact_url;

use super::{Fallback, connect_with_retry, database_url, unique_name};

/// The variable naming the PostgreSQL database tests use.
pub const URL_VAR: &str = "QUEUE_TEST_POSTGRES_URL";

/// A schema created for one test; every connection made from
/// [`TestSchema::connect_options`] has it as its `search_path`.
#[derive(Debug)]
pub struct TestSchema {
    url: String,
    name: String,
}

impl TestSchema {
    /// Creates an empty schema (and the database, when it is missing).
    ///
    /// # Panics
    /// When no database is configured, the database cannot be reached, or
    /// the schema cannot be created, with one line saying why.
    pub async fn create() -> Self {
        let url = database_url(URL_VAR, fallback());
        let name = unique_name();
        let mut conn = connect_creating_database(&url).await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA \"{name}\"")))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("cannot create schema {name}: {e}"));
        Self { url, name }
    }

    /// The schema's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The database URL (without the schema).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Connection options whose `search_path` is this schema.
    pub fn connect_options(&self) -> PgConnectOptions {
        PgConnectOptions::from_str(&self.url)
            .unwrap_or_else(|e| panic!("{URL_VAR} is not a valid URL: {e}"))
            .options([("search_path", self.name.as_str())])
    }

    /// Empties this schema's `job_queue` and vacuums it without giving its
    /// pages back: the statistics autovacuum leaves after visiting a queue
    /// that was empty at that moment (`reltuples` 0 for the table and its
    /// indexes, the pages kept). For tests of plans on such statistics.
    ///
    /// # Panics
    /// If a statement fails.
    pub async fn vacuum_job_queue_empty(&self, pool: &PgPool) {
        let table = format!("\"{}\".job_queue", self.name);
        for statement in [
            format!("DELETE FROM {table}"),
            format!("VACUUM (TRUNCATE false, ANALYZE) {table}"),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(statement))
                .execute(pool)
                .await
                .unwrap_or_else(|e| panic!("emptying {table}: {e}"));
        }
    }

    /// A small pool on this schema, made in the calling test's runtime.
    pub async fn pool(&self) -> PgPool {
        PgPoolOptions::new()
            .max_connections(8)
            .connect_with(self.connect_options())
            .await
            .unwrap_or_else(|e| panic!("cannot connect to {URL_VAR}: {e}"))
    }

    /// Drops the schema and everything in it.
    ///
    /// A pool a test dropped without closing it may still have a statement
    /// running on the server for a moment, taking its locks on the schema's
    /// tables in another order than `DROP SCHEMA ... CASCADE` does; when the
    /// server picks the drop as the victim of that deadlock (40P01), the drop
    /// was rolled back whole and is tried again.
    pub async fn drop_schema(self) {
        let deadlock = RetryPolicy {
            retries: 4,
            first_pause: Duration::from_millis(100),
            growth: 2,
        };
        let is_deadlock = |e: &sqlx::Error| matches!(e, sqlx::Error::Database(e) if e.code().as_deref() == Some("40P01"));
        let statement = format!("DROP SCHEMA \"{}\" CASCADE", self.name);
        retrying(deadlock, is_deadlock, tokio::time::sleep, || async {
            let mut conn = PgConnection::connect(&self.url).await?;
            sqlx::raw_sql(sqlx::AssertSqlSafe(statement.clone()))
                .execute(&mut conn)
                .await
        })
        .await
        .unwrap_or_else(|e| panic!("cannot drop schema {}: {e}", self.name));
    }
}

/// Connects to `url`, first creating its database (through the `postgres`
/// maintenance database) when the server says it does not exist.
async fn connect_creating_database(url: &str) -> PgConnection {
    let unreachable = |e: sqlx::Error| -> PgConnection {
        panic!("{URL_VAR}={} is unreachable: {e}", redact_url(url))
    };
    // Ok(None): the server answered that the database does not exist.
    let what = format!("{URL_VAR}={}", redact_url(url));
    let first = connect_with_retry(&what, || async {
        match PgConnection::connect(url).await {
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("3D000") => Ok(None),
            other => other.map(Some),
        }
    })
    .await;
    if let Some(conn) = first {
        return conn;
    }
    let options = PgConnectOptions::from_str(url)
        .unwrap_or_else(|e| panic!("{URL_VAR} is not a valid URL: {e}"));
    let database = options
        .get_database()
        .unwrap_or("postgres")
        .replace('"', "");
    let mut admin = PgConnection::connect_with(&options.clone().database("postgres"))
        .await
        .unwrap_or_else(|e| panic!("{URL_VAR}: cannot reach the postgres database: {e}"));
    let created = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE DATABASE \"{database}\""
    )))
    .execute(&mut admin)
    .await;
    match created {
        // 42P04: another test created it first; 23505: the same race, seen in pg_database.
        Err(sqlx::Error::Database(e)) if matches!(e.code().as_deref(), Some("42P04" | "23505")) => {
        }
        Err(e) => panic!("{URL_VAR}: cannot create database {database}: {e}"),
        Ok(_) => {}
    }
    PgConnection::connect(url).await.unwrap_or_else(unreachable)
}

#[cfg(feature = "containers")]
fn fallback() -> Option<Fallback> {
    Some(super::containers::postgres_url)
}

#[cfg(not(feature = "containers"))]
fn fallback() -> Option<Fallback> {
    None
}
