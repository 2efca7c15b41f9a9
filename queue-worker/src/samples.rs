//! The worker's samples for the operator's charts
//! ([`queue_core::Capability::Samples`]): each claimed job's start lag,
//! counted per queue and minute in memory as the dispatcher claims it, and
//! once a minute each queue's depth; recorded through the storage every
//! [`crate::WorkerOptions::sample_interval`] off the claim's path, and a
//! last time at shutdown.
//!
//! A start lag is the time from when the job could first run (its
//! `available_at`, or its `created_at` when it was enqueued to run at a
//! time already past) to its claim, both read off the job as the storage
//! answered it, so on the storage's clock whatever this host's clock says.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use queue_core::{Depth, Job, QueueName, QueueSample, Storage, minute_of};
use tracing::{debug, warn};

use crate::shared::Shared;

/// The most minutes of samples one worker keeps while the storage refuses
/// them (a day of 16 queues): beyond, the oldest are dropped.
const MAX_HELD: usize = 16 * 24 * 60;

/// Counts at most this many jobs per state when measuring a depth (see
/// [`Storage::stats_capped`]): a deeper queue reads as this deep.
const DEPTH_CAP: u64 = 10_000;

/// How long the shutdown waits for the last samples to be recorded.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// Samples observed and not yet recorded.
#[derive(Debug, Default)]
pub(crate) struct Sampler {
    /// Whether a task records them: when not, nothing is counted.
    on: bool,
    held: Mutex<BTreeMap<(QueueName, DateTime<Utc>), QueueSample>>,
}

impl Sampler {
    /// A sampler that counts (`on`) or ignores what it is told.
    pub(crate) fn new(on: bool) -> Self {
        Self {
            on,
            held: Mutex::default(),
        }
    }

    /// Counts `job`'s start lag, in the minute of its claim.
    pub(crate) fn claimed(&self, job: &Job) {
        if !self.on {
            return;
        }
        let ready_since = job.available_at.max(job.created_at);
        let lag = (job.updated_at - ready_since).to_std().unwrap_or_default();
        let minute = minute_of(job.updated_at);
        self.held()
            .entry((job.queue.clone(), minute))
            .or_insert_with(|| QueueSample::new(job.queue.clone(), minute))
            .lag
            .record(lag);
    }

    /// Adds depths measured at `at` to what is held.
    fn measured(&self, depths: Vec<(QueueName, Depth)>, at: DateTime<Utc>) {
        let minute = minute_of(at);
        let mut held = self.held();
        for (queue, depth) in depths {
            held.entry((queue.clone(), minute))
                .or_insert_with(|| QueueSample::new(queue, minute))
                .depth = Some(depth);
        }
    }

    /// Everything held, which is no longer held.
    fn take(&self) -> Vec<QueueSample> {
        std::mem::take(&mut *self.held()).into_values().collect()
    }

