//! The embedded PostgreSQL migrations and the runner that applies them.

use queue_core::backend::migration::{Migration, check_sequence, unapplied};
use queue_core::{QueueError, Result};
use sqlx::{AssertSqlSafe, PgPool, Row};

use crate::exec::{Exec, Pooling};
use crate::interpret_error;

/// Every migration of `queue-postgres/migrations`, in order, embedded at compile time.
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
        name: "limited_claim",
        sql: include_str!("../migrations/0006_limited_claim.sql"),
    },
    Migration {
        version: 7,
        name: "claim_pick",
        sql: include_str!("../migrations/0007_claim_pick.sql"),
    },
    Migration {
        version: 8,
        name: "leased_index",
        sql: include_str!("../migrations/0008_leased_index.sql"),
    },
    Migration {
        version: 9,
        name: "by_id_functions",
        sql: include_str!("../migrations/0009_by_id_functions.sql"),
    },
    Migration {
        version: 10,
        name: "ready_ring",
        sql: include_str!("../migrations/0010_ready_ring.sql"),
    },
    Migration {
        version: 11,
        name: "ready_slots",
        sql: include_str!("../migrations/0011_ready_slots.sql"),
    },
    Migration {
        version: 12,
        name: "no_dequeue_index",
        sql: include_str!("../migrations/0012_no_dequeue_index.sql"),
    },
    Migration {
        version: 13,
        name: "ready_rotation_by_size",
        sql: include_str!("../migrations/0013_ready_rotation_by_size.sql"),
    },
    Migration {
        version: 14,
        name: "trace_context",
        sql: include_str!("../migrations/0014_trace_context.sql"),
    },
    Migration {
        version: 15,
        name: "workers",
        sql: include_str!("../migrations/0015_workers.sql"),
    },
    Migration {
        version: 16,
        name: "group_limits",
        sql: include_str!("../migrations/0016_group_limits.sql"),
    },
    Migration {
        version: 17,
        name: "listing_by_queue",
        sql: include_str!("../migrations/0017_listing_by_queue.sql"),
    },
    Migration {
        version: 18,
        name: "priority_aging",
        sql: include_str!("../migrations/0018_priority_aging.sql"),
    },
    Migration {
        version: 19,
        name: "samples",
        sql: include_str!("../migrations/0019_samples.sql"),
    },
    Migration {
        version: 20,
        name: "fair_groups",
        sql: include_str!("../migrations/0020_fair_groups.sql"),
    },
    Migration {
        version: 21,
        name: "group_weights",
        sql: include_str!("../migrations/0021_group_weights.sql"),
    },
    Migration {
        version: 22,
        name: "workflows",
        sql: include_str!("../migrations/0022_workflows.sql"),
    },
    Migration {
        version: 23,
        name: "finishes_per_statement",
        sql: include_str!("../migrations/0023_finishes_per_statement.sql"),
    },
    Migration {
        version: 24,
        name: "grouped_pick",
        sql: include_str!("../migrations/0024_grouped_pick.sql"),
    },
];

const CREATE_LEDGER: &str = "CREATE TABLE IF NOT EXISTS queue_schema_migrations (
    version    INTEGER     PRIMARY KEY,
    name       TEXT        NOT NULL,
    checksum   BIGINT      NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)";

/// Creates `schema` if needed, applies the migrations not yet applied
/// there, and returns their versions.
///
/// All of it runs in one transaction, with `search_path` set to the schema
/// and under an advisory lock keyed by it, so concurrent callers are safe
/// and a failure leaves nothing behind. Applying again is a no-op returning an empty list. A migration
/// whose recorded checksum differs from the embedded file is an error
/// ([`queue_core::QueueError::Conflict`]); versions newer than this library knows are
/// left alone, so older workers keep running during a rolling upgrade.
///
/// Its statements are unnamed, as in transaction pooling (each runs once:
/// caching them would gain nothing), so it works through a PgBouncer in
/// either pooling mode.
pub async fn migrate(pool: &PgPool, schema: &str) -> Result<Vec<u32>> {
    check_sequence(MIGRATIONS)?;
    validate_schema(schema)?;
    let mut tx = pool.begin().await.map_err(interpret_error)?;
    fn on(tx: &mut sqlx::PgConnection) -> Exec<'_> {
        Exec::on(tx, Pooling::Transaction)
    }
    on(&mut tx)
        .execute(
            sqlx::query("SELECT pg_advisory_xact_lock(hashtext('queue_migrate:' || $1))")
                .bind(schema),
        )
        .await
        .map_err(interpret_error)?;
    let prepare =
        format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"; SET LOCAL search_path TO \"{schema}\"");
    on(&mut tx)
        .execute(sqlx::raw_sql(AssertSqlSafe(prepare)))
        .await
        .map_err(interpret_error)?;
    on(&mut tx)
        .execute(sqlx::query(CREATE_LEDGER))
        .await
        .map_err(interpret_error)?;
    let applied = on(&mut tx)
        .fetch_all(sqlx::query(
            "SELECT version, checksum FROM queue_schema_migrations",
        ))
        .await
        .map_err(interpret_error)?;
    let recorded: Vec<(u32, i64)> = applied
        .iter()
        .map(|row| {
            let version = u32::try_from(row.get::<i32, _>("version")).unwrap_or(u32::MAX);
            (version, row.get::<i64, _>("checksum"))
        })
        .collect();
    let mut newly_applied = Vec::new();
    for migration in unapplied(MIGRATIONS, &recorded)? {
        let version = i32::try_from(migration.version).unwrap_or(i32::MAX);
        on(&mut tx)
            .execute(sqlx::raw_sql(migration.sql))
            .await
            .map_err(interpret_error)?;
        on(&mut tx)
            .execute(
                sqlx::query(
                    "INSERT INTO queue_schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                )
                .bind(version)
                .bind(migration.name)
                .bind(migration.checksum()),
            )
            .await
            .map_err(interpret_error)?;
        newly_applied.push(migration.version);
    }
    tx.commit().await.map_err(interpret_error)?;
    Ok(newly_applied)
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
