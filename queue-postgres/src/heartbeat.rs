//! Heartbeat: extending the leases still held, in one statement; and the
//! lease columns every fenced statement binds and returns.

use std::collections::HashSet;
use std::time::Duration;

use queue_core::backend::LeaseKey;
use queue_core::time::duration_micros;
use queue_core::{Lease, Result, validate_lease};
use sqlx::Row;

use crate::PgStorage;
use crate::error::{Failure, retrying};

/// Lease columns as arrays, for UNNEST.
pub(crate) fn lease_columns(leases: &[&Lease]) -> (Vec<i64>, Vec<String>, Vec<i32>) {
    let mut columns = (Vec::new(), Vec::new(), Vec::new());
    for key in leases.iter().map(|l| LeaseKey::of(l)) {
        columns.0.push(key.id);
        columns.1.push(key.worker);
        columns.2.push(key.attempt);
    }
    columns
}

/// The (id, locked_by/processed_by, attempts) triples a statement returned.
pub(crate) fn returned_leases(
    rows: &[sqlx::postgres::PgRow],
) -> Result<HashSet<LeaseKey>, Failure> {
    rows.iter()
        .map(|row| {
            Ok(LeaseKey {
                id: row.try_get(0)?,
                worker: row.try_get(1)?,
                attempt: row.try_get(2)?,
            })
        })
        .collect()
}

impl PgStorage {
    pub(crate) async fn heartbeat_pooled(
        &self,
        leases: &[Lease],
        extend_by: Duration,
    ) -> Result<Vec<bool>> {
        validate_lease("extend_by", extend_by)?;
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let (ids, workers, attempts) = lease_columns(&leases.iter().collect::<Vec<_>>());
        let extended = retrying(true, || async {
            let rows = sqlx::query(self.sql.heartbeat.clone())
                .bind(self.now_override())
                .bind(&ids)
                .bind(&workers)
                .bind(&attempts)
                .bind(duration_micros(extend_by))
                .fetch_all(&self.pool)
                .await?;
            returned_leases(&rows)
        })
        .await?;
        Ok(leases
            .iter()
            .map(|l| extended.contains(&LeaseKey::of(l)))
            .collect())
    }
}
