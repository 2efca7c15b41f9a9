//! Exponential backoff with jitter, pure and with an injected RNG.

use std::time::Duration;

use rand::{Rng, RngExt};

use crate::time::{MAX_DURATION, validate_duration};
use crate::{QueueError, Result};

/// Retry delays that double per attempt, spread by jitter, clamped to a range.
///
/// `delay(attempt) = clamp(min(base * 2^(attempt-1), max) * f, min, max)`
/// where the jitter factor `f` is uniform in `[1 - jitter, 1 + jitter]`.
/// The nominal value is capped before jitter so that jobs at the cap still
/// spread out instead of retrying in lock step. Computed in `f64` seconds:
/// no attempt number (up to `u32::MAX`) and no accepted configuration can
/// overflow or panic.
///
/// Defaults: base 1 s, jitter 0.2, min 0, max 1 h. With the default 20
/// attempts a job keeps retrying for about ten hours: an outage of a
/// dependency over a night is survived, and a hopeless job is dead-lettered
/// the same day.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    base: Duration,
    min: Duration,
    max: Duration,
    jitter: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Self::DEFAULT_BASE,
            min: Duration::ZERO,
            max: Self::DEFAULT_MAX,
            jitter: Self::DEFAULT_JITTER,
        }
    }
}

impl Backoff {
    /// The default delay before the first retry.
    pub const DEFAULT_BASE: Duration = Duration::from_secs(1);
    /// The default longest delay.
    pub const DEFAULT_MAX: Duration = Duration::from_secs(60 * 60);
    /// The default jitter: delays vary by up to 20 % either way.
    pub const DEFAULT_JITTER: f64 = 0.2;

    /// A validated backoff.
    ///
    /// # Errors
    /// `base` zero or above 100 years; `max` above 100 years; `min > max`;
    /// `jitter` not a finite number in `[0, 1]`.
    pub fn new(base: Duration, min: Duration, max: Duration, jitter: f64) -> Result<Self> {
        validate_duration("backoff_base", base, false)?;
        validate_duration("backoff_max", max, true)?;
        if min > max {
            return Err(QueueError::invalid(
                "backoff_min",
                format!("{min:?} is above the maximum {max:?}"),
            ));
        }
        if !(jitter.is_finite() && (0.0..=1.0).contains(&jitter)) {
            return Err(QueueError::invalid(
                "backoff_jitter",
                format!("is {jitter}, it must be between 0 and 1"),
            ));
        }
        Ok(Self {
            base,
            min,
            max,
            jitter,
        })
    }

    /// The delay before the first retry.
    pub fn base(&self) -> Duration {
        self.base
    }

    /// The shortest delay.
    pub fn min(&self) -> Duration {
        self.min
    }

    /// The longest delay.
    pub fn max(&self) -> Duration {
        self.max
    }

    /// The jitter fraction in `[0, 1]`.
    pub fn jitter(&self) -> f64 {
        self.jitter
    }

    /// The delay after failed attempt `attempt` (1 for the first attempt),
    /// with a jitter factor drawn from `rng`.
    pub fn delay<R: Rng + ?Sized>(&self, attempt: u32, rng: &mut R) -> Duration {
        let unit: f64 = rng.random();
        self.delay_with_factor(attempt, 1.0 - self.jitter + 2.0 * self.jitter * unit)
    }

    /// The delay after `attempt` for an explicit jitter `factor` (which is
    /// clamped into `[1 - jitter, 1 + jitter]`).
    pub fn delay_with_factor(&self, attempt: u32, factor: f64) -> Duration {
        let low = 1.0 - self.jitter;
        let high = 1.0 + self.jitter;
        let factor = if factor.is_nan() {
            1.0
        } else {
            factor.clamp(low, high)
        };
        self.clamp_secs(self.nominal_secs(attempt) * factor)
    }

    /// The jitter-free delay after `attempt`: the midpoint of its range.
    pub fn nominal(&self, attempt: u32) -> Duration {
        self.clamp_secs(self.nominal_secs(attempt))
    }

    /// The smallest and largest delay `delay(attempt, _)` can return.
    pub fn bounds(&self, attempt: u32) -> (Duration, Duration) {
        (
            self.delay_with_factor(attempt, 1.0 - self.jitter),
            self.delay_with_factor(attempt, 1.0 + self.jitter),
        )
    }

    /// `min(base * 2^(attempt-1), max)` in seconds, without overflow.
    fn nominal_secs(&self, attempt: u32) -> f64 {
        let exponent = attempt.saturating_sub(1);
        let max = self.max.as_secs_f64();
        // base >= 1ns, so 2^64 * base exceeds any max the validation accepts.
        if exponent >= 64 {
            return max;
        }
        let exponent = i32::try_from(exponent).unwrap_or(i32::MAX);
        (self.base.as_secs_f64() * 2f64.powi(exponent)).min(max)
    }

    fn clamp_secs(&self, secs: f64) -> Duration {
        let secs = secs.clamp(self.min.as_secs_f64(), self.max.as_secs_f64());
        Duration::try_from_secs_f64(secs)
            .unwrap_or(self.max)
            .clamp(self.min, self.max.min(MAX_DURATION))
    }
}
