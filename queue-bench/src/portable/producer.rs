//! The producer: what to enqueue when (fixed rate paced here or by the
//! harness's tokens, or a depth target), always through the documented
//! bulk path, `Storage::enqueue_batch`, at most `PRODUCER_BATCH_MAX` jobs a
//! call.

use std::io::BufRead;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use queue_core::{NewJob, QueueName, Storage};
use queue_postgres::PgStorage;
use serde_json::json;
use tokio::sync::{mpsc, watch};

use super::config::{Config, Pacing, ProducerMode};
use super::output::wall_clock;
use super::pacing::{FixedPacer, RateControl, TokenScaler, chunks};
use super::{Shared, stopped};

/// Bytes of a payload besides its padding (`{"enq_us":…,"pad":"","seq":…}`
/// with 16-digit times and 7-digit sequence numbers).
const PAYLOAD_OVERHEAD: usize = 50;

/// The producer's state between batches.
pub(crate) struct Producer {
    storage: PgStorage,
    queue: QueueName,
    shared: Arc<Shared>,
    config: Config,
    padding: String,
    seq: u64,
    stop: watch::Receiver<bool>,
}

impl Producer {
    pub(crate) fn new(
        storage: PgStorage,
        queue: QueueName,
        shared: Arc<Shared>,
        config: Config,
        stop: watch::Receiver<bool>,
    ) -> Self {
        let padding = "x".repeat(config.payload_bytes.saturating_sub(PAYLOAD_OVERHEAD));
        Self {
            storage,
            queue,
            shared,
            config,
            padding,
            seq: 0,
            stop,
        }
    }

    /// Produces until the stop signal.
    pub(crate) async fn run(mut self) {
        match (self.config.producer_mode, self.config.pacing) {
            (ProducerMode::DepthTarget, _) => self.depth_target().await,
            (ProducerMode::Fixed, Pacing::Harness) => {
                if self.harness_paced().await {
                    eprintln!(
                        "queue-bench portable: standard input closed; pacing the fixed rate here"
                    );
                    self.fixed_rate().await;
                }
            }
            (ProducerMode::Fixed, Pacing::Adapter) => self.fixed_rate().await,
        }
    }

