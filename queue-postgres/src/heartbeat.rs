//! Heartbeat: extending the leases still held, in one statement.

use std::time::Duration;

use queue_core::backend::LeaseKey;
use queue_core::time::duration_micros;
use queue_core::{Lease, Result, validate_lease};

use crate::PgStorage;
use crate::error::retrying;
use crate::lease::{lease_columns, returned_leases};

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
            let rows = self
                .db()
                .fetch_all(
                    sqlx::query(self.sql.heartbeat.clone())
                        .bind(self.now_override())
                        .bind(&ids)
                        .bind(&workers)
                        .bind(&attempts)
                        .bind(duration_micros(extend_by)),
                )
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
