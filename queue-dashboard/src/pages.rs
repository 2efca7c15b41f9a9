//! The pages: overview, history, a job's detail, the enqueue form.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use maud::{Markup, html};
use queue_core::{
    Capability, FinalStatus, HistoryFilter, HistoryPage, JobId, JobState, LinkStatus, QueueLimits,
    QueueName, QueueStats, Storage, Throughput, search_history,
};
use serde::Deserialize;

use crate::error::Failure;
use crate::href::component;
use crate::layout::{action, page, still_page};
use crate::workflow::{Graph, Node};
use crate::{AppState, chart, groups, search, workflow};

/// Per queue: counts by state, the oldest pending job, what finished in
/// the last 24 hours, the last hour's throughput, pause and resume.
pub(crate) async fn overview<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
) -> Result<Markup, Failure> {
    let mut stats = state.storage.stats().await?;
    let configs = if state.offers(Capability::FlowLimits) {
        state.storage.queue_configs().await?
    } else {
        Vec::new()
    };
    let group_limits: Vec<_> = if state.offers(Capability::GroupLimits) {
        (state.storage.group_limits().await?.into_iter())
            .map(|l| (l.queue, l.group, l.limit))
            .collect()
    } else {
        Vec::new()
    };
    let group_weights: Vec<_> = if state.offers(Capability::GroupWeights) {
        (state.storage.group_weights().await?.into_iter())
            .map(|w| (w.queue, w.group, w.weight))
            .collect()
    } else {
        Vec::new()
    };
    let now = state.storage.now().await?;
    let counted = state.offers(Capability::Throughput);
    let day = if counted {
        state.storage.throughput(DAY).await?
    } else {
        Vec::new()
    };
    // Queues with nothing live but jobs finished today are shown too.
    for point in &day {
        if !stats.iter().any(|s| s.queue == point.queue) {
            stats.push(QueueStats::empty(point.queue.clone()));
        }
    }
    stats.sort_by(|a, b| a.queue.cmp(&b.queue));
    let hour_ago = now - chrono::Duration::minutes(chart::MINUTES);
    let body = html! {
        @if stats.is_empty() {
            p.muted { "No live jobs, no paused queues, nothing finished in the last 24 hours." }
        } @else {
            table {
                thead { tr {
                    th { "queue" } th { "pending" } th { "scheduled" } th { "running" }
                    th { "stalled" } th { "exhausted" } th { "oldest pending" }
                    th { "completed 24 h" } th { "dead 24 h" } th { "last hour" } th { "" }
                } }
                tbody {
                    @for s in &stats {
                        @let points: Vec<&Throughput> = day.iter().filter(|p| p.queue == s.queue).collect();
                        @let recent: Vec<&Throughput> = points.iter().copied().filter(|p| p.minute > hour_ago).collect();
                        tr {
                            td {
                                @if state.offers(Capability::ListJobs) {
                                    a href=(format!("/jobs?queue={}", component(s.queue.as_str()))) { (s.queue.as_str()) }
                                } @else {
                                    (s.queue.as_str())
                                }
                                @if s.paused { " " span.paused { "paused" } }
                                @if let Some(config) = configs.iter().find(|c| c.queue == s.queue && c.limits != QueueLimits::default()) {
                                    br; small.muted { (config.limits.to_string()) }
                                }
                            }
                            @for job_state in JobState::ALL {
                                td title=[s.is_capped(job_state).then_some("counted up to this cap")] {
                                    (s.shown(job_state))
                                }
                            }
                            td { (s.oldest_pending_age.map_or_else(|| "-".to_owned(), |a| format!("{:.1} s", a.as_secs_f64()))) }
                            @if counted {
                                td { (points.iter().map(|p| p.completed).sum::<u64>()) }
                                td {
                                    a href=(format!("/history?status=dead_letter&queue={}", component(s.queue.as_str()))) {
                                        (points.iter().map(|p| p.failed).sum::<u64>())
                                    }
                                }
                                td { (chart::throughput(&recent, now)) }
                            } @else {
                                @for _ in 0..3 {
                                    td.muted title="this storage does not count throughput" { "n/a" }
                                }
                            }
                            td {
                                @let path = format!("/queues/{}?queue={}", if s.paused { "resume" } else { "pause" }, component(s.queue.as_str()));
                                (action(&state, Capability::Pause, &path, if s.paused { "Resume" } else { "Pause" }))
                            }
                        }
                    }
                }
            }
        }
        @if !state.options.read_only && state.offers(Capability::FlowLimits) {
            h2 { "Limits" }
            p.muted { "Enforced by every worker's claim on every host. An empty field lifts that limit." }
            form method="post" action="/queues/limits" {
                input type="hidden" name="csrf" value=(state.csrf);
                label { "queue " input name="queue" required; } " "
                label { "concurrency " input name="concurrency" size="6"; } " "
                label { "jobs per second " input name="rate" size="6"; } " "
                label { "burst " input name="burst" size="6"; } " "
                @if state.offers(Capability::GroupLimits) {
                    label { "group concurrency " input name="group_concurrency" size="6"; } " "
                }
                @if state.offers(Capability::PriorityAging) {
                    label { "priority aging (seconds) " input name="priority_aging" size="8"; } " "
                }
                button type="submit" { "Set limits" }
            }
        }
        @if state.offers(Capability::GroupLimits) {
            (groups::section(&state, groups::Setting::Limit, &group_limits))
        }
        @if state.offers(Capability::GroupWeights) {
            (groups::section(&state, groups::Setting::Weight, &group_weights))
        }
    };
    Ok(page(&state, "Overview", body))
}

