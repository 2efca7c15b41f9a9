//! `/metrics` in Prometheus' text format, and `/healthz`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, TimeDelta, Utc};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use queue_core::{Capability, JobState, MAX_THROUGHPUT_WINDOW, Storage, minute_of};
use tokio::sync::Mutex;

use crate::AppState;
use crate::error::Failure;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueState {
    queue: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueStatus {
    queue: String,
    status: String,
}

/// The window of the finished-jobs gauge.
const HOUR: std::time::Duration = std::time::Duration::from_secs(3600);

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabel {
    queue: String,
}

/// Counters of the jobs archived as completed and as dead letters since
/// this dashboard started (from the minute after its first scrape), per queue: what a Prometheus counter means
/// (it only grows; a restart starts it at 0 again, which `rate()` expects).
///
/// Each scrape adds the throughput series' minutes that closed since the
/// last one counted, once each: a minute counts when the next one has
/// passed too (so jobs finishing at its end have committed), that is 1 to
/// 2 minutes late. A job archived and then deleted (a retried dead letter,
/// pruned) before its minute counts is not counted; one counted stays
/// counted. Scrapes more than 7 days apart lose what lies beyond the
/// series' longest window.
pub(crate) struct Finished {
    completed: Family<QueueLabel, Counter>,
    failed: Family<QueueLabel, Counter>,
    /// The first minute not yet counted; `None` before the first scrape.
    next: Mutex<Option<DateTime<Utc>>>,
}

impl Finished {
    pub(crate) fn new() -> Self {
        Self {
            completed: Family::default(),
            failed: Family::default(),
            next: Mutex::new(None),
        }
    }

    /// Adds the minutes closed since the last call; the first call starts
    /// counting at the minute after its now.
    async fn catch_up<S: Storage>(&self, storage: &S, now: DateTime<Utc>) -> Result<(), Failure> {
        let mut next = self.next.lock().await;
        // Minutes before this one have closed: the one after them is over too.
        let closed = minute_of(now) - TimeDelta::minutes(1);
        let Some(from) = *next else {
            *next = Some(minute_of(now) + TimeDelta::minutes(1));
            return Ok(());
        };
        if closed <= from {
            return Ok(());
        }
        // One minute more than needed, so that the series' partial first
        // minute lies before `from` and is not used.
        let reach = (now - from + TimeDelta::minutes(1))
            .to_std()
            .unwrap_or(MAX_THROUGHPUT_WINDOW)
            .min(MAX_THROUGHPUT_WINDOW);
        for point in storage.throughput(reach).await? {
            if point.minute >= from && point.minute < closed {
                let queue = QueueLabel {
                    queue: point.queue.as_str().to_owned(),
                };
                self.completed.get_or_create(&queue).inc_by(point.completed);
                self.failed.get_or_create(&queue).inc_by(point.failed);
            }
        }
        *next = Some(closed);
        Ok(())
    }
}

/// Gauges from the storage's stats, read at each scrape, and the counters
/// of [`Finished`].
pub(crate) async fn metrics<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
) -> Result<Response, Failure> {
    let now = state.storage.now().await?;
    // Without a throughput series the finished-job families stay empty.
    let counted = state.offers(Capability::Throughput);
    if counted {
        state.finished.catch_up(&*state.storage, now).await?;
    }
    let stats = state.storage.stats().await?;
    let hour = if counted {
        state.storage.throughput(HOUR).await?
    } else {
        Vec::new()
    };
    let finished = Family::<QueueStatus, Gauge>::default();
    for point in &hour {
        for (status, n) in [
            ("completed", point.completed),
            ("dead_letter", point.failed),
        ] {
            finished
                .get_or_create(&QueueStatus {
                    queue: point.queue.as_str().to_owned(),
                    status: status.to_owned(),
                })
                .inc_by(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }
    let jobs = Family::<QueueState, Gauge>::default();
    let paused = Family::<QueueLabel, Gauge>::default();
    let oldest = Family::<QueueLabel, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    for s in &stats {
        for job_state in JobState::ALL {
            jobs.get_or_create(&QueueState {
                queue: s.queue.as_str().to_owned(),
                state: job_state.as_str().to_owned(),
            })
            .set(i64::try_from(s.count(job_state)).unwrap_or(i64::MAX));
        }
        let queue = QueueLabel {
            queue: s.queue.as_str().to_owned(),
        };
        paused.get_or_create(&queue).set(i64::from(s.paused));
        oldest
            .get_or_create(&queue)
            .set(s.oldest_pending_age.map_or(0.0, |age| age.as_secs_f64()));
    }
    let mut registry = Registry::default();
    registry.register(
        "queue_jobs_completed",
        "Jobs archived as completed since the dashboard started, by queue (counted 1 to 2 minutes after their minute)",
        state.finished.completed.clone(),
    );
    registry.register(
        "queue_jobs_dead_lettered",
        "Jobs archived as dead letters since the dashboard started, by queue (counted 1 to 2 minutes after their minute)",
        state.finished.failed.clone(),
    );
    registry.register("queue_jobs", "Live jobs by queue and derived state", jobs);
    registry.register("queue_paused", "1 when the queue is paused", paused);
    registry.register(
        "queue_finished_last_hour",
        "Jobs archived in the last hour, by queue and final status (completed, dead_letter), from history",
        finished,
    );
    registry.register(
        "queue_oldest_pending_seconds",
        "Age of the oldest pending job (0 when none)",
        oldest,
    );
    let mut body = String::new();
    encode(&mut body, &registry)
        .map_err(|e| Failure::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
        .into_response())
}

/// 200 when the storage answers, 503 otherwise.
pub(crate) async fn healthz<S: Storage>(State(state): State<Arc<AppState<S>>>) -> Response {
    match state.storage.now().await {
        Ok(_) => (StatusCode::OK, "ok\n").into_response(),
        Err(error) => (StatusCode::SERVICE_UNAVAILABLE, format!("{error}\n")).into_response(),
    }
}
