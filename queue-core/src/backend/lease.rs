//! A lease as the three columns that fence it, and the rules every
//! backend applies to leases in a batch.

use std::collections::HashSet;
use std::hash::Hash;

use serde_json::Value;

use crate::{Ack, Lease, QueueError, Result};

/// The identity of a lease as a backend stores it: the job's id, the
/// holder (`locked_by`) and the attempt the claim counted (`attempts`).
///
/// Every fenced write (ack, nack, heartbeat, release) matches all three,
/// so a holder whose lease expired and was claimed again — by another
/// worker, or by itself on a later attempt — changes nothing. Backends
/// compare the keys their statements return with the keys they were asked
/// about to answer per lease.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseKey {
    /// The job's id (`id`).
    pub id: i64,
    /// The holder's worker id (`locked_by`).
    pub worker: String,
    /// The attempt the lease belongs to (`attempts` after the claim).
    pub attempt: i32,
}

impl LeaseKey {
    /// The key of `lease`. Attempts above `i32::MAX` cannot be stored, so
    /// they saturate (and then match no row).
    pub fn of(lease: &Lease) -> Self {
        Self {
            id: lease.job_id.get(),
            worker: lease.worker_id.as_str().to_owned(),
            attempt: i32::try_from(lease.attempt).unwrap_or(i32::MAX),
        }
    }

    /// The key of a row as read back: `None` when the row is not leased.
    pub fn of_row(id: i64, locked_by: Option<&str>, attempts: i32) -> Option<Self> {
        locked_by.map(|worker| Self {
            id,
            worker: worker.to_owned(),
            attempt: attempts,
        })
    }
}

/// Per key of `keys`, in order: true for its first mention, false for a
/// repeat. A lease named twice in one batch counts once, as if the calls
/// ran in turn: the first acts, the repeats find the lease gone
/// (`ack_batch_acks_a_repeated_lease_once`).
pub fn first_mentions<K: Eq + Hash>(keys: impl IntoIterator<Item = K>) -> Vec<bool> {
    let mut seen = HashSet::new();
    keys.into_iter().map(|key| seen.insert(key)).collect()
}

/// One ack as the batch of one that `ack_batch` takes: what
/// [`crate::Storage::ack`] and a backend's ack in the caller's transaction
/// run, with [`acked_one`] reading the answer.
pub fn one_ack(lease: &Lease, result: Option<Value>) -> [Ack; 1] {
    [Ack {
        lease: lease.clone(),
        result,
    }]
}

/// The answer of a batch of one ([`one_ack`]): `Ok` when it acked,
/// [`QueueError::LeaseLost`] naming `lease` when not.
///
/// # Errors
/// [`QueueError::LeaseLost`] unless `acked` is `[true]`.
pub fn acked_one(lease: &Lease, acked: &[bool]) -> Result<()> {
    match acked {
        [true] => Ok(()),
        _ => Err(QueueError::LeaseLost {
            lease: lease.clone(),
        }),
    }
}