/// The overview's window for finished jobs.
const DAY: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// The filters of the history page, from its query string.
#[derive(Debug, Deserialize)]
pub(crate) struct HistoryQuery {
    queue: Option<String>,
    status: Option<String>,
    /// A value in the payload (`search.rs`).
    #[serde(default)]
    payload: String,
    before: Option<i64>,
}

/// Finished jobs, newest first, by queue and status, 50 a page.
pub(crate) async fn history<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    Query(query): Query<HistoryQuery>,
) -> Result<Markup, Failure> {
    let status = match query.status.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(text) => Some(text.parse::<FinalStatus>().map_err(|_| {
            Failure::new(
                axum::http::StatusCode::BAD_REQUEST,
                format!("unknown status {text:?}: completed, dead_letter, discarded or cancelled"),
            )
        })?),
    };
    let queue = match query.queue.as_deref().filter(|q| !q.is_empty()) {
        Some(queue) => Some(QueueName::new(queue)?),
        None => None,
    };
    let filter = HistoryFilter {
        queue: queue.clone(),
        status,
        before: query.before.map(JobId),
        limit: 50,
    };
    let payload = search::payload_match(&query.payload)?;
    let searched = search_history(&*state.storage, &filter, payload.as_ref(), search::SCAN).await?;
    let page_of = HistoryPage {
        records: searched.items,
        next: searched.next,
    };
    let title = if status == Some(FinalStatus::DeadLetter) {
        "Dead letters"
    } else {
        "History"
    };
    let body = html! {
        form method="get" action="/history" {
            input name="queue" placeholder="queue" value=[queue.as_ref().map(QueueName::as_str)];
            select name="status" {
                option value="" { "any status" }
                @for s in [FinalStatus::Completed, FinalStatus::DeadLetter, FinalStatus::Discarded] {
                    option value=(s.as_str()) selected[status == Some(s)] { (s.as_str()) }
                }
            }
            (search::field(&query.payload))
            button type="submit" { "Filter" }
        }
        @if payload.is_some() {
            (search::summary(searched.scanned, page_of.records.len(), searched.budget_spent))
        }
        table {
            thead { tr { th { "id" } th { "queue" } th { "status" } th { "attempts" } th { "finished at" } th { "" } } }
            tbody {
                @for r in &page_of.records {
                    tr {
                        td { a href=(format!("/jobs/{}", r.id)) { (r.id) } }
                        td { (r.queue.as_str()) }
                        td { (r.status.as_str()) }
                        td { (r.attempts) }
                        td { (r.finished_at.to_rfc3339()) }
                        td {
                            @if r.status == FinalStatus::DeadLetter {
                                (action(&state, Capability::RetryDeadLetter, &format!("/jobs/{}/retry", r.id), "Retry"))
                            }
                        }
                    }
                }
            }
        }
        @if let Some(next) = page_of.next {
            p { a href=(next_page(queue.as_ref(), status, &query.payload, next)) { "Older →" } }
        }
        @if payload.is_none() && status == Some(FinalStatus::DeadLetter) && !page_of.records.is_empty() && !state.options.read_only && state.offers(Capability::BulkActions) {
            form.bulk method="post" action="/dead-letters/retry" {
                input type="hidden" name="csrf" value=(state.csrf);
                input type="hidden" name="queue" value=(queue.as_ref().map_or("", QueueName::as_str));
                button type="submit" { "Retry every dead letter" @if let Some(q) = &queue { " of " (q.as_str()) } " (1,000 at a time)" }
            }
        }
    };
    Ok(page(&state, title, body))
}

