//! A background chore a storage handle runs at most once per period (the
//! ready ring's rotation on PostgreSQL and MySQL), however many of its
//! tasks ask.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Whether a handle's turn for a periodic chore has come: [`Turn::take`]
/// answers yes to one caller per `period`. Lock-free; share it in an `Arc`.
#[derive(Debug)]
pub struct Turn {
    period: Duration,
    epoch: Instant,
    /// When the last turn was taken, in milliseconds since `epoch` (0: never).
    last_ms: AtomicU64,
}

impl Turn {
    /// A chore run at most once per `period`; the first turn is free.
    pub fn new(period: Duration) -> Self {
        Self {
            period,
            epoch: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    /// Milliseconds since this handle's epoch, never 0.
    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX) + 1
    }

    /// Whether a turn is due now, marking it taken: of callers racing for
    /// one turn, exactly one gets `true`.
    pub fn take(&self) -> bool {
        let now = self.now_ms();
        let last = self.last_ms.load(Ordering::Relaxed);
        let period = u64::try_from(self.period.as_millis()).unwrap_or(u64::MAX);
        (last == 0 || now.saturating_sub(last) >= period)
            && self
                .last_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_turn_per_period() {
        let turn = Turn::new(Duration::from_millis(50));
        assert!(turn.take(), "the first turn is free");
        assert!(!turn.take(), "a second within the period is refused");
        std::thread::sleep(Duration::from_millis(60));
        assert!(turn.take(), "the next period gives one again");
        assert!(!turn.take());
    }
}
