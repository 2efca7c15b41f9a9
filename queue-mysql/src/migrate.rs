//! The embedded MySQL migrations and the runner that applies them.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Integer, Nullable};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};
use queue_core::backend::migration::{Migration, check_sequence, unapplied};
use queue_core::{QueueError, Result};

use crate::interpret_error;

/// Every migration of `queue-mysql/migrations`, in order, embedded at compile time.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "job_queue",
        sql: include_str!("../migrations/0001_job_queue.sql"),
    },
    Migration {
        version: 2,
        name: "reclaim_indexes",
        sql: include_str!("../migrations/0002_reclaim_indexes.sql"),
    },
    Migration {
        version: 3,
        name: "plain_sql",
        sql: include_str!("../migrations/0003_plain_sql.sql"),
    },
    Migration {
        version: 4,
        name: "flow_control",
        sql: include_str!("../migrations/0004_flow_control.sql"),
    },
    Migration {
        version: 5,
        name: "throughput_counters",
        sql: include_str!("../migrations/0005_throughput_counters.sql"),
    },
    Migration {
        version: 6,
        name: "ready_ring",
        sql: include_str!("../migrations/0006_ready_ring.sql"),
    },
    Migration {
        version: 7,
        name: "trace_context",
        sql: include_str!("../migrations/0007_trace_context.sql"),
    },
    Migration {
        version: 8,
        name: "workers",
        sql: include_str!("../migrations/0008_workers.sql"),
    },
    Migration {
        version: 9,
        name: "group_limits",
        sql: include_str!("../migrations/0009_group_limits.sql"),
    },
    Migration {
        version: 10,
        name: "listing_by_queue",
        sql: include_str!("../migrations/0010_listing_by_queue.sql"),
    },
    Migration {
        version: 11,
        name: "priority_aging",
        sql: include_str!("../migrations/0011_priority_aging.sql"),
    },
    Migration {
        version: 12,
        name: "samples",
        sql: include_str!("../migrations/0012_samples.sql"),
    },
    Migration {
        version: 13,
        name: "fair_groups",
        sql: include_str!("../migrations/0013_fair_groups.sql"),
    },
    Migration {
        version: 14,
        name: "group_weights",
        sql: include_str!("../migrations/0014_group_weights.sql"),
    },
    Migration {
        version: 15,
        name: "workflows",
        sql: include_str!("../migrations/0015_workflows.sql"),
    },
];

const CREATE_LEDGER: &str = "CREATE TABLE IF NOT EXISTS queue_schema_migrations (
    version    INT          NOT NULL PRIMARY KEY,
    name       VARCHAR(191) NOT NULL,
    checksum   BIGINT       NOT NULL,
    applied_at DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin";

/// How long to wait for another process applying migrations, in seconds.
const LOCK_TIMEOUT_SECS: i64 = 60;

#[derive(QueryableByName)]
struct Applied {
    #[diesel(sql_type = Integer)]
    version: i32,
    #[diesel(sql_type = BigInt)]
    checksum: i64,
}

#[derive(QueryableByName)]
struct Locked {
    #[diesel(sql_type = Nullable<BigInt>)]
    locked: Option<i64>,
}

/// Applies the migrations not yet applied to the connection's current
/// database, and returns their versions.
///
/// A named lock (`GET_LOCK`, per database) serialises concurrent callers.
/// MySQL commits DDL implicitly, so a migration is not atomic; its
/// statements are written to be rerun, and a version is recorded only after
/// all its statements succeeded. Applying again is a no-op returning an
/// empty list. A migration whose recorded checksum differs from the embedded
/// file is an error ([`QueueError::Conflict`]); newer versions are left alone.
pub async fn migrate(conn: &mut AsyncMysqlConnection) -> Result<Vec<u32>> {
    check_sequence(MIGRATIONS)?;
    let lock = diesel::sql_query(
        "SELECT CAST(GET_LOCK(CONCAT('queue_migrate:', DATABASE()), ?) AS SIGNED) AS locked",
    )
    .bind::<BigInt, _>(LOCK_TIMEOUT_SECS)
    .get_result::<Locked>(conn)
    .await
    .map_err(interpret_error)?;
    if lock.locked != Some(1) {
        return Err(QueueError::unavailable(format!(
            "another process held the migration lock for {LOCK_TIMEOUT_SECS}s"
        )));
    }
    let outcome = apply_pending(conn).await;
    let released = diesel::sql_query("DO RELEASE_LOCK(CONCAT('queue_migrate:', DATABASE()))")
        .execute(conn)
        .await
        .map_err(interpret_error);
    let applied = outcome?;
    released?;
    Ok(applied)
}

async fn apply_pending(conn: &mut AsyncMysqlConnection) -> Result<Vec<u32>> {
    diesel::sql_query(CREATE_LEDGER)
        .execute(conn)
        .await
        .map_err(interpret_error)?;
    let applied = diesel::sql_query("SELECT version, checksum FROM queue_schema_migrations")
        .load::<Applied>(conn)
        .await
        .map_err(interpret_error)?;
    let recorded: Vec<(u32, i64)> = applied
        .iter()
        .map(|row| (u32::try_from(row.version).unwrap_or(u32::MAX), row.checksum))
        .collect();
    let mut newly_applied = Vec::new();
    for migration in unapplied(MIGRATIONS, &recorded)? {
        let version = i32::try_from(migration.version).unwrap_or(i32::MAX);
        // The text protocol: migrations may use statements (PREPARE,
        // EXECUTE) that the prepared-statement protocol refuses.
        for statement in migration.statements() {
            conn.batch_execute(statement)
                .await
                .map_err(interpret_error)?;
        }
        diesel::sql_query(
            "INSERT INTO queue_schema_migrations (version, name, checksum, applied_at) \
             VALUES (?, ?, ?, UTC_TIMESTAMP(6))",
        )
        .bind::<Integer, _>(version)
        .bind::<diesel::sql_types::Text, _>(migration.name)
        .bind::<BigInt, _>(migration.checksum())
        .execute(conn)
        .await
        .map_err(interpret_error)?;
        newly_applied.push(migration.version);
    }
    Ok(newly_applied)
}
