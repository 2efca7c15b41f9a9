//! The ready ring's rotation (migrations 0010 and 0013): claims take due
//! jobs from `job_ready`, whose four slots `queue_ready_rotate` empties
//! with `TRUNCATE` in turn, so that a claim never steps over more than the
//! entries of the last few rotations, whatever holds the xmin horizon
//! back. Any storage handle that claims tries to rotate: after a claim,
//! at most once per [`ROTATE_EVERY`] per handle, in a task of its own on
//! the pool. The function itself lets one caller per schema through, and
//! rotates only a current slot that is [`ROTATE_EVERY`] old and has taken
//! [`ROTATE_AT_BYTES`] of entries, or is [`ROTATE_IDLE`] old: each
//! `TRUNCATE` makes every session plan its claims again, which four
//! rotations a second of a quiet queue paid in start latency for nothing.

use std::time::Duration;

use sqlx::{PgPool, Row};

use crate::PgStorage;
use crate::exec::{Pooling, pooled};

/// How long a slot stays current at least: a claim steps over the
/// deleted entries of up to four slots (the current one and three older).
pub(crate) const ROTATE_EVERY: Duration = Duration::from_millis(250);

/// The size of its heap from which a current slot rotates once
/// [`ROTATE_EVERY`] old: four pages, about 500 entries.
const ROTATE_AT_BYTES: i64 = 32 * 1024;

/// How long a slot that took fewer entries stays current at most.
const ROTATE_IDLE: Duration = Duration::from_secs(5);

/// How long a rotation waits for the transactions that hold the slot it
/// empties (an enqueue not yet committed that wrote there) before it
/// gives up until the next try.
const LOCK_WAIT: Duration = Duration::from_millis(20);

/// The most still-claimable entries a rotation moves out of the slot it
/// empties; with more, claims are draining a backlog there, and the
/// rotation waits for them.
const MOVE_AT_MOST: i64 = 10_000;

impl PgStorage {
    /// After a claim: rotates the ring in the background when this
    /// handle's turn has come. A failed rotation (the schema not migrated
    /// yet, the server gone) is logged and tried again a period later.
    pub(crate) fn rotate_ready_ring(&self) {
        if !self.ring.take() {
            return;
        }
        let pool = self.pool.clone();
        let pooling = self.pooling;
        let statement = self.sql.rotate_ready.clone();
        tokio::spawn(async move { rotate(&pool, pooling, statement).await });
    }
}

async fn rotate(pool: &PgPool, pooling: Pooling, statement: sqlx::SqlStr) {
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let outcome = pooled(pool, pooling)
        .fetch_one(
            sqlx::query(statement)
                .bind(ms(ROTATE_EVERY))
                .bind(ms(ROTATE_IDLE))
                .bind(ROTATE_AT_BYTES)
                .bind(ms(LOCK_WAIT))
                .bind(MOVE_AT_MOST),
        )
        .await
        .and_then(|row| row.try_get::<bool, _>(0));
    match outcome {
        Ok(rotated) => tracing::trace!(rotated, "ready ring rotation"),
        Err(error) => tracing::debug!(%error, "ready ring rotation failed"),
    }
}
