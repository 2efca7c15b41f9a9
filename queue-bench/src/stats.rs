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

/// CPU time process `pid` has used (user and system), in clock ticks
/// (Linux; `None` elsewhere or once the process is gone).
pub(crate) fn process_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name (in parentheses, which may hold spaces): the
    // state is the first field, utime the 12th and stime the 13th.
    let fields: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The machine's CPU time, busy and in all, over every core, in clock
/// ticks since boot (Linux; `None` elsewhere).
pub(crate) fn machine_ticks() -> Option<MachineTicks> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    // user nice system idle iowait irq softirq steal (guest time is
    // already inside user and nice).
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    let total: u64 = ticks.iter().sum();
    let idle = ticks.get(3)? + ticks.get(4)?;
    Some(MachineTicks {
        busy: total - idle,
        total,
    })
}

/// A reading of [`machine_ticks`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MachineTicks {
    /// Every core's time not idle.
    pub(crate) busy: u64,
    /// Every core's time.
    pub(crate) total: u64,
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
    fn cpu_time_is_read_on_linux() {
        if cfg!(target_os = "linux") {
            let own = || process_ticks(std::process::id()).expect("/proc/self/stat");
            let (machine_start, own_start) = (machine_ticks().expect("/proc/stat"), own());
            let spin = std::time::Instant::now();
            let mut x = 0u64;
            // Until 10 ticks of CPU time (0.1 s at the usual 100 Hz),
            // however busy the machine; 10 s at most.
            while own() < own_start + 10 && spin.elapsed() < Duration::from_secs(10) {
                for _ in 0..100_000 {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            let (machine_end, own_end) = (machine_ticks().expect("/proc/stat"), own());
            let spun = own_end - own_start;
            assert!(spun >= 10, "spinning shows in the process's ticks: {spun}");
            // The machine was busy at least while this process spun (a
            // tick of sampling either way).
            let busy = machine_end.busy - machine_start.busy;
            assert!(
                busy + 2 >= spun,
                "machine busy {busy} ticks, this process {spun}"
            );
            assert!(machine_end.total - machine_start.total >= busy);
            assert_eq!(process_ticks(u32::MAX), None);
        }
    }

    #[test]
    fn memory_is_read_on_linux() {
        if cfg!(target_os = "linux") {
            let (now, peak) = resident_mib().expect("/proc/self/status");
            assert!(now > 0.0 && peak >= now);
        }
    }
}
