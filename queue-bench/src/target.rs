//! What the workloads need of a backend beyond `Storage`: a fresh place to
//! run in and counts to verify a run by.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use queue_core::Storage;
use queue_mysql::MySqlStorage;
use queue_postgres::PgStorage;
use queue_redis::RedisStorage;
use queue_sqlite::SqliteStorage;

use crate::BenchError;

/// Settings every backend is opened with.
#[derive(Debug, Clone)]
pub(crate) struct Setup {
    pub(crate) url: String,
    pub(crate) schema: String,
    pub(crate) pool: u32,
    pub(crate) notify: bool,
    pub(crate) prefetch: usize,
    /// `WorkerOptions::completion_batch`, when not the default.
    pub(crate) completion_batch: Option<usize>,
    /// Whether workers record samples (`--no-samples` turns them off).
    pub(crate) samples: bool,
    /// The backend the run is for (what `--facade` opens through `AnyStorage`).
    pub(crate) backend: crate::args::Backend,
    /// PostgreSQL: whether keyless jobs stay in the unique-key index (as
    /// migrated) or not (`--keyless-unindexed`).
    pub(crate) keyless_indexed: bool,
    /// PostgreSQL: claims commit asynchronously (`--async-claims`).
    pub(crate) async_claims: bool,
    /// PostgreSQL: through a transaction-pooling PgBouncer
    /// (`--transaction-pooling`).
    pub(crate) transaction_pooling: bool,
    /// PostgreSQL: where LISTEN connects (`--listen-url`), when not the pool.
    pub(crate) listen_url: Option<String>,
    /// Redis: replicas each write waits for (`--wait-replicas`).
    pub(crate) wait_replicas: Option<u32>,
}

/// A backend the benchmark can run on.
#[async_trait]
pub(crate) trait Target: Storage + Clone + Sized + 'static {
    /// `postgres` or `mysql`.
    const NAME: &'static str;

    /// Drops and recreates the schema (or database), migrates it and
    /// returns a storage in it.
    async fn fresh(setup: &Setup) -> Result<Self, BenchError>;

    /// A storage with a pool of its own in the schema (or database) that
    /// [`Target::fresh`] made, its contents left as they are: what another
    /// process of the same run opens (`hosts`).
    async fn open(setup: &Setup) -> Result<Self, BenchError> {
        let _ = setup;
        Err(format!(
            "opening another process's storage is not supported on {} (hosts needs a server)",
            Self::NAME
        )
        .into())
    }

    /// Live rows of `queue` with priority >= 0 (the measured jobs; filler
    /// jobs have negative priorities).
    async fn count_live(&self, queue: &str) -> Result<i64, BenchError>;

    /// Completed history rows of `queue` with priority >= 0.
    async fn count_completed(&self, queue: &str) -> Result<i64, BenchError>;

    /// Whether enqueues signal waiting workers.
    fn notifies(setup: &Setup) -> bool;

    /// Brings the tables after a bulk load to what the server's own
    /// maintenance keeps them at (PostgreSQL: `VACUUM ANALYZE`, as
    /// autovacuum would; elsewhere nothing), so that reads are timed at
    /// steady state rather than on a table without statistics or a
    /// visibility map.
    async fn settle(&self) -> Result<(), BenchError> {
        Ok(())
    }

    /// Writes `n` completed history rows of `queue` (priority -1, ids
    /// below every job's) that finished `age` ago (`drain --history`).
    async fn fill_history(&self, queue: &str, n: usize, age: Duration) -> Result<(), BenchError> {
        let _ = (queue, n, age);
        Err(format!("--history is not supported on {}", Self::NAME).into())
    }
}

#[async_trait]
impl Target for PgStorage {
    const NAME: &'static str = "postgres";

    async fn fresh(setup: &Setup) -> Result<Self, BenchError> {
        queue_postgres::create_database_if_missing(&setup.url).await?;
        let storage = Self::open(setup).await?;
        let drop = format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", setup.schema);
        sqlx::raw_sql(sqlx::AssertSqlSafe(drop))
            .execute(storage.pool())
            .await?;
        storage.migrate().await?;
        storage.index_keyless_jobs(setup.keyless_indexed).await?;
        Ok(storage)
    }

    async fn open(setup: &Setup) -> Result<Self, BenchError> {
        let pool = queue_postgres::pool_options()
            .max_connections(setup.pool)
            .connect(&setup.url)
            .await?;
        let mut storage = PgStorage::from_pool(pool)
            .with_schema(&setup.schema)?
            .with_async_claims(setup.async_claims)
            .with_transaction_pooling(setup.transaction_pooling);
        if let Some(url) = &setup.listen_url {
            storage = storage.with_listen_url(url)?;
        }
        Ok(storage)
    }

