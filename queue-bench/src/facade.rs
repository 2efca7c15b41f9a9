//! The facade's `AnyStorage` as a benchmark target (`--facade`): the same
//! workloads through the enum an application gets from `queue::connect`,
//! to show what its dispatch costs.

use async_trait::async_trait;
use queue::AnyStorage;
use queue_mysql::MySqlStorage;
use queue_postgres::PgStorage;
use queue_redis::RedisStorage;
use queue_sqlite::SqliteStorage;

use crate::BenchError;
use crate::args::Backend;
use crate::target::{Setup, Target};

#[async_trait]
impl Target for AnyStorage {
    const NAME: &'static str = "facade";

    async fn fresh(setup: &Setup) -> Result<Self, BenchError> {
        Ok(match setup.backend {
            Backend::Postgres => PgStorage::fresh(setup).await?.into(),
            Backend::Mysql => MySqlStorage::fresh(setup).await?.into(),
            Backend::Sqlite => SqliteStorage::fresh(setup).await?.into(),
            Backend::Redis => RedisStorage::fresh(setup).await?.into(),
        })
    }

    async fn open(setup: &Setup) -> Result<Self, BenchError> {
        Ok(match setup.backend {
            Backend::Postgres => PgStorage::open(setup).await?.into(),
            Backend::Mysql => MySqlStorage::open(setup).await?.into(),
            Backend::Sqlite => SqliteStorage::open(setup).await?.into(),
            Backend::Redis => RedisStorage::open(setup).await?.into(),
        })
    }

    async fn count_live(&self, queue: &str) -> Result<i64, BenchError> {
        if let Some(redis) = self.as_redis() {
            return redis.count_live(queue).await;
        }
        match (self.as_postgres(), self.as_mysql(), self.as_sqlite()) {
            (Some(pg), _, _) => pg.count_live(queue).await,
            (_, Some(mysql), _) => mysql.count_live(queue).await,
            (_, _, Some(sqlite)) => sqlite.count_live(queue).await,
            _ => Err(BenchError::from(
                "a facade storage of no benchmarked backend",
            )),
        }
    }

    async fn count_completed(&self, queue: &str) -> Result<i64, BenchError> {
        if let Some(redis) = self.as_redis() {
            return redis.count_completed(queue).await;
        }
        match (self.as_postgres(), self.as_mysql(), self.as_sqlite()) {
            (Some(pg), _, _) => pg.count_completed(queue).await,
            (_, Some(mysql), _) => mysql.count_completed(queue).await,
            (_, _, Some(sqlite)) => sqlite.count_completed(queue).await,
            _ => Err(BenchError::from(
                "a facade storage of no benchmarked backend",
            )),
        }
    }

    fn notifies(setup: &Setup) -> bool {
        match setup.backend {
            Backend::Postgres => PgStorage::notifies(setup),
            Backend::Mysql => MySqlStorage::notifies(setup),
            Backend::Sqlite => SqliteStorage::notifies(setup),
            Backend::Redis => RedisStorage::notifies(setup),
        }
    }
}
