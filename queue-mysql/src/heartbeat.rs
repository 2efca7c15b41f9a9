//! Heartbeat: extending the leases still held; and the locking read of
//! leased rows that every fenced operation starts with.

use std::collections::HashSet;
use std::time::Duration;

use chrono::NaiveDateTime;
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Integer, Nullable, Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use queue_core::backend::LeaseKey;
use queue_core::time::{to_time_delta, truncate_to_micros};
use queue_core::{Lease, Result, validate_lease};

use crate::bind::{Param, bucket, cached, naive, query};
use crate::error::Failure;
use crate::rows::utc;
use crate::{MySqlStorage, sql};

/// A held row's identity, as read `FOR UPDATE`.
#[derive(QueryableByName)]
pub(crate) struct HeldRow {
    #[diesel(sql_type = BigInt)]
    pub(crate) id: i64,
    #[diesel(sql_type = Nullable<Text>)]
    pub(crate) locked_by: Option<String>,
    #[diesel(sql_type = Integer)]
    pub(crate) attempts: i32,
    #[diesel(sql_type = Integer)]
    pub(crate) max_attempts: i32,
}

impl HeldRow {
    /// The row's lease, `None` when it is not leased.
    pub(crate) fn key(&self) -> Option<LeaseKey> {
        LeaseKey::of_row(self.id, self.locked_by.as_deref(), self.attempts)
    }
}

/// Locks the rows still leased under one of `leases` (optionally only
/// unexpired at `now`) and returns their identities: the fencing is the
/// statement's, a stale lease matches no row.
pub(crate) async fn lock_leased(
    conn: &mut AsyncMysqlConnection,
    leases: &[LeaseKey],
    unexpired_at: Option<NaiveDateTime>,
) -> Result<Vec<HeldRow>, Failure> {
    let Some(last) = leases.last() else {
        return Ok(Vec::new());
    };
    // Padded with the last lease to few statement shapes, like id lists.
    let padded = bucket(leases.len());
    let keys = leases
        .iter()
        .chain(std::iter::repeat_n(last, padded - leases.len()));
    let mut params: Vec<Param> = keys.clone().map(|k| Param::Int(k.id)).collect();
    for key in keys {
        params.extend([
            Param::Int(key.id),
            Param::Text(key.worker.clone()),
            Param::Int(i64::from(key.attempt)),
        ]);
    }
    params.extend(unexpired_at.map(Param::Time));
    let sql = sql::lock_leased(padded, unexpired_at.is_some());
    Ok(cached(sql, params).load::<HeldRow>(conn).await?)
}

/// `now + by`, at microsecond precision.
pub(crate) fn later(now: NaiveDateTime, by: Duration) -> NaiveDateTime {
    naive(truncate_to_micros(utc(now) + to_time_delta(by)))
}

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
            conn.transaction(async |conn| self.heartbeat_on(conn, leases, extend_by).await)
                .await
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
