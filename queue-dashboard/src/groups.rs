//! Group limits on the overview ([`Capability::GroupLimits`]): every
//! group's own limit with a button that lifts it, and a form that sets
//! one; the queue's group concurrency is set with its other limits.

use std::sync::Arc;

use axum::extract::{Form, State};
use axum::response::Redirect;
use maud::{Markup, html};
use queue_core::{Capability, GroupKey, GroupLimit, QueueName, Storage};
use serde::Deserialize;

use crate::AppState;
use crate::actions::{allowed, optional};
use crate::error::Failure;

/// Where the form posts.
pub(crate) const PATH: &str = "/queues/group-limit";

/// Every group's own limit (read-only mode lists them without buttons).
pub(crate) fn section<S: Storage>(state: &AppState<S>, limits: &[GroupLimit]) -> Markup {
    let writable = !state.options.read_only && state.offers(Capability::GroupLimits);
    html! {
        h2 { "Group limits" }
        p.muted {
            "The most jobs of one group (a job's group key) running at once, across every worker. "
            "A group's own limit replaces its queue's group concurrency."
        }
        @if limits.is_empty() {
            p { "No group has its own limit." }
        } @else {
            table {
                thead { tr { th { "queue" } th { "group" } th { "limit" } @if writable { th {} } } }
                tbody {
                    @for limit in limits {
                        tr {
                            td { (limit.queue.as_str()) }
                            td { (limit.group.as_str()) }
                            td { (limit.limit) }
                            @if writable {
                                td {
                                    form.inline method="post" action=(PATH) {
                                        input type="hidden" name="csrf" value=(state.csrf);
                                        input type="hidden" name="queue" value=(limit.queue.as_str());
                                        input type="hidden" name="group" value=(limit.group.as_str());
                                        button type="submit" { "Lift" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if writable {
            form method="post" action=(PATH) {
                input type="hidden" name="csrf" value=(state.csrf);
                label { "queue " input name="queue" required; } " "
                label { "group " input name="group" required; } " "
                label { "limit " input name="limit" size="6"; } " "
                button type="submit" { "Set group limit" }
            }
            p.muted { "An empty limit lifts the group's own limit. The queue must have limits or be paused first." }
        }
    }
}

/// The group limit form: an empty limit lifts the group's own limit.
#[derive(Debug, Deserialize)]
pub(crate) struct GroupLimitForm {
    #[serde(default)]
    csrf: String,
    queue: String,
    group: String,
    #[serde(default)]
    limit: String,
}

/// Gives one group of a queue its own limit, or lifts it.
pub(crate) async fn set<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    Form(form): Form<GroupLimitForm>,
) -> Result<Redirect, Failure> {
    allowed(&state, &form.csrf)?;
    let queue = QueueName::new(form.queue.trim())?;
    let group = GroupKey::new(form.group.as_str())?;
    let limit = optional::<u32>("limit", &form.limit)?;
    state.storage.set_group_limit(&queue, &group, limit).await?;
    Ok(Redirect::to("/"))
}
