//! The workers page: the storage's worker registry
//! ([`Capability::Workers`]), live and silent workers.

use std::sync::Arc;

use axum::extract::{Query, State};
use maud::{Markup, html};
use queue_core::time::MAX_DURATION;
use queue_core::{
    Capability, DEFAULT_FORGET_AFTER, DEFAULT_SILENT_AFTER, Storage, WorkerId, WorkerStatus,
};
use serde::Deserialize;

use crate::AppState;
use crate::error::Failure;
use crate::href::component;
use crate::layout::page;

/// The filter of the workers page: one worker, as a job's page links it.
#[derive(Debug, Deserialize)]
pub(crate) struct WorkersQuery {
    id: Option<String>,
}

/// Where a job's page links the worker holding it.
pub(crate) fn worker_href(id: &WorkerId) -> String {
    format!("/workers?id={}", component(id.as_str()))
}

/// Every registered worker (or the one `id` names), live ones first
/// marked as such: host, pid, version, queues with their concurrency,
/// start and last heartbeat. 501 on a storage without the registry. A
/// read-only dashboard forgets nobody: it lists with the longest
/// `forget_after`, so that reading the page deletes nothing.
pub(crate) async fn list<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    Query(query): Query<WorkersQuery>,
) -> Result<Markup, Failure> {
    state
        .storage
        .capabilities()
        .require(Capability::Workers, "list_workers")?;
    let only = match query.id.as_deref().filter(|id| !id.is_empty()) {
        Some(id) => Some(WorkerId::new(id)?),
        None => None,
    };
    let forget_after = if state.options.read_only {
        MAX_DURATION
    } else {
        DEFAULT_FORGET_AFTER
    };
    let mut workers = (state.storage)
        .list_workers(DEFAULT_SILENT_AFTER, forget_after)
        .await?;
    if let Some(id) = &only {
        workers.retain(|w| &w.info.id == id);
    }
    let body = html! {
        p.muted {
            "A worker registers as it starts and again at every heartbeat; one not heard from for "
            (DEFAULT_SILENT_AFTER.as_secs()) " s is silent"
            @if !state.options.read_only {
                ", and one silent for " (DEFAULT_FORGET_AFTER.as_secs() / 60) " min is forgotten"
            }
            ". A worker that shuts down cleanly deregisters."
        }
        @if workers.is_empty() {
            @if let Some(id) = &only {
                p { "Worker " code { (id.as_str()) } " is not registered: it shut down, or was silent too long." }
                p { a href="/workers" { "Every worker" } }
            } @else {
                p.muted { "No worker is registered." }
            }
        } @else {
            table {
                thead { tr {
                    th { "worker" } th { "status" } th { "host" } th { "pid" } th { "version" }
                    th { "queues (concurrency)" } th { "started at" } th { "last seen" }
                } }
                tbody {
                    @for w in &workers {
                        tr {
                            td { a href=(worker_href(&w.info.id)) { (w.info.id.as_str()) } }
                            td {
                                @if w.status == WorkerStatus::Live {
                                    (w.status.name())
                                } @else {
                                    span.paused { (w.status.name()) }
                                }
                            }
                            td { (w.info.host) }
                            td { (w.info.pid) }
                            td { (w.info.version) }
                            td {
                                @for (i, q) in w.info.queues.iter().enumerate() {
                                    @if i > 0 { ", " }
                                    (q.queue.as_str()) " (" (q.concurrency) ")"
                                }
                            }
                            td { (w.info.started_at.to_rfc3339()) }
                            td { (w.last_seen.to_rfc3339()) }
                        }
                    }
                }
            }
        }
    };
    Ok(page(&state, "Workers", body))
}
