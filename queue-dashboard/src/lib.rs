//! `queue-dashboard`: a web dashboard for the job queue, over any
//! [`queue_core::Storage`]. Server-rendered HTML with every asset embedded
//! (no CDN, no JavaScript build), auto-refresh, Prometheus metrics.
//!
//! ```no_run
//! # async fn demo(storage: std::sync::Arc<impl queue_core::Storage>) -> std::io::Result<()> {
//! use queue_dashboard::{DashboardOptions, router};
//!
//! let app = router(storage, DashboardOptions::default());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await
//! # }
//! ```
//!
//! Pages: the overview (per queue: counts by state, oldest pending job,
//! completed and dead-lettered in the last 24 hours, an SVG chart of the
//! last hour, pause and resume), live jobs by queue, state and unique key
//! (paged; run now and discard in bulk), finished jobs and dead letters
//! (filtered, paged, retry one or all), a job's detail (payload, last
//! error, result; run now, discard, retry), an enqueue form. `/metrics`
//! (Prometheus text) and `/healthz`.
//!
//! Security: every mutation is a POST that carries the page's CSRF token
//! and is refused without it; with [`DashboardOptions::token`] set, every
//! request needs the token (a bearer header, or the cookie that
//! `?token=…` sets); [`DashboardOptions::read_only`] refuses every
//! mutation. Everything read from the database is HTML-escaped, and
//! request strings become typed values, never SQL.

mod actions;
mod auth;
mod chart;
mod error;
mod jobs;
mod layout;
mod metrics;
mod pages;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use queue_core::Storage;

/// How the dashboard behaves.
#[derive(Debug, Clone)]
pub struct DashboardOptions {
    /// Refuse every mutation (pause, resume, retry, discard, enqueue).
    pub read_only: bool,
    /// When set, every request must carry this token.
    pub token: Option<String>,
    /// Pages reload themselves this often; `None` turns it off.
    pub refresh: Option<Duration>,
}

impl Default for DashboardOptions {
    fn default() -> Self {
        Self {
            read_only: false,
            token: None,
            refresh: Some(Duration::from_secs(5)),
        }
    }
}

/// What every handler shares.
pub(crate) struct AppState<S> {
    pub(crate) storage: Arc<S>,
    pub(crate) options: DashboardOptions,
    /// The token every form carries, random per process.
    pub(crate) csrf: String,
    /// `/metrics`' counters.
    pub(crate) finished: metrics::Finished,
}

/// The dashboard's routes over `storage`.
pub fn router<S: Storage>(storage: Arc<S>, options: DashboardOptions) -> Router {
    let state = Arc::new(AppState {
        storage,
        options,
        csrf: format!("{:032x}", rand::random::<u128>()),
        finished: metrics::Finished::new(),
    });
    Router::new()
        .route("/", get(pages::overview::<S>))
        .route("/history", get(pages::history::<S>))
        .route("/jobs", get(jobs::list::<S>))
        .route("/jobs/bulk", post(actions::bulk::<S>))
        .route("/jobs/{id}", get(pages::job::<S>))
        .route("/jobs/{id}/run-now", post(actions::run_now::<S>))
        .route(
            "/dead-letters/retry",
            post(actions::retry_dead_letters::<S>),
        )
        .route(
            "/enqueue",
            get(pages::enqueue_form::<S>).post(actions::enqueue::<S>),
        )
        .route("/jobs/{id}/retry", post(actions::retry::<S>))
        .route("/jobs/{id}/discard", post(actions::discard::<S>))
        .route("/jobs/{id}/cancel", post(actions::cancel::<S>))
        .route("/queues/limits", post(actions::limits::<S>))
        .route("/queues/{queue}/pause", post(actions::pause::<S>))
        .route("/queues/{queue}/resume", post(actions::resume::<S>))
        .route("/metrics", get(metrics::metrics::<S>))
        .route("/healthz", get(metrics::healthz::<S>))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            auth::require_token::<S>,
        ))
        .with_state(state)
}
