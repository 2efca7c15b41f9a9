//! Percentiles and the process's memory.

use std::time::Duration;

/// p50, p99 and max of `samples`, in milliseconds (nearest-rank).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Spread {
    pub(crate) p50: f64,
    pub(crate) p99: f64,
    pub(crate) max: f64,
}

impl Spread {
    /// `None` for no samples.
    pub(crate) fn of(samples: &[Duration]) -> Option<Self> {
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        if ms.is_empty() {
            return None;
        }
        ms.sort_by(f64::total_cmp);
        let rank = |q: f64| {
            let index = ((q * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1;
            ms[index]
        };
        Some(Self {
            p50: rank(0.50),
            p99: rank(0.99),
            max: ms[ms.len() - 1],
        })
    }
}

/// Resident memory now and at its peak, in MiB (Linux; `None` elsewhere).
pub(crate) fn resident_mib() -> Option<(f64, f64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| -> Option<f64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib / 1024.0)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let spread = Spread::of(&samples).expect("samples");
        assert_eq!(spread.p50, 50.0);
        assert_eq!(spread.p99, 99.0);
        assert_eq!(spread.max, 100.0);
        let one = Spread::of(&[Duration::from_millis(7)]).expect("one sample");
        assert_eq!((one.p50, one.p99, one.max), (7.0, 7.0, 7.0));
        assert_eq!(Spread::of(&[]), None);
    }

    #[test]
    fn memory_is_read_on_linux() {
        if cfg!(target_os = "linux") {
            let (now, peak) = resident_mib().expect("/proc/self/status");
            assert!(now > 0.0 && peak >= now);
        }
    }
}
