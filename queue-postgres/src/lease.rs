//! The lease columns every fenced statement binds (as arrays, for UNNEST)
//! and returns: ack and heartbeat.

use std::collections::HashSet;

use queue_core::backend::LeaseKey;
use queue_core::{Lease, Result};
use sqlx::Row;

use crate::error::Failure;

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