    /// Samples the storage refused, held again (merged with what came
    /// since: lags add up, a newer depth stays), the oldest dropped past
    /// [`MAX_HELD`].
    fn put_back(&self, samples: Vec<QueueSample>) {
        let mut held = self.held();
        for sample in samples {
            let key = (sample.queue.clone(), sample.minute);
            match held.get_mut(&key) {
                Some(newer) => {
                    let depth = newer.depth.or(sample.depth);
                    newer.lag.merge(&sample.lag);
                    newer.depth = depth;
                }
                None => {
                    held.insert(key, sample);
                }
            }
        }
        while held.len() > MAX_HELD {
            let oldest = held
                .keys()
                .min_by_key(|(_, minute)| *minute)
                .cloned()
                .expect("more than MAX_HELD entries");
            held.remove(&oldest);
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, BTreeMap<(QueueName, DateTime<Utc>), QueueSample>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Records what is held every `sample_interval` (the first time one
/// interval after the start), measuring the worker's queues' depths first
/// when the storage's minute changed since the last measure, until
/// `stop_all` fires; then records what is left, waiting
/// [`FLUSH_TIMEOUT`] at most.
pub(crate) async fn run<S: Storage>(shared: Arc<Shared<S>>, interval: Duration) {
    let start = tokio::time::Instant::now() + interval;
    let mut every = tokio::time::interval_at(start, interval);
    let mut measured_in = None;
    loop {
        tokio::select! {
            biased;
            () = shared.stop_all.cancelled() => break,
            _ = every.tick() => {}
        }
        if let Some(minute) = measure_depths(&shared, measured_in).await {
            measured_in = Some(minute);
        }
        record(&shared).await;
    }
    if tokio::time::timeout(FLUSH_TIMEOUT, record(&shared))
        .await
        .is_err()
    {
        debug!("the last samples were not recorded in time");
    }
}

/// Measures the depths of the worker's queues unless already measured in
/// the storage's current minute; the minute measured in, if it did.
async fn measure_depths<S: Storage>(
    shared: &Shared<S>,
    measured_in: Option<DateTime<Utc>>,
) -> Option<DateTime<Utc>> {
    let now = match shared.storage.now().await {
        Ok(now) => now,
        Err(error) => {
            warn!(%error, "the storage's time could not be read; depths not measured");
            return None;
        }
    };
    if measured_in == Some(minute_of(now)) {
        return None;
    }
    let stats = match shared.storage.stats_capped(DEPTH_CAP).await {
        Ok(stats) => stats,
        Err(error) => {
            warn!(%error, "queue depths could not be read");
            return None;
        }
    };
    // A queue without live jobs is not in the stats: its depth is zero.
    let depths = (shared.queues.iter())
        .map(|slot| {
            let depth = stats
                .iter()
                .find(|s| s.queue == slot.name)
                .map(|s| Depth {
                    pending: s.pending,
                    scheduled: s.scheduled,
                    running: s.running + s.stalled,
                })
                .unwrap_or_default();
            (slot.name.clone(), depth)
        })
        .collect();
    shared.sampler.measured(depths, now);
    Some(minute_of(now))
}

/// Records what is held; on failure holds it again for the next round.
async fn record<S: Storage>(shared: &Shared<S>) {
    let samples = shared.sampler.take();
    if samples.is_empty() {
        return;
    }
    for batch in samples.chunks(queue_core::MAX_SAMPLES_PER_CALL) {
        if let Err(error) = shared.storage.record_samples(batch).await {
            warn!(%error, samples = batch.len(), "samples not recorded; kept for the next round");
            shared.sampler.put_back(batch.to_vec());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;
    use queue_core::{JobId, LagHistogram};

    fn job(queue: &str, ready: DateTime<Utc>, claimed: DateTime<Utc>) -> Job {
        Job {
            id: JobId::from(1),
            queue: QueueName::new(queue).unwrap(),
            priority: 0,
            unique_key: None,
            group_key: None,
            payload: serde_json::Value::Null,
            attempts: 1,
            max_attempts: 3,
            snoozes: 0,
            available_at: ready,
            lease_until: Some(claimed + TimeDelta::seconds(30)),
            locked_by: None,
            first_locked_at: Some(claimed),
            last_error: None,
            created_at: ready,
            updated_at: claimed,
            trace_context: None,
        }
    }

    #[test]
    fn a_claim_counts_its_lag_in_the_minute_of_the_claim() {
        let sampler = Sampler::new(true);
        let claimed = DateTime::from_timestamp(600, 0).unwrap() + TimeDelta::seconds(59);
        sampler.claimed(&job("q", claimed - TimeDelta::milliseconds(250), claimed));
        sampler.claimed(&job("q", claimed + TimeDelta::seconds(5), claimed));
        let held = sampler.take();
        let mut lag = LagHistogram::new();
        lag.record(Duration::from_millis(250));
        lag.record(Duration::ZERO);
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].minute, DateTime::from_timestamp(600, 0).unwrap());
        assert_eq!(
            held[0].lag, lag,
            "a clock ahead of the claim counts as no wait"
        );
        assert!(sampler.take().is_empty());
    }

    #[test]
    fn a_sampler_that_is_off_counts_nothing() {
        let sampler = Sampler::new(false);
        let at = DateTime::from_timestamp(600, 0).unwrap();
        sampler.claimed(&job("q", at, at));
        assert!(sampler.take().is_empty());
    }

    #[test]
    fn refused_samples_come_back_under_newer_ones() {
        let sampler = Sampler::new(true);
        let at = DateTime::from_timestamp(600, 0).unwrap();
        let queue = QueueName::new("q").unwrap();
        let depth = |pending| Depth {
            pending,
            scheduled: 0,
            running: 0,
        };
        sampler.claimed(&job("q", at, at));
        sampler.measured(vec![(queue.clone(), depth(1))], at);
        let refused = sampler.take();
        sampler.claimed(&job("q", at, at));
        sampler.measured(vec![(queue, depth(2))], at);
        sampler.put_back(refused);
        let held = sampler.take();
        assert_eq!(held[0].lag.total(), 2);
        assert_eq!(held[0].depth, Some(depth(2)), "the newer depth stays");
    }
}
