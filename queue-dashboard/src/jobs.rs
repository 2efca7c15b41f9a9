//! Live jobs by queue, state and unique key, paged, with bulk actions on
//! what the filter selects; and by a value in their payload (`search.rs`).

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use maud::{Markup, html};
use queue_core::{
    Capability, JobFilter, JobId, JobPage, JobState, QueueName, Storage, UniqueKey, search_jobs,
};
use serde::Deserialize;

use crate::error::Failure;
use crate::href::component;
use crate::layout::page;
use crate::{AppState, search};

/// Jobs a page.
const PAGE: u32 = 50;

/// The filters of the jobs page and of its bulk actions.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct JobQuery {
    #[serde(default)]
    pub(crate) queue: String,
    #[serde(default)]
    pub(crate) state: String,
    #[serde(default)]
    pub(crate) unique_key: String,
    /// A value in the payload (`payload.customer_id = 42`): the page then
    /// searches (`search.rs`), and offers no bulk action.
    #[serde(default)]
    pub(crate) payload: String,
    pub(crate) before: Option<i64>,
}

impl JobQuery {
    /// The typed filter; empty fields are no filter, bad ones a 400.
    pub(crate) fn filter(&self) -> Result<JobFilter, Failure> {
        let state = match self.state.as_str() {
            "" => None,
            text => Some(
                JobState::ALL
                    .into_iter()
                    .find(|s| s.as_str() == text)
                    .ok_or_else(|| {
                        Failure::new(
                            StatusCode::BAD_REQUEST,
                            format!(
                                "unknown state {text:?}: pending, scheduled, running, stalled or exhausted"
                            ),
                        )
                    })?,
            ),
        };
        Ok(JobFilter {
            queue: non_empty(&self.queue).map(QueueName::new).transpose()?,
            state,
            unique_key: non_empty(&self.unique_key)
                .map(UniqueKey::new)
                .transpose()?,
            before: self.before.map(JobId),
            limit: PAGE,
            ..JobFilter::default()
        })
    }

    /// The query string of this filter (without `before`).
    pub(crate) fn query_string(&self) -> String {
        let pairs = [
            ("queue", &self.queue),
            ("state", &self.state),
            ("unique_key", &self.unique_key),
            ("payload", &self.payload),
        ];
        pairs
            .iter()
            .filter(|(_, value)| !value.is_empty())
            .map(|(key, value)| format!("{key}={}", component(value)))
            .collect::<Vec<_>>()
            .join("&")
    }
}

fn non_empty(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// The jobs page.
pub(crate) async fn list<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    Query(query): Query<JobQuery>,
) -> Result<Markup, Failure> {
    let filter = query.filter()?;
    let payload = search::payload_match(&query.payload)?;
    let searched = search_jobs(&*state.storage, &filter, payload.as_ref(), search::SCAN).await?;
    let found = JobPage {
        jobs: searched.items,
        next: searched.next,
    };
    let now = state.storage.now().await?;
    let selected = query.query_string();
    let body = html! {
        form method="get" action="/jobs" {
            input name="queue" placeholder="queue" value=(query.queue);
            select name="state" {
                option value="" { "any state" }
                @for s in JobState::ALL {
                    option value=(s.as_str()) selected[filter.state == Some(s)] { (s.as_str()) }
                }
            }
            input name="unique_key" placeholder="unique key" value=(query.unique_key);
            (search::field(&query.payload))
            button type="submit" { "Filter" }
        }
        @if payload.is_some() {
            (search::summary(searched.scanned, found.jobs.len(), searched.budget_spent))
        }
        @if found.jobs.is_empty() {
            p.muted { "No live job matches." }
        } @else {
            table {
                thead { tr {
                    th { "id" } th { "queue" } th { "state" } th { "priority" } th { "attempts" }
                    th { "available at" } th { "unique key" }
                } }
                tbody {
                    @for job in &found.jobs {
                        tr {
                            td { a href=(format!("/jobs/{}", job.id)) { (job.id) } }
                            td { (job.queue.as_str()) }
                            td { (job.state(now).as_str()) }
                            td { (job.priority) }
                            td { (job.attempts) " / " (job.max_attempts) }
                            td { (job.available_at.to_rfc3339()) }
                            td { (job.unique_key.as_ref().map_or("-", |k| k.as_str())) }
                        }
                    }
                }
            }
            @if let Some(next) = found.next {
                p { a href=(format!("/jobs?{selected}&before={next}")) { "Older →" } }
            }
            // A bulk action selects by the filters it can send, not the
            // payload: none is offered beside a search.
            @if payload.is_none() && !state.options.read_only && state.offers(Capability::BulkActions) {
                form.bulk method="post" action="/jobs/bulk" {
                    input type="hidden" name="csrf" value=(state.csrf);
                    input type="hidden" name="queue" value=(query.queue);
                    input type="hidden" name="state" value=(query.state);
                    input type="hidden" name="unique_key" value=(query.unique_key);
                    span.muted { "Every job this filter selects, 1,000 at a time:" }
                    @if filter.state.is_none_or(|s| s == JobState::Scheduled) {
                        button type="submit" name="action" value="run_now" { "Run now" }
                    }
                    button type="submit" name="action" value="discard" { "Discard" }
                }
            }
        }
    };
    Ok(page(&state, "Jobs", body))
}
