//! The bounded retry of a statement the server rolled back (a deadlock, a
//! serialization failure, SQLite's busy answer) or whose connection broke.
//!
//! Each backend decides which of its errors are worth another try; the
//! policy (how often, how long to pause) and the loop live here, so that
//! every backend retries the same way. The loop takes the sleep function
//! so that queue-core stays free of any runtime.

use std::future::Future;
use std::time::Duration;

/// How long a pooled connection may sit idle before a pool checks it with
/// a round trip on its way out. A check before every use (sqlx's and
/// diesel-async's default) is a round trip before every statement of a
/// busy queue: without it a PostgreSQL drain ran 6-14% faster on the
/// benchmark machine (docs/benchmarks-journal.md, "JIT on the batch
/// enqueue, pings before every statement"). A connection lost within this
/// time fails its next statement instead, which [`retrying`] tries again
/// where that is safe.
pub const PING_IDLE_AFTER: Duration = Duration::from_secs(1);

/// How often, and after which pauses, a failed statement is tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries after the first one.
    pub retries: u32,
    /// The pause before the first retry.
    pub first_pause: Duration,
    /// Each pause is this many times the previous one.
    pub growth: u32,
}

impl RetryPolicy {
    /// For one statement that a server rolled back or whose connection
    /// broke: three retries after 10, 40 and 160 ms.
    pub const STATEMENT: Self = Self {
        retries: 3,
        first_pause: Duration::from_millis(10),
        growth: 4,
    };

    /// The pause before retry number `retry` (1 for the first), or `None`
    /// when the policy allows no more.
    pub fn pause(&self, retry: u32) -> Option<Duration> {
        if retry == 0 || retry > self.retries {
            return None;
        }
        let factor = self.growth.saturating_pow(retry - 1);
        Some(self.first_pause.saturating_mul(factor))
    }
}

/// Runs `operation` until it succeeds, fails with an error `retryable`
/// rejects, or `policy` allows no more tries; pauses with `sleep` between
/// tries. Returns the last error unchanged: the caller maps it.
///
/// # Errors
/// The operation's last error.
pub async fn retrying<T, E, Op, OpFut, Sleep, SleepFut>(
    policy: RetryPolicy,
    retryable: impl Fn(&E) -> bool,
    mut sleep: Sleep,
    mut operation: Op,
) -> Result<T, E>
where
    Op: FnMut() -> OpFut,
    OpFut: Future<Output = Result<T, E>>,
    Sleep: FnMut(Duration) -> SleepFut,
    SleepFut: Future<Output = ()>,
{
    let mut retry = 0;
    loop {
        match operation().await {
            Ok(value) => return Ok(value),
            Err(error) => {
                retry += 1;
                match policy.pause(retry) {
                    Some(pause) if retryable(&error) => sleep(pause).await,
                    _ => return Err(error),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_statement_policy_pauses_10_40_160_ms_then_stops() {
        let policy = RetryPolicy::STATEMENT;
        let pauses: Vec<_> = (0..=4).map(|n| policy.pause(n)).collect();
        assert_eq!(
            pauses,
            vec![
                None,
                Some(Duration::from_millis(10)),
                Some(Duration::from_millis(40)),
                Some(Duration::from_millis(160)),
                None
            ]
        );
    }
}
