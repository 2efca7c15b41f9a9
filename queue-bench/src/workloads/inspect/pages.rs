//! The dashboard's pages over the placed data, served by its router in
//! this process (no socket: the time is the handlers' and the storage's).

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use queue_dashboard::DashboardOptions;
use tower::ServiceExt;

use super::placement::{DONE, Placed, QUEUES};
use super::{PAGE_MS, Timed};
use crate::BenchError;
use crate::target::Target;

/// Times every page a GET reaches, with each state's and filter's jobs
/// page, the history pages and the charts over an hour and a day.
pub(super) async fn time<T: Target>(
    storage: &T,
    placed: &Placed,
    n: usize,
) -> Result<Vec<Timed>, BenchError> {
    let options = DashboardOptions {
        refresh: None,
        ..DashboardOptions::default()
    };
    let app =
        queue_dashboard::router(Arc::new(storage.clone()), options).map_err(|e| e.to_string())?;
    let queue = QUEUES[0];
    let mut paths = vec![
        "/".to_owned(),
        "/jobs".to_owned(),
        format!("/jobs?queue={queue}"),
        format!("/jobs?unique_key={}", placed.unique_key),
        format!("/jobs/{}", placed.running),
        format!("/jobs/{}", placed.finished),
        "/history".to_owned(),
        format!("/history?queue={DONE}"),
        "/history?status=dead_letter".to_owned(),
        "/enqueue".to_owned(),
        "/workers".to_owned(),
        "/metrics".to_owned(),
        "/charts".to_owned(),
        "/charts?window=day".to_owned(),
        format!("/charts?queue={queue}&window=day"),
    ];
    for state in queue_core::JobState::ALL {
        paths.push(format!("/jobs?state={}", state.as_str()));
        paths.push(format!("/jobs?queue={queue}&state={}", state.as_str()));
    }
    let offers = |capability| storage.capabilities().supports(capability);
    let workers = offers(queue_core::Capability::Workers);
    let charts =
        offers(queue_core::Capability::Throughput) || offers(queue_core::Capability::Samples);
    let mut out = Vec::with_capacity(paths.len());
    for path in paths {
        if (path == "/workers" && !workers) || (path.starts_with("/charts") && !charts) {
            continue;
        }
        let timed = Timed::of(&format!("page {path}"), Some(PAGE_MS), n, || {
            get(&app, &path)
        })
        .await?;
        out.push(timed);
    }
    Ok(out)
}

/// GETs `path`; its body's length, or an error naming the status.
async fn get(app: &axum::Router, path: &str) -> Result<usize, BenchError> {
    let request = Request::get(path)
        .header(header::HOST, "127.0.0.1:8080")
        .body(Body::empty())
        .map_err(|e| e.to_string())?;
    let response = app
        .clone()
        .oneshot(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .map_err(|e| e.to_string())?;
    if status != StatusCode::OK {
        return Err(format!("GET {path}: {status}: {}", String::from_utf8_lossy(&body)).into());
    }
    Ok(body.len())
}
