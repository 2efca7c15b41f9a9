//! The optional form of `job_queue_unique_key` that leaves keyless jobs
//! out (`queue-postgres/migrations/optional`; why and what it costs:
//! docs/operations.md, "Keyless jobs out of the unique-key index").

use queue_core::Result;
use sqlx::{AssertSqlSafe, Connection, Row};

use crate::PgStorage;
use crate::error::retrying;

/// Makes the index partial (keyed jobs only).
const UNINDEXED: &str = include_str!("../migrations/optional/keyless_jobs_unindexed.sql");

/// Makes it plain again, as migration 0001 created it.
const INDEXED: &str = include_str!("../migrations/optional/keyless_jobs_indexed.sql");

/// The definition of this schema's `job_queue_unique_key`.
const DEFINITION: &str = "SELECT indexdef FROM pg_indexes \
     WHERE schemaname = $1 AND indexname = 'job_queue_unique_key'";

/// The statements of an optional file, comments dropped, in order.
fn statements(file: &str) -> Vec<String> {
    let code: Vec<&str> = file
        .lines()
        .filter(|line| !line.trim_start().starts_with("--"))
        .collect();
    code.join("\n")
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

impl PgStorage {
    /// Whether `job_queue_unique_key` holds keyless jobs too: `true` for
    /// the plain index that the migrations create, `false` once
    /// [`PgStorage::index_keyless_jobs`] made it partial.
    ///
    /// # Errors
    /// [`queue_core::QueueError::Backend`] when the index is missing (the
    /// schema is not migrated); otherwise as any query.
    pub async fn keyless_jobs_indexed(&self) -> Result<bool> {
        let row = retrying(true, || {
            self.db()
                .fetch_optional(sqlx::query(DEFINITION).bind(self.schema()))
        })
        .await?;
        let definition: Option<String> = row
            .map(|row| row.try_get(0))
            .transpose()
            .map_err(crate::interpret_error)?;
        let definition = definition.ok_or_else(|| {
            queue_core::QueueError::backend(format!(
                "no index job_queue_unique_key in schema {}: run the migrations first",
                self.schema()
            ))
        })?;
        Ok(!definition.contains(" WHERE "))
    }

    /// Gives `job_queue_unique_key` the form asked for, if it has the other:
    /// `false` keeps keyless jobs out of it (every enqueue, claim and
    /// heartbeat of a keyless job then writes one index entry less),
    /// `true` restores the plain index of the migrations. The storage
    /// works with either; an application's own `INSERT ... ON CONFLICT
    /// (queue_name, unique_key)` infers the partial one only with `WHERE
    /// unique_key IS NOT NULL`. Runs the statements of
    /// `queue-postgres/migrations/optional/keyless_jobs_{unindexed,indexed}.sql`
    /// on one connection, each on its own (`CONCURRENTLY`: enqueues and
    /// claims go on, and a unique index on the key exists throughout).
    ///
    /// A change needs a session (`CONCURRENTLY` runs outside a
    /// transaction, on the schema's `search_path`): a storage in
    /// transaction pooling ([`PgStorage::with_transaction_pooling`])
    /// refuses one; make it with a storage connected directly.
    ///
    /// # Errors
    /// As [`PgStorage::keyless_jobs_indexed`]; a failed statement (for
    /// example an interrupted earlier run's leftover index: the file says
    /// what to do) as any query;
    /// [`queue_core::QueueError::InvalidInput`] for a change in
    /// transaction pooling.
    pub async fn index_keyless_jobs(&self, indexed: bool) -> Result<()> {
        if self.keyless_jobs_indexed().await? == indexed {
            return Ok(());
        }
        if self.transaction_pooling() {
            return Err(queue_core::QueueError::invalid(
                "transaction_pooling",
                "index_keyless_jobs needs a session (CREATE INDEX CONCURRENTLY, search_path): \
                 run it on a storage connected directly or through session pooling",
            ));
        }
        let file = if indexed { INDEXED } else { UNINDEXED };
        let mut conn = self.pool.acquire().await.map_err(crate::interpret_error)?;
        let run = async {
            sqlx::query("SELECT set_config('search_path', $1, false)")
                .bind(format!("\"{}\"", self.schema()))
                .execute(&mut *conn)
                .await?;
            for statement in statements(file) {
                sqlx::raw_sql(AssertSqlSafe(statement))
                    .execute(&mut *conn)
                    .await?;
            }
            sqlx::raw_sql("RESET search_path")
                .execute(&mut *conn)
                .await?;
            Ok::<(), sqlx::Error>(())
        };
        if let Err(error) = run.await {
            // The connection's search_path may still name the schema.
            let _ = conn.detach().close().await;
            return Err(crate::interpret_error(error));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_optional_files_split_into_their_statements() {
        for file in [UNINDEXED, INDEXED] {
            let all = statements(file);
            assert_eq!(all.len(), 3, "{all:?}");
            assert!(all[0].starts_with("CREATE UNIQUE INDEX CONCURRENTLY"));
            assert!(all[1].starts_with("DROP INDEX CONCURRENTLY job_queue_unique_key"));
            assert!(all[2].starts_with("ALTER INDEX"));
        }
    }
}
