//! Creating the database itself, for tools and first runs: the one thing
//! `migrate` cannot do, since it needs a database to connect to.

use std::str::FromStr;

use queue_core::{QueueError, Result, redact_url};
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};

use crate::interpret_error;

/// SQLSTATE of a connection to a database that does not exist.
const INVALID_CATALOG_NAME: &str = "3D000";
/// SQLSTATE of `CREATE DATABASE` for a name that exists (a concurrent create).
const DUPLICATE_DATABASE: &str = "42P04";

/// Creates the database that `url` names unless it exists, connecting to
/// the server's `postgres` maintenance database to do so. Returns true when
/// it created it. Safe to call from several processes at once. For a URL
/// of several hosts, on the first that accepts writes.
///
/// # Errors
/// - [`QueueError::InvalidInput`] when `url` is not a PostgreSQL URL.
/// - [`QueueError::Unavailable`] when the server cannot be reached.
/// - [`QueueError::Backend`] when the user may not create databases.
pub async fn create_database_if_missing(url: &str) -> Result<bool> {
    let options = match crate::hosts::parse(url)? {
        // Several hosts: the database goes where writes go (found through
        // the maintenance database, since this one may not exist yet).
        Some(hosts) => {
            let (index, conn) = hosts.with_database("postgres").find_writable().await?;
            let _ = conn.close().await;
            hosts.options(index).clone()
        }
        None => PgConnectOptions::from_str(url)
            .map_err(|e| QueueError::invalid("url", format!("{}: {e}", redact_url(url))))?,
    };
    match PgConnection::connect_with(&options).await {
        Ok(conn) => {
            let _ = conn.close().await;
            return Ok(false);
        }
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some(INVALID_CATALOG_NAME) => {}
        Err(e) => return Err(interpret_error(e)),
    }
    let name = options
        .get_database()
        .unwrap_or("postgres")
        .replace('"', "\"\"");
    let mut admin = PgConnection::connect_with(&options.clone().database("postgres"))
        .await
        .map_err(interpret_error)?;
    let created = sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
        .execute(&mut admin)
        .await;
    let _ = admin.close().await;
    match created {
        Ok(_) => Ok(true),
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some(DUPLICATE_DATABASE) => {
            Ok(false)
        }
        Err(e) => Err(interpret_error(e)),
    }
}
