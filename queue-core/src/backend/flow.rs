//! Which queues have claim limits: a backend remembers it for a second, so
//! that a claim on queues without limits stays the one statement it was.

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::{DequeueRequest, QueueName};

/// The set of queues whose `queue_config` row limits claims, as read at
/// most [`LimitedQueues::TTL`] ago.
///
/// A backend's claim asks [`LimitedQueues::limits`]; on `None` it reads the
/// set from its config table and [`LimitedQueues::store`]s it. A claim
/// naming none of them takes the plain path; one naming any takes the
/// limited path (lock those queues' config rows, count their held leases,
/// [`crate::QueueLimits::allowance`], claim the
/// [`DequeueRequest::narrowed`] request, store [`crate::Bucket::after`],
/// one transaction). `configure_queue` calls [`LimitedQueues::invalidate`],
/// so a change made through a storage binds its next claim; a change made
/// elsewhere binds within the TTL.
#[derive(Debug, Default)]
pub struct LimitedQueues {
    read: Mutex<Option<(Instant, BTreeSet<QueueName>)>>,
}

impl LimitedQueues {
    /// How long a read of the set is trusted.
    pub const TTL: Duration = Duration::from_secs(1);

    /// An empty cache: the first claim reads the set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `request` names a limited queue, if the set was read within
    /// the TTL; `None` when it must be read again.
    pub fn limits(&self, request: &DequeueRequest) -> Option<bool> {
        let read = self.read.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, limited) = read.as_ref()?;
        (at.elapsed() < Self::TTL)
            .then(|| request.queues().iter().any(|queue| limited.contains(queue)))
    }

    /// Remembers the set just read, and answers [`LimitedQueues::limits`]
    /// for `request` from it.
    pub fn store(&self, limited: BTreeSet<QueueName>, request: &DequeueRequest) -> bool {
        let answer = request.queues().iter().any(|queue| limited.contains(queue));
        *self.read.lock().unwrap_or_else(PoisonError::into_inner) = Some((Instant::now(), limited));
        answer
    }

    /// Forgets the set: the next claim reads it again.
    pub fn invalidate(&self) {
        *self.read.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkerId;

    fn request(queues: &[&str]) -> DequeueRequest {
        DequeueRequest::new(
            queues.iter().map(|q| QueueName::new(*q).unwrap()).collect(),
            4,
            Duration::from_secs(30),
            WorkerId::new("w").unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn answers_from_the_stored_set_until_invalidated() {
        let cache = LimitedQueues::new();
        assert_eq!(cache.limits(&request(&["a"])), None, "nothing read yet");
        let limited = BTreeSet::from([QueueName::new("b").unwrap()]);
        assert!(!cache.store(limited, &request(&["a"])));
        assert_eq!(cache.limits(&request(&["a"])), Some(false));
        assert_eq!(cache.limits(&request(&["a", "b"])), Some(true));
        cache.invalidate();
        assert_eq!(cache.limits(&request(&["b"])), None);
    }
}
