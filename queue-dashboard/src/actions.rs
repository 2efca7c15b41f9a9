//! The mutations: each a POST that carries the CSRF token, refused in
//! read-only mode, answered with a redirect to the page that shows its
//! effect.

use std::sync::Arc;
use std::time::Duration;

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Redirect;
use queue_core::{
    HistoryFilter, JobFilter, JobId, MAX_PAGE_SIZE, NewJob, QueueLimits, QueueName, RateLimit,
    Storage,
};
use serde::Deserialize;

use crate::AppState;
use crate::auth::csrf_ok;
use crate::error::Failure;
use crate::href::component;
use crate::jobs::JobQuery;

/// The fields every action's form carries.
#[derive(Debug, Deserialize)]
pub(crate) struct Token {
    #[serde(default)]
    csrf: String,
}

/// Refuses the action in read-only mode or without the page's CSRF token.
pub(crate) fn allowed<S>(state: &AppState<S>, csrf: &str) -> Result<(), Failure> {
    if state.options.read_only {
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            "this dashboard is read-only",
        ));
    }
    if !csrf_ok(state, csrf) {
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            "missing or wrong CSRF token: reload the page and try again",
        ));
    }
    Ok(())
}

/// Puts a dead letter back into its queue.
pub(crate) async fn retry<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    Path(id): Path<i64>,
    Form(form): Form<Token>,
) -> Result<Redirect, Failure> {
    allowed(&state, &form.csrf)?;
    state.storage.retry_dead_letter(JobId(id)).await?;
    Ok(Redirect::to(&format!("/jobs/{id}")))
}

/// Moves a live job to history as discarded.
pub(crate) async fn discard<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    Path(id): Path<i64>,
    Form(form): Form<Token>,
) -> Result<Redirect, Failure> {
    allowed(&state, &form.csrf)?;
    state.storage.discard(JobId(id)).await?;
    Ok(Redirect::to(&format!("/jobs/{id}")))
}

/// Cancels a live job: history as `cancelled`, its runner told to stop.
pub(crate) async fn cancel<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    Path(id): Path<i64>,
    Form(form): Form<Token>,
) -> Result<Redirect, Failure> {
    allowed(&state, &form.csrf)?;
    state.storage.cancel(JobId(id)).await?;
    Ok(Redirect::to(&format!("/jobs/{id}")))
}

/// The overview's limits form: empty fields lift that limit.
#[derive(Debug, Deserialize)]
pub(crate) struct LimitsForm {
    #[serde(default)]
    csrf: String,
    queue: String,
    #[serde(default)]
    concurrency: String,
    #[serde(default)]
    rate: String,
    #[serde(default)]
    burst: String,
    /// Absent when the storage has no group limits (the form does not
    /// show the field): the queue's group concurrency is kept.
    #[serde(default)]
    group_concurrency: Option<String>,
    /// The priority aging period in whole seconds; absent when the storage
    /// has no priority aging (the form does not show the field): the
    /// queue's period is kept.
    #[serde(default)]
    priority_aging: Option<String>,
}

/// A number from a form field; an empty field is `None`.
pub(crate) fn optional<T: std::str::FromStr>(
    field: &'static str,
    text: &str,
) -> Result<Option<T>, Failure> {
    match text.trim() {
        "" => Ok(None),
        text => text.parse().map(Some).map_err(|_| {
            Failure::new(
                StatusCode::BAD_REQUEST,
                format!("{field}: {text:?} is not a number"),
            )
        }),
    }
}

/// Sets a queue's concurrency, rate and group concurrency limits and its
/// priority aging period (its lease and backoff are kept).
pub(crate) async fn limits<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    Form(form): Form<LimitsForm>,
) -> Result<Redirect, Failure> {
    allowed(&state, &form.csrf)?;
    let queue = QueueName::new(form.queue.trim())?;
    let concurrency = optional::<u32>("concurrency", &form.concurrency)?;
    let rate = optional::<f64>("rate", &form.rate)?;
    let burst = optional::<u32>("burst", &form.burst)?;
    let group_concurrency = match &form.group_concurrency {
        Some(text) => Some(optional::<u32>("group concurrency", text)?),
        None => None,
    };
    let priority_aging = match &form.priority_aging {
        Some(text) => Some(optional::<u64>("priority aging", text)?.map(Duration::from_secs)),
        None => None,
    };
    let kept = state
        .storage
        .queue_configs()
        .await?
        .into_iter()
        .find(|c| c.queue == queue)
        .map(|c| c.limits)
        .unwrap_or_default();
    let limits = QueueLimits {
        concurrency,
        rate: rate.map(|per_second| RateLimit {
            per_second,
            burst: burst.unwrap_or_else(|| per_second.ceil().clamp(1.0, 1e6) as u32),
        }),
        group_concurrency: group_concurrency.unwrap_or(kept.group_concurrency),
        priority_aging: priority_aging.unwrap_or(kept.priority_aging),
        ..kept
    };
    state.storage.configure_queue(&queue, &limits).await?;
    Ok(Redirect::to("/"))
}