    async fn settle(&self) -> Result<(), BenchError> {
        for table in ["job_queue", "job_history", "job_throughput"] {
            let sql = format!("VACUUM ANALYZE \"{}\".{table}", self.schema());
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(self.pool())
                .await?;
        }
        Ok(())
    }

    async fn fill_history(&self, queue: &str, n: usize, age: Duration) -> Result<(), BenchError> {
        let sql = format!(
            "INSERT INTO \"{}\".job_history (id, queue_name, priority, payload, status_final, \
             attempts, max_attempts, processed_by, created_at, started_at, finished_at) \
             SELECT -g, $1, -1, '{{}}'::jsonb, 'completed', 1, 25, 'bench-filler', f.t, f.t, f.t \
             FROM generate_series($2::bigint, $3::bigint) AS g, \
             LATERAL (SELECT now() - make_interval(secs => $4) - g * interval '1 microsecond') AS f(t)",
            self.schema()
        );
        const STEP: usize = 1_000_000;
        for first in (1..=n).step_by(STEP) {
            let last = (first + STEP - 1).min(n);
            sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                .bind(queue)
                .bind(i64::try_from(first).map_err(|e| e.to_string())?)
                .bind(i64::try_from(last).map_err(|e| e.to_string())?)
                .bind(age.as_secs_f64())
                .execute(self.pool())
                .await?;
        }
        Ok(())
    }

    async fn count_live(&self, queue: &str) -> Result<i64, BenchError> {
        let sql = format!(
            "SELECT count(*) FROM \"{}\".job_queue WHERE queue_name = $1 AND priority >= 0",
            self.schema()
        );
        Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(queue)
            .fetch_one(self.pool())
            .await?)
    }

    async fn count_completed(&self, queue: &str) -> Result<i64, BenchError> {
        let sql = format!(
            "SELECT count(*) FROM \"{}\".job_history \
             WHERE queue_name = $1 AND priority >= 0 AND status_final = 'completed'",
            self.schema()
        );
        Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(queue)
            .fetch_one(self.pool())
            .await?)
    }

    fn notifies(setup: &Setup) -> bool {
        setup.notify && (!setup.transaction_pooling || setup.listen_url.is_some())
    }
}

#[async_trait]
impl Target for MySqlStorage {
    const NAME: &'static str = "mysql";

    async fn fresh(setup: &Setup) -> Result<Self, BenchError> {
        let mut conn = mysql_conn(&setup.url).await?;
        conn.query_drop(format!("DROP DATABASE IF EXISTS `{}`", setup.schema))
            .await?;
        conn.query_drop(format!(
            "CREATE DATABASE `{}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
            setup.schema
        ))
        .await?;
        conn.disconnect().await?;
        let storage = Self::open(setup).await?;
        storage.migrate().await?;
        Ok(storage)
    }

    async fn open(setup: &Setup) -> Result<Self, BenchError> {
        let url = queue_core::with_database(&setup.url, &setup.schema);
        Ok(MySqlStorage::connect_with_size(&url, setup.pool as usize)?)
    }

    async fn count_live(&self, queue: &str) -> Result<i64, BenchError> {
        mysql_count(
            self,
            "SELECT COUNT(*) AS n FROM job_queue WHERE queue_name = ? AND priority >= 0",
            queue,
        )
        .await
    }

    async fn count_completed(&self, queue: &str) -> Result<i64, BenchError> {
        mysql_count(
            self,
            "SELECT COUNT(*) AS n FROM job_history \
             WHERE queue_name = ? AND priority >= 0 AND status_final = 'completed'",
            queue,
        )
        .await
    }

    fn notifies(_setup: &Setup) -> bool {
        false
    }
}

/// Counts through the storage's own pool, so the query sees its database.
async fn mysql_count(
    storage: &MySqlStorage,
    sql: &'static str,
    queue: &str,
) -> Result<i64, BenchError> {
    {
        use diesel::sql_types::{BigInt, Text};
        use diesel_async::RunQueryDsl;

        #[derive(diesel::QueryableByName)]
        struct Count {
            #[diesel(sql_type = BigInt)]
            n: i64,
        }
        let mut conn = storage
            .pool()
            .get()
            .await
            .map_err(|e| BenchError::from(e.to_string()))?;
        let row: Count = diesel::sql_query(sql)
            .bind::<Text, _>(queue)
            .get_result(&mut *conn)
            .await
            .map_err(|e| BenchError::from(e.to_string()))?;
        Ok(row.n)
    }
}

async fn mysql_conn(url: &str) -> Result<mysql_async::Conn, BenchError> {
    let opts = mysql_async::Opts::from_url(url)
        .map_err(|e| BenchError::from(queue_core::redact_secrets(&e.to_string(), url)))?;
    Ok(mysql_async::Conn::new(opts).await?)
}

