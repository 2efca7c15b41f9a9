//! Heartbeat: extending live leases.

use std::collections::HashSet;
use std::time::Duration;

use queue_core::backend::LeaseKey;
use queue_core::time::duration_micros;
use queue_core::{Lease, Result, validate_lease};
use sqlx::{AssertSqlSafe, Row};

use crate::{SqliteStorage, sql};

impl SqliteStorage {
    pub(crate) async fn heartbeat_pooled(
        &self,
        leases: &[Lease],
        extend_by: Duration,
    ) -> Result<Vec<bool>> {
        validate_lease("extend_by", extend_by)?;
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<LeaseKey> = leases.iter().map(LeaseKey::of).collect();
        write_tx!(self, |conn, now| async {
            let until = now.saturating_add(duration_micros(extend_by));
            let mut extended: HashSet<LeaseKey> = HashSet::with_capacity(keys.len());
            for chunk in keys.chunks(sql::ROWS_PER_STATEMENT) {
                let statement = sql::heartbeat_many(chunk.len());
                let mut query = sqlx::query(AssertSqlSafe(statement));
                for key in chunk {
                    query = query
                        .bind(key.id)
                        .bind(key.worker.clone())
                        .bind(key.attempt);
                }
                let query = query.bind(until).bind(now).bind(now);
                for row in query.fetch_all(&mut *conn).await? {
                    let worker: Option<String> = row.try_get("locked_by")?;
                    let key = LeaseKey::of_row(
                        row.try_get("id")?,
                        worker.as_deref(),
                        row.try_get("attempts")?,
                    );
                    extended.extend(key);
                }
            }
            Ok::<_, sqlx::Error>(keys.iter().map(|key| extended.contains(key)).collect())
        })
    }
}