/// Makes a scheduled job available now.
pub(crate) async fn run_now<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    Path(id): Path<i64>,
    Form(form): Form<Token>,
) -> Result<Redirect, Failure> {
    allowed(&state, &form.csrf)?;
    if state.storage.run_now(&JobFilter::id(JobId(id))).await? == 0 {
        return Err(Failure::new(
            StatusCode::CONFLICT,
            format!("job {id} is not scheduled: only a delayed or retrying job can run now"),
        ));
    }
    Ok(Redirect::to(&format!("/jobs/{id}")))
}

/// The bulk form of the jobs page: its filter and which action.
#[derive(Debug, Deserialize)]
pub(crate) struct BulkForm {
    #[serde(default)]
    csrf: String,
    action: String,
    #[serde(flatten)]
    filter: JobQuery,
}

/// Runs now or discards up to 1,000 of the jobs the filter selects.
pub(crate) async fn bulk<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    Form(form): Form<BulkForm>,
) -> Result<Redirect, Failure> {
    allowed(&state, &form.csrf)?;
    let filter = JobFilter {
        limit: MAX_PAGE_SIZE,
        before: None,
        ..form.filter.filter()?
    };
    match form.action.as_str() {
        "run_now" => state.storage.run_now(&filter).await?,
        "discard" => state.storage.discard_jobs(&filter).await?,
        other => {
            return Err(Failure::new(
                StatusCode::BAD_REQUEST,
                format!("unknown bulk action {other:?}: run_now or discard"),
            ));
        }
    };
    Ok(Redirect::to(&format!(
        "/jobs?{}",
        form.filter.query_string()
    )))
}

/// The dead letters page's bulk retry: its queue, if any.
#[derive(Debug, Deserialize)]
pub(crate) struct RetryAllForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    queue: String,
}

/// Retries up to 1,000 dead letters (of one queue, or all).
pub(crate) async fn retry_dead_letters<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    Form(form): Form<RetryAllForm>,
) -> Result<Redirect, Failure> {
    allowed(&state, &form.csrf)?;
    let queue = match form.queue.trim() {
        "" => None,
        name => Some(QueueName::new(name)?),
    };
    let filter = HistoryFilter {
        queue: queue.clone(),
        limit: MAX_PAGE_SIZE,
        ..HistoryFilter::default()
    };
    state.storage.retry_dead_letters(&filter).await?;
    Ok(Redirect::to(&match queue {
        Some(queue) => format!(
            "/history?status=dead_letter&queue={}",
            component(queue.as_str())
        ),
        None => "/history?status=dead_letter".to_owned(),
    }))
}

/// The queue a pause or resume acts on, in the query string
/// (`/queues/pause?queue=...`) rather than in the path: a browser removes a
/// path segment `.` or `..` (even percent-encoded) before sending, so a
/// queue of that name could not be named in a path.
#[derive(Debug, Deserialize)]
pub(crate) struct QueueTarget {
    queue: String,
}

/// Pauses a queue.
pub(crate) async fn pause<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    Query(target): Query<QueueTarget>,
    Form(form): Form<Token>,
) -> Result<Redirect, Failure> {
    allowed(&state, &form.csrf)?;
    state
        .storage
        .pause_queue(&QueueName::new(target.queue)?)
        .await?;
    Ok(Redirect::to("/"))
}

/// Resumes a queue.
pub(crate) async fn resume<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    Query(target): Query<QueueTarget>,
    Form(form): Form<Token>,
) -> Result<Redirect, Failure> {
    allowed(&state, &form.csrf)?;
    state
        .storage
        .resume_queue(&QueueName::new(target.queue)?)
        .await?;
    Ok(Redirect::to("/"))
}

/// The enqueue form's fields.
#[derive(Debug, Deserialize)]
pub(crate) struct EnqueueForm {
    #[serde(default)]
    csrf: String,
    queue: String,
    payload: String,
    #[serde(default)]
    priority: i32,
    #[serde(default)]
    unique_key: String,
    #[serde(default)]
    delay_seconds: u64,
}

/// Adds a job from the form; shows it.
pub(crate) async fn enqueue<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    Form(form): Form<EnqueueForm>,
) -> Result<Redirect, Failure> {
    allowed(&state, &form.csrf)?;
    let payload: serde_json::Value = serde_json::from_str(&form.payload).map_err(|e| {
        Failure::new(
            StatusCode::BAD_REQUEST,
            format!("the payload is not JSON: {e}"),
        )
    })?;
    let mut job = NewJob::new(form.queue, payload).priority(form.priority);
    if !form.unique_key.is_empty() {
        job = job.unique_key(form.unique_key);
    }
    if form.delay_seconds > 0 {
        job = job.delay(Duration::from_secs(form.delay_seconds));
    }
    let outcome = state.storage.enqueue(job).await?;
    Ok(Redirect::to(&format!("/jobs/{}", outcome.id)))
}
