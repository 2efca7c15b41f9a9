//! Heartbeat: extending the leases still held.

use std::collections::HashSet;
use std::time::Duration;

use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use queue_core::backend::LeaseKey;
use queue_core::{Lease, Result, validate_lease};

use crate::bind::{Param, query};
use crate::error::Failure;
use crate::lease::{HeldRow, later, lock_leased};
use crate::{MySqlStorage, sql};

impl MySqlStorage {
    pub(crate) async fn heartbeat_pooled(
        &self,
        leases: &[Lease],
        extend_by: Duration,
    ) -> Result<Vec<bool>> {
        validate_lease("extend_by", extend_by)?;
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        self.retrying(true, || async {
            let mut conn = self.connection().await?;
            let guard = self.guard(&mut conn).await?;
            let outcome = conn
                .transaction(async |conn| {
                    guard.open(conn).await?;
                    let extended = self.heartbeat_on(conn, leases, extend_by).await?;
                    guard.close(conn).await?;
                    Ok(extended)
                })
                .await;
            guard.finish(conn, outcome).await
        })
        .await
    }

    async fn heartbeat_on(
        &self,
        conn: &mut AsyncMysqlConnection,
        leases: &[Lease],
        extend_by: Duration,
    ) -> Result<Vec<bool>, Failure> {
        let now = self.resolve_now(conn).await?;
        let keys: Vec<LeaseKey> = leases.iter().map(LeaseKey::of).collect();
        let alive: HashSet<LeaseKey> = lock_leased(conn, &keys, Some(now))
            .await?
            .iter()
            .filter_map(HeldRow::key)
            .collect();
        let extend: Vec<i64> = leases
            .iter()
            .map(LeaseKey::of)
            .filter(|k| alive.contains(k))
            .map(|k| k.id)
            .collect();
        if !extend.is_empty() {
            let sql = sql::heartbeat_extend(extend.len());
            let mut params = vec![Param::Time(later(now, extend_by)), Param::Time(now)];
            params.extend(extend.iter().map(|id| Param::Int(*id)));
            query(&sql, params).execute(conn).await?;
        }
        Ok(leases
            .iter()
            .map(|l| alive.contains(&LeaseKey::of(l)))
            .collect())
    }
}
