//! Which clock a storage reads: the database's, or a manual one for tests.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::time::{to_time_delta, truncate_to_micros};

/// The clock a storage uses for every "now" in its statements.
///
/// Production code uses [`Clock::Database`]: the database server's clock is
/// the only clock, so skew between worker machines cannot break leases.
/// Tests use [`Clock::Manual`] to move time without sleeping; backends bind
/// its value into their SQL in place of the server's `now()`.
#[derive(Debug, Clone, Default)]
pub enum Clock {
    /// Read the database server's clock.
    #[default]
    Database,
    /// Read a clock the test controls.
    Manual(ManualClock),
}

impl Clock {
    /// The instant to bind in place of the database clock, if any.
    pub fn fixed_now(&self) -> Option<DateTime<Utc>> {
        match self {
            Self::Database => None,
            Self::Manual(clock) => Some(clock.now()),
        }
    }
}

/// A shared, settable clock. Clones see the same time.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<Mutex<DateTime<Utc>>>);

impl ManualClock {
    /// A clock standing at `start` (truncated to microseconds).
    pub fn new(start: DateTime<Utc>) -> Self {
        Self(Arc::new(Mutex::new(truncate_to_micros(start))))
    }

    /// The current manual time.
    pub fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves the clock to `at` (truncated to microseconds); it may go backwards.
    pub fn set(&self, at: DateTime<Utc>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = truncate_to_micros(at);
    }

    /// Moves the clock forward by `by` and returns the new time.
    pub fn advance(&self, by: Duration) -> DateTime<Utc> {
        let mut now = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *now = truncate_to_micros(*now + to_time_delta(by));
        *now
    }
}

impl From<ManualClock> for Clock {
    fn from(clock: ManualClock) -> Self {
        Self::Manual(clock)
    }
}
