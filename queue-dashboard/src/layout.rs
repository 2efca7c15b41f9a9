//! The page frame: navigation, the embedded style sheet, live updates.

use maud::{DOCTYPE, Markup, html};
use queue_core::{Capability, Storage};

use crate::AppState;

/// The style sheet, served at `/style.css` (the Content-Security-Policy
/// allows no inline style).
pub(crate) const STYLE: &str = include_str!("style.css");

/// Where pages link the style sheet from.
pub(crate) const STYLE_PATH: &str = "/style.css";

/// `GET /style.css`.
pub(crate) async fn style() -> impl axum::response::IntoResponse {
    (
        [(axum::http::header::CONTENT_TYPE, "text/css; charset=utf-8")],
        STYLE,
    )
}

/// A full page titled `title` around `body`, updated in place every
/// refresh period (see [`crate::live`]).
pub(crate) fn page<S: Storage>(state: &AppState<S>, title: &str, body: Markup) -> Markup {
    frame(state, title, body, crate::live::period(state))
}

/// A full page that stays as it is (a form being filled in).
pub(crate) fn still_page<S: Storage>(state: &AppState<S>, title: &str, body: Markup) -> Markup {
    frame(state, title, body, None)
}

fn frame<S: Storage>(
    state: &AppState<S>,
    title: &str,
    body: Markup,
    live: Option<std::time::Duration>,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { (title) " · queue" }
                link rel="stylesheet" href=(STYLE_PATH);
                @if let Some(every) = live {
                    script src=(crate::live::SCRIPT_PATH) defer {}
                    // Without scripts, the page reloads instead.
                    noscript { meta http-equiv="refresh" content=(every.as_secs()); }
                }
            }
            body {
                header {
                    a.brand href="/" { "queue" }
                    a href="/" { "Overview" }
                    @if state.offers(Capability::ListJobs) {
                        a href="/jobs" { "Jobs" }
                    }
                    a href="/history" { "History" }
                    a href="/history?status=dead_letter" { "Dead letters" }
                    @if state.offers(Capability::Workers) {
                        a href="/workers" { "Workers" }
                    }
                    @if state.offers(Capability::Throughput) || state.offers(Capability::Samples) {
                        a href=(crate::charts::PATH) { "Charts" }
                    }
                    @if !state.options.read_only {
                        a href="/enqueue" { "Enqueue" }
                    } @else {
                        span.muted { "read-only" }
                    }
                }
                @if let Some(every) = live {
                    main #live data-every=(every.as_secs()) {
                        h1 { (title) }
                        (body)
                    }
                } @else {
                    main {
                        h1 { (title) }
                        (body)
                    }
                }
            }
        }
    }
}

/// A minimal page without navigation (errors before access is granted).
pub(crate) fn bare(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { (title) } link rel="stylesheet" href=(STYLE_PATH); }
            body { main { h1 { (title) } (body) } }
        }
    }
}

/// A POST button carrying the CSRF token for an action of `capability`;
/// nothing in read-only mode or when the storage does not declare it.
pub(crate) fn action<S: Storage>(
    state: &AppState<S>,
    capability: Capability,
    path: &str,
    label: &str,
) -> Markup {
    html! {
        @if !state.options.read_only && state.offers(capability) {
            form.inline method="post" action=(path) {
                input type="hidden" name="csrf" value=(state.csrf);
                button type="submit" { (label) }
            }
        }
    }
}