    /// Fixed rate paced here: every `PRODUCER_BATCH_MS` the elapsed time is
    /// credited at the current rate and the whole jobs due are enqueued.
    async fn fixed_rate(&mut self) {
        let mut control = RateControl::new(
            self.config.rate_control_file.clone(),
            self.config.producer_rate,
        );
        let mut pacer = FixedPacer::new(Instant::now());
        let mut next = tokio::time::Instant::now();
        while !stopped(&self.stop) {
            next += self.config.batch_period;
            let now = tokio::time::Instant::now();
            if next > now {
                let mut stop = self.stop.clone();
                tokio::select! {
                    () = tokio::time::sleep_until(next) => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
            } else {
                // Behind (a slow insert): no sleeping to catch up on; the
                // credit below covers the time it took.
                next = now;
            }
            let now = Instant::now();
            let rate = control.rate(now);
            self.shared
                .target_rate
                .store(rate.to_bits(), Ordering::Relaxed);
            let due = pacer.take_due(now, rate);
            for n in chunks(due, self.config.batch_max) {
                if !self.insert(n).await {
                    return;
                }
            }
        }
    }

    /// Fixed rate paced by the harness: one batch per `ENQUEUE <n>` line,
    /// scaled by the control file's rate over the launch rate. Returns true
    /// when standard input closed (no harness), false on stop.
    async fn harness_paced(&mut self) -> bool {
        let mut tokens = stdin_tokens();
        let mut control = RateControl::new(
            self.config.rate_control_file.clone(),
            self.config.producer_rate,
        );
        let mut scaler = TokenScaler::default();
        let base = self.config.producer_rate;
        loop {
            let mut stop = self.stop.clone();
            let token = tokio::select! {
                token = tokens.recv() => token,
                _ = stop.wait_for(|s| *s) => return false,
            };
            let Some(n) = token else { return true };
            let rate = control.rate(Instant::now());
            self.shared
                .target_rate
                .store(rate.to_bits(), Ordering::Relaxed);
            let factor = if base > 0.0 { rate / base } else { 1.0 };
            let due = scaler.scale(n, factor);
            for n in chunks(due, self.config.batch_max) {
                if !self.insert(n).await {
                    return false;
                }
            }
        }
    }

    /// Keeps `TARGET_DEPTH` jobs pending: tops the queue up by what is
    /// missing, at most a batch at a time. What is pending is the last
    /// depth read (`poll_depth`, every 200 ms in this mode) plus the jobs
    /// enqueued since it began: never less than the truth, since jobs
    /// completed since are not subtracted, so the queue is never
    /// overfilled, and a read's age costs at most one read's worth of
    /// completions. When nothing is missing it looks again 10 ms later.
    async fn depth_target(&mut self) {
        let target = self.config.target_depth;
        while !stopped(&self.stop) {
            let read = self.shared.depth();
            let since = self
                .shared
                .enqueued
                .load(Ordering::Relaxed)
                .saturating_sub(read.enqueued_before);
            let pending = read.pending.saturating_add(since);
            if pending >= target {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            let n = usize::try_from(target - pending)
                .unwrap_or(usize::MAX)
                .min(self.config.batch_max);
            if !self.insert(n).await {
                return;
            }
        }
    }

    /// Enqueues `n` jobs in one call, retrying through outages (a killed
    /// connection, a restarting server) until it commits or the adapter
    /// stops. Counts them once committed. Returns false on stop.
    async fn insert(&mut self, n: usize) -> bool {
        let mut failures: u32 = 0;
        loop {
            // Stamped at each attempt: pickup latency runs from the insert
            // that committed, not from a failed one.
            let enq_us = u64::try_from(wall_clock().as_micros()).unwrap_or(u64::MAX);
            let jobs: Vec<NewJob> = (0..n as u64)
                .map(|i| {
                    NewJob::new(
                        self.queue.as_str(),
                        json!({"seq": self.seq + i, "enq_us": enq_us, "pad": self.padding}),
                    )
                })
                .collect();
            match self.storage.enqueue_batch(jobs).await {
                Ok(outcomes) => {
                    self.seq += n as u64;
                    self.shared
                        .enqueued
                        .fetch_add(outcomes.len() as u64, Ordering::Relaxed);
                    return true;
                }
                Err(error) => {
                    failures += 1;
                    if failures == 1 || failures.is_power_of_two() {
                        eprintln!(
                            "queue-bench portable: enqueue of {n} failed ({failures}x so far), \
                             retrying: {error}"
                        );
                    }
                    let pause =
                        Duration::from_millis(25u64 << failures.min(5)).min(Duration::from_secs(1));
                    let mut stop = self.stop.clone();
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        _ = stop.wait_for(|s| *s) => return false,
                    }
                }
            }
        }
    }
}

/// The harness's `ENQUEUE <n>` lines, read by a thread of their own (a
/// blocking read of standard input must not hold a runtime thread); other
/// lines are ignored. The channel closes at end of input.
fn stdin_tokens() -> mpsc::Receiver<u64> {
    let (tx, rx) = mpsc::channel(1024);
    let spawned = std::thread::Builder::new()
        .name("enqueue-tokens".into())
        .spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { return };
                let Some(n) = line
                    .trim()
                    .strip_prefix("ENQUEUE ")
                    .and_then(|n| n.trim().parse::<u64>().ok())
                else {
                    continue;
                };
                if n > 0 && tx.blocking_send(n).is_err() {
                    return;
                }
            }
        });
    if let Err(error) = spawned {
        eprintln!("queue-bench portable: cannot read standard input: {error}");
    }
    rx
}

/// The producer's current target rate, stored as `f64` bits.
pub(crate) fn load_rate(bits: &AtomicU64) -> f64 {
    f64::from_bits(bits.load(Ordering::Relaxed))
}
