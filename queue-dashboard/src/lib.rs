//! `queue-dashboard`: a web dashboard for the job queue, over any
//! [`queue_core::Storage`]. Server-rendered HTML with every asset embedded
//! (no CDN, no JavaScript build), pages updated in place by one small
//! script of its own, Prometheus metrics.
//!
//! ```no_run
//! # async fn demo(storage: std::sync::Arc<impl queue_core::Storage>) -> std::io::Result<()> {
//! use queue_dashboard::{DashboardOptions, router};
//!
//! let app = router(storage, DashboardOptions::default()).expect("valid options");
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await
//! # }
//! ```
//!
//! Every mutation is a POST that carries the page's CSRF token; without
//! [`DashboardOptions::token`] a request is served only for a loopback or
//! allowed `Host`. The pages and the whole security model: [`design`].
mod actions;
mod auth;
mod chart;
mod charts;
mod error;
mod groups;
mod href;
mod jobs;
mod layout;
mod live;
mod metrics;
mod pages;
mod plot;
mod search;
mod workers;
mod workflow;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderName, HeaderValue, header};
use axum::routing::{get, post};
use queue_core::Storage;
use tower_http::set_header::SetResponseHeaderLayer;

/// How the dashboard behaves.
#[derive(Debug, Clone)]
pub struct DashboardOptions {
    /// Refuse every mutation (pause, resume, retry, discard, enqueue).
    pub read_only: bool,
    /// When set, every request must carry this token (see the crate's
    /// security notes); [`router`] refuses a blank one.
    pub token: Option<String>,
    /// Pages update in place this often (at most once a second: shorter
    /// periods are raised to one second); `None` turns it off. Live
    /// requests within a period are answered from one copy per page, so
    /// open tabs read the storage at most once per period and page.
    pub refresh: Option<Duration>,
    /// Without a token, the `Host` names served besides `localhost` and the
    /// loopback addresses: `name` (any port) or `name:port`, such as the
    /// name a reverse proxy forwards.
    pub allowed_hosts: Vec<String>,
    /// Mark the login cookie `Secure` (the dashboard is reached over
    /// HTTPS); it is also marked when the login carries
    /// `X-Forwarded-Proto: https`.
    pub secure_cookie: bool,
}

impl Default for DashboardOptions {
    fn default() -> Self {
        Self {
            read_only: false,
            token: None,
            refresh: Some(Duration::from_secs(5)),
            allowed_hosts: Vec::new(),
            secure_cookie: false,
        }
    }
}

/// Options [`router`] refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OptionsError {
    /// The token is empty or only white space.
    BlankToken,
    /// The token holds a character a cookie cannot carry (control
    /// characters, white space, `"`, `,`, `;`, `\`, non-ASCII).
    TokenCharacter(char),
    /// An allowed host that is not `name` or `name:port`.
    AllowedHost(String),
}

impl std::fmt::Display for OptionsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::BlankToken => f.write_str("the dashboard token is empty or only white space"),
            Self::TokenCharacter(c) => {
                write!(
                    f,
                    "the dashboard token holds {c:?}, which a cookie cannot carry"
                )
            }
            Self::AllowedHost(entry) => {
                write!(f, "the allowed host {entry:?} is not `name` or `name:port`")
            }
        }
    }
}

impl std::error::Error for OptionsError {}

/// What every handler shares.
pub(crate) struct AppState<S> {
    pub(crate) storage: Arc<S>,
    pub(crate) options: DashboardOptions,
    /// [`DashboardOptions::allowed_hosts`], parsed.
    pub(crate) allowed_hosts: Vec<auth::Authority>,
    /// The token every form carries, random per process (every router of
    /// a process shares it).
    pub(crate) csrf: String,
    /// `/metrics`' counters.
    pub(crate) finished: metrics::Finished,
    /// The copies of pages that live requests are answered from.
    pub(crate) live: live::Copies,
}

impl<S: Storage> AppState<S> {
    /// True when the storage declares `capability`: pages show its buttons
    /// and read its series only then.
    pub(crate) fn offers(&self, capability: queue_core::Capability) -> bool {
        self.storage.capabilities().supports(capability)
    }
}

/// This process's CSRF token, drawn once.
fn csrf_token() -> &'static str {
    static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOKEN.get_or_init(|| format!("{:032x}", rand::random::<u128>()))
}

/// The security headers every response carries.
const SECURITY_HEADERS: [(HeaderName, &str); 4] = [
    (
        header::CONTENT_SECURITY_POLICY,
        "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    (header::X_FRAME_OPTIONS, "DENY"),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (header::REFERRER_POLICY, "no-referrer"),
];

/// The dashboard's routes over `storage`; an [`OptionsError`] for a blank
/// token or a malformed allowed host.
pub fn router<S: Storage>(
    storage: Arc<S>,
    options: DashboardOptions,
) -> Result<Router, OptionsError> {
    if let Some(token) = &options.token {
        auth::check_token(token)?;
    }
    let allowed_hosts = auth::allowed_hosts(&options.allowed_hosts)?;
    let state = Arc::new(AppState {
        storage,
        options,
        allowed_hosts,
        csrf: csrf_token().to_owned(),
        finished: metrics::Finished::new(),
        live: live::Copies::default(),
    });
    let mut app = Router::new()
        .route("/", get(pages::overview::<S>))
        .route(layout::STYLE_PATH, get(layout::style))
        .route(live::SCRIPT_PATH, get(live::script))
        .route(auth::LOGIN_PATH, post(auth::login::<S>))
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
        .route(groups::Setting::Limit.path(), post(groups::set_limit::<S>))
        .route(
            groups::Setting::Weight.path(),
            post(groups::set_weight::<S>),
        )
        .route("/queues/pause", post(actions::pause::<S>))
        .route("/queues/resume", post(actions::resume::<S>))
        .route("/workers", get(workers::list::<S>))
        .route(charts::PATH, get(charts::charts::<S>))
        .route("/metrics", get(metrics::metrics::<S>))
        .route("/healthz", get(metrics::healthz::<S>))
        // Innermost: a live copy is served only past the access checks.
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            live::bound::<S>,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            auth::require_token::<S>,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            auth::check_host::<S>,
        ))
        .with_state(state);
    for (name, value) in SECURITY_HEADERS {
        app = app.layer(SetResponseHeaderLayer::overriding(
            name,
            HeaderValue::from_static(value),
        ));
    }
    Ok(app)
}

/// The pages, and the security model in full. Documentation only.
#[doc = include_str!("design.md")]
pub mod design {}

// The README's examples, compiled (and the runnable ones run) as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