#[async_trait]
impl Target for SqliteStorage {
    const NAME: &'static str = "sqlite";

    /// As a running application's SQLite would be between bursts: the
    /// write-ahead log checkpointed into the database and emptied (a bulk
    /// load left it at 1.5 GB, which every read then searched: 40 ms for
    /// a lookup by id) and the tables analyzed.
    async fn settle(&self) -> Result<(), BenchError> {
        sqlx::raw_sql("PRAGMA wal_checkpoint(TRUNCATE); ANALYZE;")
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Opens a new file for each measurement, `<path>.<n>`, after deleting
    /// the one of the measurement before and any stale copy (with their
    /// WAL and shared-memory files). Reusing one path let connections of
    /// the previous measurement's storage, still closing, read a file
    /// deleted under them ("disk I/O error"). `--pool` does not apply (the
    /// storage sizes its own).
    async fn fresh(setup: &Setup) -> Result<Self, BenchError> {
        static MEASUREMENT: AtomicU32 = AtomicU32::new(0);
        let Some(path) = sqlite_path(&setup.url) else {
            return Ok(SqliteStorage::connect(&setup.url).await?);
        };
        let n = MEASUREMENT.fetch_add(1, Ordering::Relaxed);
        let file = format!("{path}.{n}");
        let previous = n.checked_sub(1).map(|p| format!("{path}.{p}"));
        for stale in std::iter::once(file.clone()).chain(previous) {
            for suffix in ["", "-wal", "-shm"] {
                match std::fs::remove_file(format!("{stale}{suffix}")) {
                    Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                        return Err(BenchError::from(format!(
                            "removing {stale}{suffix}: {error}"
                        )));
                    }
                    _ => {}
                }
            }
        }
        let url = setup.url.replacen(path, &file, 1);
        Ok(SqliteStorage::connect(&url).await?)
    }

    async fn count_live(&self, queue: &str) -> Result<i64, BenchError> {
        Ok(sqlx::query_scalar(
            "SELECT count(*) FROM job_queue WHERE queue_name = ?1 AND priority >= 0",
        )
        .bind(queue)
        .fetch_one(self.pool())
        .await?)
    }

    async fn count_completed(&self, queue: &str) -> Result<i64, BenchError> {
        Ok(sqlx::query_scalar(
            "SELECT count(*) FROM job_history \
             WHERE queue_name = ?1 AND priority >= 0 AND status_final = 'completed'",
        )
        .bind(queue)
        .fetch_one(self.pool())
        .await?)
    }

    /// Enqueues wake the workers of the same process (the benchmark's).
    fn notifies(_setup: &Setup) -> bool {
        true
    }
}

#[async_trait]
impl Target for RedisStorage {
    const NAME: &'static str = "redis";

    /// Clears the namespace `--schema` and records the key layout.
    /// `--pool` does not apply (one multiplexed connection).
    async fn fresh(setup: &Setup) -> Result<Self, BenchError> {
        let storage = redis_namespace(setup).await?;
        storage.clear().await?;
        storage.migrate().await?;
        redis_durability(storage, setup)
    }

    async fn open(setup: &Setup) -> Result<Self, BenchError> {
        redis_durability(redis_namespace(setup).await?, setup)
    }

    async fn count_live(&self, queue: &str) -> Result<i64, BenchError> {
        let (live, _) = self
            .count_at_priority(&queue_core::QueueName::new(queue)?, 0)
            .await?;
        Ok(i64::try_from(live).unwrap_or(i64::MAX))
    }

    async fn count_completed(&self, queue: &str) -> Result<i64, BenchError> {
        let (_, completed) = self
            .count_at_priority(&queue_core::QueueName::new(queue)?, 0)
            .await?;
        Ok(i64::try_from(completed).unwrap_or(i64::MAX))
    }

    /// Enqueues publish on the namespace's channel.
    fn notifies(setup: &Setup) -> bool {
        setup.notify
    }
}

/// A connection to `--url` in the namespace `--schema`.
async fn redis_namespace(setup: &Setup) -> Result<RedisStorage, BenchError> {
    Ok(RedisStorage::connect(&setup.url)
        .await?
        .with_namespace(&setup.schema)?)
}

/// `storage`, waiting for `--wait-replicas` replicas after each write when given.
fn redis_durability(storage: RedisStorage, setup: &Setup) -> Result<RedisStorage, BenchError> {
    Ok(match setup.wait_replicas {
        Some(replicas) => {
            storage.with_durable_writes(replicas, std::time::Duration::from_secs(1))?
        }
        None => storage,
    })
}

/// The file of a `sqlite://path?query` URL; `None` for an in-memory one.
fn sqlite_path(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("sqlite://")?;
    let path = rest.split('?').next().unwrap_or(rest);
    (!path.is_empty() && !path.contains(":memory:")).then_some(path)
}
