//! An isolated MySQL / MariaDB database per test.

use mysql_async::prelude::Queryable;

use super::{Fallback, connect_with_retry, database_url, unique_name};

/// The variable naming the MySQL server tests use.
pub const URL_VAR: &str = "QUEUE_TEST_MYSQL_URL";

/// A database created for one test.
#[derive(Debug)]
pub struct TestDatabase {
    server_url: String,
    name: String,
}

impl TestDatabase {
    /// Creates an empty database.
    ///
    /// # Panics
    /// When no server is configured, it cannot be reached, or the database
    /// cannot be created, with one line saying why.
    pub async fn create() -> Self {
        Self::create_on(database_url(URL_VAR, fallback())).await
    }

    /// Creates an empty database on the server of `server_url` (a URL
    /// without a database, as [`URL_VAR`] holds), for tests that name their
    /// servers themselves (a Galera cluster's nodes).
    ///
    /// # Panics
    /// As [`TestDatabase::create`].
    pub async fn create_on(server_url: String) -> Self {
        let name = unique_name();
        let mut conn = connect(&server_url).await;
        conn.query_drop(format!(
            "CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
        ))
        .await
        .unwrap_or_else(|e| panic!("cannot create database {name}: {e}"));
        let _ = conn.disconnect().await;
        Self { server_url, name }
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A URL whose default database is this one.
    pub fn url(&self) -> String {
        queue_core::with_database(&self.server_url, &self.name)
    }

    /// Drops the database and everything in it.
    pub async fn drop_database(self) {
        let mut conn = connect(&self.server_url).await;
        conn.query_drop(format!("DROP DATABASE `{}`", self.name))
            .await
            .unwrap_or_else(|e| panic!("cannot drop database {}: {e}", self.name));
        let _ = conn.disconnect().await;
    }
}

async fn connect(url: &str) -> mysql_async::Conn {
    let opts = mysql_async::Opts::from_url(url)
        .unwrap_or_else(|e| panic!("{URL_VAR} is not a valid URL: {e}"));
    let what = format!("{URL_VAR}={}", queue_core::redact_url(url));
    connect_with_retry(&what, || mysql_async::Conn::new(opts.clone())).await
}

#[cfg(feature = "containers")]
fn fallback() -> Option<Fallback> {
    Some(super::containers::mysql_url)
}

#[cfg(not(feature = "containers"))]
fn fallback() -> Option<Fallback> {
    None
}
