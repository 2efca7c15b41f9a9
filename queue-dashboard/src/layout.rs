//! The page frame: navigation, the embedded style sheet, auto-refresh.

use maud::{DOCTYPE, Markup, PreEscaped, html};
use queue_core::Storage;

use crate::AppState;

/// The style sheet, embedded in every page.
const STYLE: &str = r#"
body { font-family: system-ui, sans-serif; margin: 0; color: #1d2330; background: #f6f7f9; }
header { background: #1d2330; color: #fff; padding: .6rem 1.2rem; display: flex; gap: 1.2rem; align-items: center; }
header a { color: #cfe0ff; text-decoration: none; }
header .brand { font-weight: 700; color: #fff; }
main { padding: 1rem 1.2rem; }
table { border-collapse: collapse; background: #fff; min-width: 40rem; }
th, td { padding: .35rem .7rem; border-bottom: 1px solid #e3e6ea; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #eef1f5; font-weight: 600; }
pre { background: #fff; border: 1px solid #e3e6ea; padding: .7rem; overflow: auto; max-width: 60rem; }
form.inline { display: inline; }
button { cursor: pointer; }
.muted { color: #6b7280; }
.error { color: #b42318; }
.paused { color: #b54708; font-weight: 600; }
dl { display: grid; grid-template-columns: max-content auto; gap: .3rem 1rem; }
dt { font-weight: 600; }
svg.chart { background: #f6f7f9; vertical-align: middle; }
svg.chart rect.done { fill: #2e7d32; }
svg.chart rect.dead { fill: #b42318; }
.bulk { margin: .8rem 0; display: flex; gap: .6rem; align-items: center; }
"#;

/// A full page titled `title` around `body`.
pub(crate) fn page<S: Storage>(state: &AppState<S>, title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                @if let Some(refresh) = state.options.refresh {
                    meta http-equiv="refresh" content=(refresh.as_secs().max(1));
                }
                title { (title) " · queue" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header {
                    a.brand href="/" { "queue" }
                    a href="/" { "Overview" }
                    a href="/jobs" { "Jobs" }
                    a href="/history" { "History" }
                    a href="/history?status=dead_letter" { "Dead letters" }
                    @if !state.options.read_only {
                        a href="/enqueue" { "Enqueue" }
                    } @else {
                        span.muted { "read-only" }
                    }
                }
                main {
                    h1 { (title) }
                    (body)
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
            head { meta charset="utf-8"; title { (title) } style { (PreEscaped(STYLE)) } }
            body { main { h1 { (title) } (body) } }
        }
    }
}

/// A POST button carrying the CSRF token; nothing in read-only mode.
pub(crate) fn action<S: Storage>(state: &AppState<S>, path: &str, label: &str) -> Markup {
    html! {
        @if !state.options.read_only {
            form.inline method="post" action=(path) {
                input type="hidden" name="csrf" value=(state.csrf);
                button type="submit" { (label) }
            }
        }
    }
}
