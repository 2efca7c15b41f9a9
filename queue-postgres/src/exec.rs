//! How the storage sends its statements: the one place that knows whether
//! it talks to PostgreSQL (or a session-pooling PgBouncer) directly, or
//! through a PgBouncer in transaction pooling mode
//! ([`PgStorage::with_transaction_pooling`]).
//!
//! Every statement of the storage runs through an [`Exec`]: on the pool
//! ([`PgStorage::db`]) or on a connection the storage or the caller holds
//! ([`PgStorage::on`]). Directly, an `Exec` hands the statement to sqlx
//! unchanged: a named statement, prepared once per connection and cached.
//! In transaction pooling, it makes the statement unnamed, and a statement
//! on the pool runs in a transaction of its own (`BEGIN` ... `COMMIT`),
//! which keeps one server connection from its Parse to its commit
//! (docs/high-availability.md, "Transaction pooling").

use queue_core::Result;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgArguments, PgQueryResult, PgRow};
use sqlx::{Execute, Executor, PgConnection, PgPool, Postgres, Transaction};

use crate::PgStorage;

/// How statements reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Pooling {
    /// A session per connection: named statements, cached per connection.
    #[default]
    Session,
    /// PgBouncer's transaction pooling: unnamed statements, each in a
    /// transaction.
    Transaction,
}

/// A statement as sqlx runs it, except that it is never prepared under a
/// name when `unnamed`: sqlx then parses it as the unnamed statement, in
/// the same exchange as the rest of the transaction.
struct Statement<E> {
    inner: E,
    unnamed: bool,
}

impl<'q, E: Execute<'q, Postgres>> Execute<'q, Postgres> for Statement<E> {
    fn sql(self) -> sqlx::SqlStr {
        self.inner.sql()
    }

    fn statement(&self) -> Option<&sqlx::postgres::PgStatement> {
        if self.unnamed {
            None
        } else {
            self.inner.statement()
        }
    }

    fn take_arguments(&mut self) -> Result<Option<PgArguments>, sqlx::error::BoxDynError> {
        self.inner.take_arguments()
    }

    fn persistent(&self) -> bool {
        !self.unnamed && self.inner.persistent()
    }
}

/// Where a statement runs.
enum Target<'c> {
    Pool(&'c PgPool),
    Connection(&'c mut PgConnection),
}

/// Runs one statement of the storage, as its [`Pooling`] needs.
pub(crate) struct Exec<'c> {
    target: Target<'c>,
    pooling: Pooling,
}

/// Runs `$run` (a call on an executor named `$on`) for an [`Exec`]: as
/// it is, or in a transaction of its own on the pool.
macro_rules! run {
    ($exec:expr, $query:expr, |$on:ident, $statement:ident| $run:expr) => {{
        let exec = $exec;
        let $statement = Statement {
            inner: $query,
            unnamed: exec.pooling == Pooling::Transaction,
        };
        match (exec.target, exec.pooling) {
            (Target::Connection($on), _) => $run.await,
            (Target::Pool($on), Pooling::Session) => $run.await,
            (Target::Pool(pool), Pooling::Transaction) => {
                let mut tx = pool.begin().await?;
                let $on = &mut *tx;
                let out = $run.await?;
                tx.commit().await?;
                Ok(out)
            }
        }
    }};
}

impl Exec<'_> {
    /// Every row.
    pub(crate) async fn fetch_all<'q, E>(self, query: E) -> Result<Vec<PgRow>, sqlx::Error>
    where
        E: Execute<'q, Postgres> + 'q,
    {
        run!(self, query, |on, statement| on.fetch_all(statement))
    }

    /// The one row; [`sqlx::Error::RowNotFound`] when there is none.
    pub(crate) async fn fetch_one<'q, E>(self, query: E) -> Result<PgRow, sqlx::Error>
    where
        E: Execute<'q, Postgres> + 'q,
    {
        run!(self, query, |on, statement| on.fetch_one(statement))
    }

    /// The first row, if any.
    pub(crate) async fn fetch_optional<'q, E>(self, query: E) -> Result<Option<PgRow>, sqlx::Error>
    where
        E: Execute<'q, Postgres> + 'q,
    {
        run!(self, query, |on, statement| on.fetch_optional(statement))
    }

    /// What it did, rows ignored.
    pub(crate) async fn execute<'q, E>(self, query: E) -> Result<PgQueryResult, sqlx::Error>
    where
        E: Execute<'q, Postgres> + 'q,
    {
        run!(self, query, |on, statement| on.execute(statement))
    }
}

/// A connection of the pool for several statements of the storage: as it
/// is directly, in a transaction in transaction pooling (committed by
/// [`Session::finish`], rolled back if dropped before).
pub(crate) enum Session {
    Plain(PoolConnection<Postgres>),
    Transaction(Transaction<'static, Postgres>),
}

impl Session {
    /// The connection, for [`PgStorage::on`].
    pub(crate) fn connection(&mut self) -> &mut PgConnection {
        match self {
            Session::Plain(conn) => conn,
            Session::Transaction(tx) => tx,
        }
    }

    /// Commits the transaction, if there is one.
    pub(crate) async fn finish(self) -> Result<(), sqlx::Error> {
        match self {
            Session::Plain(_) => Ok(()),
            Session::Transaction(tx) => tx.commit().await,
        }
    }
}

impl<'c> Exec<'c> {
    /// A statement on `conn`, sent as `pooling` needs.
    pub(crate) fn on(conn: &'c mut PgConnection, pooling: Pooling) -> Self {
        Exec {
            target: Target::Connection(conn),
            pooling,
        }
    }
}

impl PgStorage {
    /// A statement on the pool.
    pub(crate) fn db(&self) -> Exec<'_> {
        pooled(&self.pool, self.pooling)
    }

    /// A statement of an operator's read, on the read pool when there is
    /// one ([`PgStorage::with_read_pool`]), else as [`PgStorage::db`].
    pub(crate) fn read_db(&self) -> Exec<'_> {
        pooled(self.read_pool.as_ref().unwrap_or(&self.pool), self.pooling)
    }

    /// A statement on `conn`: the storage's own transaction or
    /// [`Session`], or the caller's connection ([`PgStorage::enqueue_in`]).
    pub(crate) fn on<'c>(&self, conn: &'c mut PgConnection) -> Exec<'c> {
        Exec::on(conn, self.pooling)
    }

    /// A connection for several statements (see [`Session`]).
    pub(crate) async fn session(&self) -> Result<Session, sqlx::Error> {
        match self.pooling {
            Pooling::Session => Ok(Session::Plain(self.pool.acquire().await?)),
            Pooling::Transaction => Ok(Session::Transaction(self.pool.begin().await?)),
        }
    }
}

/// A statement on `pool`, for the storage's background tasks.
pub(crate) fn pooled(pool: &PgPool, pooling: Pooling) -> Exec<'_> {
    Exec {
        target: Target::Pool(pool),
        pooling,
    }
}
