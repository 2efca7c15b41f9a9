//! Pickup latency over a rolling window in bounded memory: one HDR
//! histogram (3 significant figures) per wall-clock second, the window's
//! seconds merged when a sample is taken. Memory is the window's length in
//! histograms, whatever the job rate or the run's length.

use std::collections::VecDeque;

use hdrhistogram::Histogram;

/// The largest latency recorded exactly, in microseconds (one hour);
/// longer ones count as one hour.
const MAX_US: u64 = 3_600_000_000;

/// Percentiles of the latencies recorded in the window, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Percentiles {
    pub(crate) p50_ms: f64,
    pub(crate) p95_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) count: u64,
}

/// The per-second histograms of the last `window_s` seconds.
#[derive(Debug)]
pub(crate) struct LatencyWindow {
    window_s: u64,
    /// (second since the epoch, that second's latencies), oldest first.
    seconds: VecDeque<(u64, Histogram<u64>)>,
    /// Histograms of seconds that left the window, reused.
    spare: Vec<Histogram<u64>>,
}

fn histogram() -> Histogram<u64> {
    // Bounds and precision are constants that hdrhistogram accepts.
    Histogram::new_with_bounds(1, MAX_US, 3).unwrap_or_else(|_| unreachable!("valid bounds"))
}

impl LatencyWindow {
    /// An empty window of `window_s` seconds.
    pub(crate) fn new(window_s: u64) -> Self {
        Self {
            window_s: window_s.max(1),
            seconds: VecDeque::new(),
            spare: Vec::new(),
        }
    }

    /// Records one latency of `micros` observed during `second`.
    pub(crate) fn record(&mut self, second: u64, micros: u64) {
        let current = self.seconds.back().map(|(s, _)| *s);
        if current.is_none_or(|s| s < second) {
            self.expire(second);
            let fresh = self.take_spare();
            self.seconds.push_back((second, fresh));
        }
        // A latency observed in an earlier second than the newest (threads
        // racing across a second's edge) joins the newest: the window is
        // one second coarse anyway.
        if let Some((_, hist)) = self.seconds.back_mut() {
            hist.saturating_record(micros.clamp(1, MAX_US));
        }
    }

    /// Percentiles of what was recorded in the `window_s` seconds up to and
    /// including `now_second`; `None` when nothing was.
    pub(crate) fn percentiles(&mut self, now_second: u64) -> Option<Percentiles> {
        self.expire(now_second);
        let mut merged = self.take_spare();
        for (_, hist) in &self.seconds {
            // Same bounds on both sides: adding cannot fail.
            let _ = merged.add(hist);
        }
        let count = merged.len();
        let result = (count > 0).then(|| Percentiles {
            p50_ms: merged.value_at_quantile(0.50) as f64 / 1_000.0,
            p95_ms: merged.value_at_quantile(0.95) as f64 / 1_000.0,
            p99_ms: merged.value_at_quantile(0.99) as f64 / 1_000.0,
            count,
        });
        self.spare.push(merged);
        result
    }

    /// Histograms held (the window's seconds plus spares): the memory bound.
    #[cfg(test)]
    pub(crate) fn histograms_held(&self) -> usize {
        self.seconds.len() + self.spare.len()
    }

    /// An empty histogram: a spare one emptied, or a new one.
    fn take_spare(&mut self) -> Histogram<u64> {
        match self.spare.pop() {
            Some(mut hist) => {
                hist.reset();
                hist
            }
            None => histogram(),
        }
    }

    /// Drops the seconds that are out of the window at `now_second`.
    fn expire(&mut self, now_second: u64) {
        let oldest_kept = now_second.saturating_sub(self.window_s - 1);
        while self.seconds.front().is_some_and(|(s, _)| *s < oldest_kept) {
            if let Some((_, hist)) = self.seconds.pop_front() {
                self.spare.push(hist);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_one_second() {
        let mut window = LatencyWindow::new(30);
        for ms in 1..=100u64 {
            window.record(1_000, ms * 1_000);
        }
        let p = window.percentiles(1_000).expect("recorded");
        assert_eq!(p.count, 100);
        // Three significant figures: within 0.1%.
        assert!((p.p50_ms - 50.0).abs() < 0.1, "{p:?}");
        assert!((p.p95_ms - 95.0).abs() < 0.1, "{p:?}");
        assert!((p.p99_ms - 99.0).abs() < 0.1, "{p:?}");
    }

    #[test]
    fn the_window_forgets_what_is_older_than_30_seconds() {
        let mut window = LatencyWindow::new(30);
        // A slow second at t=100, then fast jobs every second after it.
        for _ in 0..100 {
            window.record(100, 5_000_000);
        }
        for second in 101..=129 {
            window.record(second, 2_000);
        }
        // t=129: seconds 100..=129 are in the window, the slow one included.
        let p = window.percentiles(129).expect("recorded");
        assert!(p.p99_ms > 4_000.0, "{p:?}");
        assert_eq!(p.count, 129);
        // t=130: second 100 has left.
        let p = window.percentiles(130).expect("recorded");
        assert!(p.p99_ms < 3.0, "{p:?}");
        assert_eq!(p.count, 29);
        // Nothing for 30 s: nothing to report.
        assert_eq!(window.percentiles(159), None);
    }

    #[test]
    fn counts_stay_exact_when_sampling_every_second() {
        // Recording and sampling interleaved, as in a run: each sample
        // sees exactly the last 30 s, never what an earlier sample merged.
        let mut window = LatencyWindow::new(30);
        for second in 0..200u64 {
            for i in 0..50 {
                window.record(second, 1_000 + i);
            }
            let p = window.percentiles(second).expect("recorded");
            assert_eq!(p.count, 50 * (second + 1).min(30), "at {second}");
            assert!(p.p99_ms < 1.1, "at {second}: {p:?}");
        }
    }

    #[test]
    fn memory_stays_bounded_over_a_long_run() {
        let mut window = LatencyWindow::new(30);
        for second in 0..3_000u64 {
            for i in 0..50 {
                window.record(second, 100 + i);
            }
            if second % 100 == 0 {
                let _ = window.percentiles(second);
            }
        }
        assert!(
            window.histograms_held() <= 32,
            "{}",
            window.histograms_held()
        );
    }

    #[test]
    fn extremes_are_clamped_not_lost() {
        let mut window = LatencyWindow::new(30);
        window.record(7, 0);
        window.record(7, u64::MAX);
        let p = window.percentiles(7).expect("recorded");
        assert_eq!(p.count, 2);
        assert!(p.p99_ms >= 3_599_000.0, "{p:?}");
        assert!(p.p50_ms <= 0.002, "{p:?}");
    }
}
