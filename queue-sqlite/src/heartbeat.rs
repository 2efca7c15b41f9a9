//! Heartbeat: extending live leases.

use std::time::Duration;

use queue_core::backend::LeaseKey;
use queue_core::time::duration_micros;
use queue_core::{Lease, Result, validate_lease};

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
        write_tx!(self, |conn, now| async {
            let until = now.saturating_add(duration_micros(extend_by));
            let mut alive = Vec::with_capacity(leases.len());
            for lease in leases {
                let key = LeaseKey::of(lease);
                let done = sqlx::query(sql::HEARTBEAT)
                    .bind(now)
                    .bind(key.id)
                    .bind(key.worker)
                    .bind(key.attempt)
                    .bind(until)
                    .execute(&mut *conn)
                    .await?;
                alive.push(done.rows_affected() == 1);
            }
            Ok::<_, sqlx::Error>(alive)
        })
    }
}
