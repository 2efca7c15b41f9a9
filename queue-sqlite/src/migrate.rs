//! The embedded SQLite migrations and the runner that applies them.

use queue_core::Result;
use queue_core::backend::migration::{Migration, check_sequence, unapplied};
use sqlx::{Row, SqlitePool};

use crate::error::open_error;
use crate::sql;

/// Every migration of `queue-sqlite/migrations`, in order, embedded at compile time.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "job_queue",
        sql: include_str!("../migrations/0001_job_queue.sql"),
    },
    Migration {
        version: 2,
        name: "flow_control",
        sql: include_str!("../migrations/0002_flow_control.sql"),
    },
    Migration {
        version: 3,
        name: "trace_context",
        sql: include_str!("../migrations/0003_trace_context.sql"),
    },
    Migration {
        version: 4,
        name: "workers",
        sql: include_str!("../migrations/0004_workers.sql"),
    },
    Migration {
        version: 5,
        name: "group_limits",
        sql: include_str!("../migrations/0005_group_limits.sql"),
    },
    Migration {
        version: 6,
        name: "throughput_counters",
        sql: include_str!("../migrations/0006_throughput_counters.sql"),
    },
    Migration {
        version: 7,
        name: "priority_aging",
        sql: include_str!("../migrations/0007_priority_aging.sql"),
    },
    Migration {
        version: 8,
        name: "listing_indexes",
        sql: include_str!("../migrations/0008_listing_indexes.sql"),
    },
    Migration {
        version: 9,
        name: "samples",
        sql: include_str!("../migrations/0009_samples.sql"),
    },
    Migration {
        version: 10,
        name: "fair_groups",
        sql: include_str!("../migrations/0010_fair_groups.sql"),
    },
    Migration {
        version: 11,
        name: "group_weights",
        sql: include_str!("../migrations/0011_group_weights.sql"),
    },
    Migration {
        version: 12,
        name: "dependencies",
        sql: include_str!("../migrations/0012_dependencies.sql"),
    },
];

/// Applies the migrations not yet applied to the database of `pool` and
/// returns their versions; `path` names the database in errors.
///
/// All of it runs in one `BEGIN IMMEDIATE` transaction: concurrent callers
/// (other processes on the same file) wait for each other, and a failure
/// leaves nothing behind. Applying again is a no-op returning an empty
/// list; a migration recorded with another checksum is
/// [`queue_core::QueueError::Conflict`]; newer versions are left alone.
pub async fn migrate(pool: &SqlitePool, path: &str) -> Result<Vec<u32>> {
    check_sequence(MIGRATIONS)?;
    let fail = |error| open_error(path, error);
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.map_err(fail)?;
    sqlx::query(sql::MIGRATE_CREATE_LEDGER)
        .execute(&mut *tx)
        .await
        .map_err(fail)?;
    let recorded: Vec<(u32, i64)> = sqlx::query(sql::MIGRATE_APPLIED)
        .fetch_all(&mut *tx)
        .await
        .map_err(fail)?
        .iter()
        .map(|row| {
            let version = u32::try_from(row.get::<i64, _>("version")).unwrap_or(u32::MAX);
            (version, row.get::<i64, _>("checksum"))
        })
        .collect();
    let mut newly_applied = Vec::new();
    for migration in unapplied(MIGRATIONS, &recorded)? {
        sqlx::raw_sql(migration.sql)
            .execute(&mut *tx)
            .await
            .map_err(fail)?;
        sqlx::query(sql::MIGRATE_RECORD)
            .bind(i64::from(migration.version))
            .bind(migration.name)
            .bind(migration.checksum())
            .execute(&mut *tx)
            .await
            .map_err(fail)?;
        newly_applied.push(migration.version);
    }
    tx.commit().await.map_err(fail)?;
    Ok(newly_applied)
}