fn next_page(
    queue: Option<&QueueName>,
    status: Option<FinalStatus>,
    payload: &str,
    before: JobId,
) -> String {
    let mut url = format!("/history?before={before}");
    if let Some(queue) = queue {
        url.push_str(&format!("&queue={}", component(queue.as_str())));
    }
    if let Some(status) = status {
        url.push_str(&format!("&status={}", status.as_str()));
    }
    if !payload.trim().is_empty() {
        url.push_str(&format!("&payload={}", component(payload.trim())));
    }
    url
}

/// One job, live or finished: every field, payload and error pretty-printed.
pub(crate) async fn job<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    Path(id): Path<i64>,
) -> Result<Markup, Failure> {
    let id = JobId(id);
    if let Some(job) = state.storage.get_job(id).await? {
        let now = state.storage.now().await?;
        let graph = links(
            &state,
            Node {
                id,
                queue: Some(job.queue.clone()),
                status: LinkStatus::Live(job.state(now)),
            },
        )
        .await?;
        let body = html! {
            dl {
                dt { "state" } dd { (job.state(now).as_str()) " (live)" }
                dt { "queue" } dd { (job.queue.as_str()) }
                dt { "priority" } dd { (job.priority) }
                dt { "unique key" } dd { (job.unique_key.as_ref().map_or("-", |k| k.as_str())) }
                dt { "group key" } dd { (job.group_key.as_ref().map_or("-", |k| k.as_str())) }
                dt { "attempts" } dd { (job.attempts) " of " (job.max_attempts) }
                dt { "snoozes" } dd { (job.snoozes) }
                dt { "traceparent" } dd { (job.trace_context.as_ref().map_or("-", |t| t.traceparent())) }
                dt { "available at" } dd {
                    @if job.state(now) == JobState::Waiting {
                        "once its dependencies have finished"
                    } @else {
                        (job.available_at.to_rfc3339())
                    }
                }
                dt { "lease until" } dd { (job.lease_until.map_or_else(|| "-".to_owned(), |t| t.to_rfc3339())) }
                dt { "locked by" } dd {
                    @match &job.locked_by {
                        Some(worker) if state.offers(Capability::Workers) => {
                            a href=(crate::workers::worker_href(worker)) { (worker.as_str()) }
                        }
                        Some(worker) => (worker.as_str()),
                        None => "-",
                    }
                }
                dt { "created at" } dd { (job.created_at.to_rfc3339()) }
            }
            h2 { "Payload" } (json_block(Some(&job.payload)))
            h2 { "Last error" } (json_block(job.last_error.as_ref()))
            (workflow::section(&graph, id))
            p {
                @if job.state(now) == JobState::Scheduled {
                    (action(&state, Capability::BulkActions, &format!("/jobs/{id}/run-now"), "Run now")) " "
                }
                (action(&state, Capability::Cancel, &format!("/jobs/{id}/cancel"), "Cancel")) " "
                (action(&state, Capability::Discard, &format!("/jobs/{id}/discard"), "Discard"))
            }
        };
        return Ok(page(&state, &format!("Job {id}"), body));
    }
    let Some(record) = state.storage.get_history(id).await? else {
        return Err(Failure::new(
            axum::http::StatusCode::NOT_FOUND,
            format!("job {id} is neither live nor in history"),
        ));
    };
    let graph = links(
        &state,
        Node {
            id,
            queue: Some(record.queue.clone()),
            status: LinkStatus::Finished(record.status),
        },
    )
    .await?;
    let body = html! {
        dl {
            dt { "status" } dd { (record.status.as_str()) " (history)" }
            dt { "queue" } dd { (record.queue.as_str()) }
            dt { "priority" } dd { (record.priority) }
            dt { "unique key" } dd { (record.unique_key.as_ref().map_or("-", |k| k.as_str())) }
            dt { "group key" } dd { (record.group_key.as_ref().map_or("-", |k| k.as_str())) }
            dt { "attempts" } dd { (record.attempts) " of " (record.max_attempts) }
            dt { "snoozes" } dd { (record.snoozes) }
            dt { "traceparent" } dd { (record.trace_context.as_ref().map_or("-", |t| t.traceparent())) }
            dt { "processed by" } dd { (record.processed_by.as_ref().map_or("-", |w| w.as_str())) }
            dt { "created at" } dd { (record.created_at.to_rfc3339()) }
            dt { "started at" } dd { (record.started_at.map_or_else(|| "-".to_owned(), |t| t.to_rfc3339())) }
            dt { "finished at" } dd { (record.finished_at.to_rfc3339()) }
        }
        h2 { "Payload" } (json_block(Some(&record.payload)))
        h2 { "Result" } (json_block(record.result.as_ref()))
        h2 { "Last error" } (json_block(record.last_error.as_ref()))
        (workflow::section(&graph, id))
        @if record.status == FinalStatus::DeadLetter {
            p { (action(&state, Capability::RetryDeadLetter, &format!("/jobs/{id}/retry"), "Retry")) }
        }
    };
    Ok(page(&state, &format!("Job {id}"), body))
}

