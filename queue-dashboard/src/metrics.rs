//! `/metrics` in Prometheus' text format, and `/healthz`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use queue_core::{JobState, Storage};

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

/// Gauges from the storage's stats, read at each scrape.
pub(crate) async fn metrics<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
) -> Result<Response, Failure> {
    let stats = state.storage.stats().await?;
    let hour = state.storage.throughput(HOUR).await?;
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
