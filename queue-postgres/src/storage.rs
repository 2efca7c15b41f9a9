//! `PgStorage`: a pool, a schema, a clock, and the statements for them.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use queue_core::{Clock, QueueError, Result};
use sqlx::PgPool;
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgPoolOptions;

use crate::interpret_error;
use crate::sql::Statements;

/// The schema used when none is given.
pub const DEFAULT_SCHEMA: &str = "public";

/// A job-queue storage in one PostgreSQL schema.
///
/// Cheap to clone: clones share the pool. Every statement names its tables
/// with the schema, so it works on any connection whatever its
/// `search_path`, including the caller's own transactions
/// ([`PgStorage::enqueue_in`], [`PgStorage::ack_in`], [`PgStorage::nack_in`]).
#[derive(Debug, Clone)]
pub struct PgStorage {
    pub(crate) pool: PgPool,
    pub(crate) clock: Clock,
    pub(crate) sql: Arc<Statements>,
    schema: Arc<str>,
    channel: Arc<str>,
    pub(crate) signals: Arc<crate::signals::Signals>,
}

impl PgStorage {
    /// Connects a pool of 10 connections to `url`, in the `public` schema.
    ///
    /// # Errors
    /// [`QueueError::Unavailable`] when the server cannot be reached.
    pub async fn connect(url: &str) -> Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(10)
            .connect(url)
            .await
            .map_err(interpret_error)?;
        Ok(Self::from_pool(pool))
    }

    /// A storage on an existing pool, in the `public` schema, on the
    /// database's clock.
    pub fn from_pool(pool: PgPool) -> Self {
        Self::build(pool, Clock::Database, DEFAULT_SCHEMA)
    }

    /// The same storage in another schema (created by [`PgStorage::migrate`]),
    /// so several applications or tests can share one database.
    ///
    /// # Errors
    /// [`QueueError::InvalidInput`] for `schema` unless it is an ASCII
    /// letter or underscore followed by up to 62 letters, digits or
    /// underscores.
    pub fn with_schema(self, schema: &str) -> Result<Self> {
        validate_schema(schema)?;
        Ok(Self::build(self.pool, self.clock, schema))
    }

    /// The same storage reading `clock`: a [`queue_core::ManualClock`] in
    /// tests, bound into every statement in place of the server's `now()`.
    pub fn with_clock(mut self, clock: impl Into<Clock>) -> Self {
        self.clock = clock.into();
        self
    }

    fn build(pool: PgPool, clock: Clock, schema: &str) -> Self {
        let channel = format!("queue_jobs.{schema}");
        Self {
            pool,
            clock,
            sql: Arc::new(Statements::for_schema(schema, &channel)),
            schema: schema.into(),
            channel: channel.into(),
            signals: Arc::default(),
        }
    }

    /// The pool, for the caller's own transactions.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The schema holding the queue's tables.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The LISTEN/NOTIFY channel on which enqueues announce their queue.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// Creates the schema if needed and applies the embedded migrations not
    /// yet applied there; returns their versions (see [`crate::migrate`]).
    pub async fn migrate(&self) -> Result<Vec<u32>> {
        crate::migrate(&self.pool, &self.schema).await
    }

    /// The manual clock's time, or `None` to let the server's `now()` decide.
    pub(crate) fn now_override(&self) -> Option<DateTime<Utc>> {
        self.clock.fixed_now()
    }

    pub(crate) async fn connection(&self) -> Result<PoolConnection<sqlx::Postgres>, sqlx::Error> {
        self.pool.acquire().await
    }
}

/// Accepts the schema names `PgStorage` can embed in its statements.
pub(crate) fn validate_schema(schema: &str) -> Result<()> {
    let mut chars = schema.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if first_ok && rest_ok && schema.len() <= 63 {
        Ok(())
    } else {
        Err(QueueError::invalid(
            "schema",
            format!(
                "{schema:?} must be an ASCII letter or underscore followed by up to 62 letters, digits or underscores"
            ),
        ))
    }
}