/// The workflow around `start` on a storage with dependencies, else none.
async fn links<S: Storage>(state: &AppState<S>, start: Node) -> Result<Graph, Failure> {
    if !state.offers(Capability::Dependencies) {
        return Ok(Graph::default());
    }
    Ok(Graph::explore(state.storage.as_ref(), start).await?)
}

/// JSON pretty-printed in a `<pre>`, escaped like every other splice.
fn json_block(value: Option<&serde_json::Value>) -> Markup {
    match value {
        None => html! { p.muted { "none" } },
        Some(value) => html! {
            pre { (serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())) }
        },
    }
}

/// The enqueue form.
pub(crate) async fn enqueue_form<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
) -> Result<Markup, Failure> {
    if state.options.read_only {
        return Err(Failure::new(
            axum::http::StatusCode::FORBIDDEN,
            "this dashboard is read-only",
        ));
    }
    let body = html! {
        form method="post" action="/enqueue" {
            input type="hidden" name="csrf" value=(state.csrf);
            dl {
                dt { label for="queue" { "queue" } } dd { input id="queue" name="queue" required; }
                dt { label for="payload" { "payload (JSON)" } } dd { textarea id="payload" name="payload" rows="6" cols="60" { "{}" } }
                dt { label for="priority" { "priority" } } dd { input id="priority" name="priority" type="number" value="0"; }
                dt { label for="unique_key" { "unique key" } } dd { input id="unique_key" name="unique_key"; }
                dt { label for="delay_seconds" { "delay (seconds)" } } dd { input id="delay_seconds" name="delay_seconds" type="number" min="0" value="0"; }
            }
            button type="submit" { "Enqueue" }
        }
    };
    Ok(still_page(&state, "Enqueue", body))
}
