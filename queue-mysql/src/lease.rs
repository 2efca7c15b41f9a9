//! The locking read of leased rows that every fenced operation (ack, nack,
//! heartbeat, release, snooze, reclaim) starts with, and lease arithmetic.

use std::time::Duration;

use chrono::NaiveDateTime;
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Integer, Nullable, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use queue_core::backend::LeaseKey;
use queue_core::time::{to_time_delta, truncate_to_micros};

use crate::bind::{Param, bucket, cached, naive};
use crate::error::Failure;
use crate::rows::utc;
use crate::sql;

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
    /// Enqueues that linked dependants to it (migration 0015).
    #[diesel(sql_type = Integer)]
    pub(crate) dependants_linked: i32,
}

impl HeldRow {
    /// The row's lease, `None` when it is not leased.
    pub(crate) fn key(&self) -> Option<LeaseKey> {
        LeaseKey::of_row(self.id, self.locked_by.as_deref(), self.attempts)
    }

    /// Whether a job may wait on it: its finish counts (`workflow::finish`).
    pub(crate) fn has_dependants(&self) -> bool {
        self.dependants_linked > 0
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
