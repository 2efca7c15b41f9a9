//! The clock arithmetic: offered load credited on real elapsed time, the
//! harness's `ENQUEUE <n>` tokens scaled by the rate-control file, and the
//! sample ticks on wall-clock boundaries. Pure functions of the times they
//! are given, so the tests drive them with a simulated clock.

use std::time::{Duration, Instant};

/// Fixed-rate credit: every call adds `rate × (now − last call)` jobs, so a
/// loop iteration that ran long (a slow insert, a stall) is credited for
/// all the time it took, not for one nominal period.
#[derive(Debug)]
pub(crate) struct FixedPacer {
    last: Instant,
    credit: f64,
}

impl FixedPacer {
    /// A pacer with no credit, counting from `start`.
    pub(crate) fn new(start: Instant) -> Self {
        Self {
            last: start,
            credit: 0.0,
        }
    }

    /// Credits the time since the last call at `rate` jobs/s and takes the
    /// whole jobs due; the fraction carries over. A rate of 0 drops the
    /// credit (nothing is owed for a paused producer).
    pub(crate) fn take_due(&mut self, now: Instant, rate: f64) -> u64 {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        if rate <= 0.0 {
            self.credit = 0.0;
            return 0;
        }
        self.credit += rate * elapsed;
        let whole = self.credit.floor();
        self.credit -= whole;
        whole as u64
    }
}

/// Scales the harness's tokens by `current rate / launch rate`: the
/// harness's pacer keeps the rate the adapter was launched with, and its
/// high-load phase raises the rate only through the control file.
#[derive(Debug, Default)]
pub(crate) struct TokenScaler {
    carry: f64,
}

impl TokenScaler {
    /// The jobs to insert for a token of `n` at `factor`, the fraction
    /// carried to the next token.
    pub(crate) fn scale(&mut self, n: u64, factor: f64) -> u64 {
        if !factor.is_finite() || factor <= 0.0 {
            self.carry = 0.0;
            return 0;
        }
        self.carry += n as f64 * factor;
        let whole = self.carry.floor();
        self.carry -= whole;
        whole as u64
    }
}

/// Splits `n` jobs into calls of at most `max` each.
pub(crate) fn chunks(mut n: u64, max: usize) -> impl Iterator<Item = usize> {
    let max = max.max(1) as u64;
    std::iter::from_fn(move || {
        if n == 0 {
            return None;
        }
        let take = n.min(max);
        n -= take;
        Some(take as usize)
    })
}

/// The first multiple of `every_s` seconds since the Unix epoch strictly
/// after `now` (a time since the epoch): where a sample tick falls, so
/// every adapter's samples share the plot's time base.
pub(crate) fn next_boundary(now: Duration, every_s: u64) -> Duration {
    let every = every_s.max(1);
    Duration::from_secs((now.as_secs() / every + 1) * every)
}

/// The rate-control file, read at most every [`RateControl::REREAD`].
#[derive(Debug)]
pub(crate) struct RateControl {
    path: Option<String>,
    rate: f64,
    read_at: Option<Instant>,
}

impl RateControl {
    /// How often the file is read again.
    pub(crate) const REREAD: Duration = Duration::from_millis(250);

    /// Starts at `initial` (the launch rate) until the file says otherwise.
    pub(crate) fn new(path: Option<String>, initial: f64) -> Self {
        Self {
            path,
            rate: initial,
            read_at: None,
        }
    }

