//! Live updates: pages mark the region that changes (`main#live`) and load
//! `/live.js`, which fetches the page again every refresh period with
//! `X-Live: 1` and swaps the region in place. The server bounds what that
//! costs: a live request is answered from the copy of the same URL made
//! less than one period ago, so any number of open tabs read the storage
//! at most once per period and page.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use queue_core::Storage;

use crate::AppState;

/// The script, served at [`SCRIPT_PATH`] (the Content-Security-Policy
/// allows no inline script).
pub(crate) const SCRIPT: &str = include_str!("live.js");

/// Where pages load the script from.
pub(crate) const SCRIPT_PATH: &str = "/live.js";

/// The header that marks a live request.
pub(crate) const HEADER: &str = "x-live";

/// The shortest period a page may refresh at, whatever the options say.
pub(crate) const MIN_PERIOD: Duration = Duration::from_secs(1);

/// Pages kept at most; past it, copies older than a period are dropped,
/// then all of them.
const CAPACITY: usize = 256;

/// A page larger than this is not kept (it is still served).
const MAX_KEPT: usize = 4 << 20;

/// `GET /live.js`.
pub(crate) async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
}

/// The copies of pages served to live requests, by URL.
#[derive(Debug, Default, Clone)]
pub(crate) struct Copies(Arc<Mutex<HashMap<String, (Instant, Bytes)>>>);

impl Copies {
    fn fresh(&self, url: &str, period: Duration) -> Option<Bytes> {
        let copies = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        copies
            .get(url)
            .filter(|(made, _)| made.elapsed() < period)
            .map(|(_, body)| body.clone())
    }

    fn keep(&self, url: String, body: Bytes, period: Duration) {
        let mut copies = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if copies.len() >= CAPACITY && !copies.contains_key(&url) {
            copies.retain(|_, (made, _)| made.elapsed() < period);
            if copies.len() >= CAPACITY {
                copies.clear();
            }
        }
        copies.insert(url, (Instant::now(), body));
    }
}

/// The refresh period of `state`'s pages, `None` when refresh is off.
pub(crate) fn period<S>(state: &AppState<S>) -> Option<Duration> {
    state.options.refresh.map(|every| every.max(MIN_PERIOD))
}

/// Middleware: a `GET` with `X-Live: 1` is answered from a copy of its URL
/// made less than a period ago, or runs and leaves its copy. It runs after
/// the access checks, so a copy only reaches whoever may read the page.
pub(crate) async fn bound<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    request: Request,
    next: Next,
) -> Response {
    let live = request.method() == Method::GET && request.headers().contains_key(HEADER);
    let Some(period) = period(&state).filter(|_| live) else {
        return next.run(request).await;
    };
    let url = request.uri().to_string();
    if let Some(body) = state.live.fresh(&url, period) {
        return page(body);
    }
    let response = next.run(request).await;
    if response.status() != StatusCode::OK {
        return response;
    }
    let (parts, body) = response.into_parts();
    match axum::body::to_bytes(body, MAX_KEPT).await {
        Ok(bytes) => {
            state.live.keep(url, bytes.clone(), period);
            Response::from_parts(parts, Body::from(bytes))
        }
        // Too large to keep (or the body failed): the request again,
        // unkept, would cost as much; answer that the page is gone.
        Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

fn page(body: Bytes) -> Response {
    let mut response = Response::new(Body::from(body));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}
