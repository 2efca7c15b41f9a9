//! Groups' own settings on the overview: every group's own limit
//! ([`Capability::GroupLimits`]) and weight ([`Capability::GroupWeights`]),
//! each with a button that lifts it, and a form that sets one; the
//! queue's group concurrency and fair groups are set with its other
//! limits.

use std::sync::Arc;

use axum::extract::{Form, State};
use axum::response::Redirect;
use maud::{Markup, html};
use queue_core::{Capability, GroupKey, QueueName, Storage};
use serde::Deserialize;

use crate::AppState;
use crate::actions::{allowed, optional};
use crate::error::Failure;

/// One kind of group setting, as the overview shows and sets it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Setting {
    /// [`Storage::set_group_limit`].
    Limit,
    /// [`Storage::set_group_weight`].
    Weight,
}

impl Setting {
    /// Where its form posts.
    pub(crate) const fn path(self) -> &'static str {
        match self {
            Setting::Limit => "/queues/group-limit",
            Setting::Weight => "/queues/group-weight",
        }
    }

    /// The capability that offers it.
    pub(crate) const fn capability(self) -> Capability {
        match self {
            Setting::Limit => Capability::GroupLimits,
            Setting::Weight => Capability::GroupWeights,
        }
    }

    /// Its field, column and error name.
    const fn field(self) -> &'static str {
        match self {
            Setting::Limit => "limit",
            Setting::Weight => "weight",
        }
    }

    const fn title(self) -> &'static str {
        match self {
            Setting::Limit => "Group limits",
            Setting::Weight => "Group weights",
        }
    }

    const fn blurb(self) -> &'static str {
        match self {
            Setting::Limit => {
                "The most jobs of one group (a job's group key) running at once, across every \
                 worker. A group's own limit replaces its queue's group concurrency."
            }
            Setting::Weight => {
                "In a queue with fair groups, how many jobs a group takes each time its turn \
                 comes (1 without a weight of its own)."
            }
        }
    }
}

/// Every group's own `setting` (`rows`: queue, group, value); read-only
/// mode lists them without buttons.
pub(crate) fn section<S: Storage>(
    state: &AppState<S>,
    setting: Setting,
    rows: &[(QueueName, GroupKey, u32)],
) -> Markup {
    let writable = !state.options.read_only && state.offers(setting.capability());
    let field = setting.field();
    html! {
        h2 { (setting.title()) }
        p.muted { (setting.blurb()) }
        @if rows.is_empty() {
            p { "No group has its own " (field) "." }
        } @else {
            table {
                thead { tr { th { "queue" } th { "group" } th { (field) } @if writable { th {} } } }
                tbody {
                    @for (queue, group, value) in rows {
                        tr {
                            td { (queue.as_str()) }
                            td { (group.as_str()) }
                            td { (value) }
                            @if writable {
                                td {
                                    form.inline method="post" action=(setting.path()) {
                                        input type="hidden" name="csrf" value=(state.csrf);
                                        input type="hidden" name="queue" value=(queue.as_str());
                                        input type="hidden" name="group" value=(group.as_str());
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
            form method="post" action=(setting.path()) {
                input type="hidden" name="csrf" value=(state.csrf);
                label { "queue " input name="queue" required; } " "
                label { "group " input name="group" required; } " "
                label { (field) " " input name=(field) size="6"; } " "
                button type="submit" { "Set group " (field) }
            }
            p.muted {
                "An empty " (field) " lifts the group's own " (field)
                ". The queue must have limits or be paused first."
            }
        }
    }
}

/// A group setting's form: an empty value lifts the group's own.
#[derive(Debug, Deserialize)]
pub(crate) struct GroupSettingForm {
    #[serde(default)]
    csrf: String,
    queue: String,
    group: String,
    #[serde(default)]
    limit: String,
    #[serde(default)]
    weight: String,
}

/// Gives one group of a queue its own limit, or lifts it.
pub(crate) async fn set_limit<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    Form(form): Form<GroupSettingForm>,
) -> Result<Redirect, Failure> {
    allowed(&state, &form.csrf)?;
    let queue = QueueName::new(form.queue.trim())?;
    let group = GroupKey::new(form.group.as_str())?;
    let limit = optional::<u32>("limit", &form.limit)?;
    state.storage.set_group_limit(&queue, &group, limit).await?;
    Ok(Redirect::to("/"))
}

/// Gives one group of a queue its own weight, or lifts it.
pub(crate) async fn set_weight<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    Form(form): Form<GroupSettingForm>,
) -> Result<Redirect, Failure> {
    allowed(&state, &form.csrf)?;
    let queue = QueueName::new(form.queue.trim())?;
    let group = GroupKey::new(form.group.as_str())?;
    let weight = optional::<u32>("weight", &form.weight)?;
    state
        .storage
        .set_group_weight(&queue, &group, weight)
        .await?;
    Ok(Redirect::to("/"))
}