    /// The current rate: the file's number when it holds one, else the last
    /// good value (a missing file or a half-written number changes nothing).
    pub(crate) fn rate(&mut self, now: Instant) -> f64 {
        let Some(path) = &self.path else {
            return self.rate;
        };
        if self
            .read_at
            .is_some_and(|at| now.saturating_duration_since(at) < Self::REREAD)
        {
            return self.rate;
        }
        self.read_at = Some(now);
        if let Some(rate) = std::fs::read_to_string(path)
            .ok()
            .and_then(|raw| super::config::parse_rate(raw.trim()))
        {
            self.rate = rate;
        }
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_iteration_is_credited_in_full() {
        let start = Instant::now();
        let mut pacer = FixedPacer::new(start);
        let rate = 1_000.0;
        // Nominal 25 ms periods, but the second iteration takes 250 ms
        // (a slow insert): 25 + 250 + 25 ms at 1,000/s is 300 jobs, not the
        // 75 a per-iteration credit would give.
        let mut due = 0;
        let mut t = start;
        for step_ms in [25, 250, 25] {
            t += Duration::from_millis(step_ms);
            due += pacer.take_due(t, rate);
        }
        assert_eq!(due, 300);
    }

    #[test]
    fn fractions_carry_over_so_a_low_rate_is_exact() {
        let start = Instant::now();
        let mut pacer = FixedPacer::new(start);
        let mut due = 0;
        // 7 jobs/s ticked every 25 ms for 10 s: each tick owes 0.175 jobs.
        for i in 1..=400 {
            due += pacer.take_due(start + Duration::from_millis(25 * i), 7.0);
        }
        assert_eq!(due, 70);
    }

    #[test]
    fn a_rate_change_applies_from_the_call_that_sees_it() {
        let start = Instant::now();
        let mut pacer = FixedPacer::new(start);
        assert_eq!(pacer.take_due(start + Duration::from_secs(1), 100.0), 100);
        assert_eq!(pacer.take_due(start + Duration::from_secs(2), 150.0), 150);
        assert_eq!(pacer.take_due(start + Duration::from_secs(3), 0.0), 0);
        // Nothing is owed for the paused second.
        assert_eq!(pacer.take_due(start + Duration::from_secs(4), 100.0), 100);
    }

    #[test]
    fn tokens_scale_with_the_control_rate() {
        let mut scaler = TokenScaler::default();
        let total: u64 = (0..100).map(|_| scaler.scale(20, 1.5)).sum();
        assert_eq!(total, 3_000);
        let mut scaler = TokenScaler::default();
        let total: u64 = (0..3).map(|_| scaler.scale(1, 0.5)).sum();
        assert_eq!(total, 1);
        assert_eq!(TokenScaler::default().scale(128, 1.0), 128);
        assert_eq!(TokenScaler::default().scale(128, 0.0), 0);
    }

    #[test]
    fn chunks_respect_the_batch_max() {
        assert_eq!(chunks(300, 128).collect::<Vec<_>>(), [128, 128, 44]);
        assert_eq!(chunks(0, 128).count(), 0);
        assert_eq!(chunks(5, 0).collect::<Vec<_>>(), [1, 1, 1, 1, 1]);
    }

    #[test]
    fn ticks_fall_on_wall_clock_boundaries() {
        let at = |s: u64, ms: u64| Duration::from_secs(s) + Duration::from_millis(ms);
        assert_eq!(next_boundary(at(1_000, 1), 5), at(1_005, 0));
        assert_eq!(next_boundary(at(1_004, 999), 5), at(1_005, 0));
        // Exactly on a boundary: the next one, never now again.
        assert_eq!(next_boundary(at(1_005, 0), 5), at(1_010, 0));
        assert_eq!(next_boundary(at(1_000, 500), 1), at(1_001, 0));
        assert_eq!(next_boundary(at(59, 0), 30), at(60, 0));
    }

    #[test]
    fn the_control_file_is_followed_and_bad_contents_ignored() {
        let dir = std::env::temp_dir().join(format!("queue-rs-rate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("producer_rate.txt");
        let start = Instant::now();
        let mut control = RateControl::new(Some(path.display().to_string()), 800.0);
        // No file yet: the launch rate.
        assert_eq!(control.rate(start), 800.0);
        std::fs::write(&path, "1200.0").expect("write");
        // Within the re-read interval: unchanged.
        assert_eq!(control.rate(start + Duration::from_millis(10)), 800.0);
        let later = start + RateControl::REREAD;
        assert_eq!(control.rate(later), 1200.0);
        std::fs::write(&path, "").expect("write");
        assert_eq!(control.rate(later + RateControl::REREAD), 1200.0);
        std::fs::write(&path, "800\n").expect("write");
        assert_eq!(control.rate(later + RateControl::REREAD * 2), 800.0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
