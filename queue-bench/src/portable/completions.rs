//! Completions counted where they become durable: the worker increments
//! `queue_jobs_completed_total` (through the `metrics` facade) for each ack
//! its storage committed. A handler that returned but whose ack never
//! committed (the process killed first, the lease lost) is not a completion;
//! its job runs again and counts then.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};

/// The worker's counter of committed acks.
const COMPLETED: &str = "queue_jobs_completed_total";

/// A `metrics` recorder that keeps only the completion counter.
#[derive(Debug, Clone, Default)]
pub(crate) struct CompletionRecorder {
    completed: Arc<AtomicU64>,
}

impl CompletionRecorder {
    /// Completions counted so far.
    pub(crate) fn completed(&self) -> u64 {
        self.completed.load(Ordering::Relaxed)
    }
}

impl Recorder for CompletionRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        if key.name() == COMPLETED {
            Counter::from_arc(Arc::clone(&self.completed))
        } else {
            Counter::noop()
        }
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_committed_acks_count() {
        let recorder = CompletionRecorder::default();
        metrics::with_local_recorder(&recorder, || {
            metrics::counter!("queue_jobs_completed_total").increment(3);
            metrics::counter!("queue_jobs_started_total").increment(10);
            metrics::counter!("queue_lease_lost_total").increment(1);
            metrics::counter!("queue_jobs_completed_total").increment(1);
        });
        assert_eq!(recorder.completed(), 4);
    }
}
