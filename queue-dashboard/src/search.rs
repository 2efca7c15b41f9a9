//! The search field of the jobs and history pages: a value in the payload
//! (`payload.customer_id = 42`), searched by `queue_core::search_jobs` /
//! `search_history` over the page's other filters, at most
//! [`SCAN`] rows per page view.

use maud::{Markup, html};
use queue_core::{DEFAULT_SEARCH_SCAN, PayloadMatch};

use crate::error::Failure;

/// Rows one page view reads at most while searching.
pub(crate) const SCAN: u32 = DEFAULT_SEARCH_SCAN;

/// The page's payload match: none when the field is empty; a 400 naming
/// what is wrong when it does not parse.
pub(crate) fn payload_match(text: &str) -> Result<Option<PayloadMatch>, Failure> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    Ok(Some(text.parse()?))
}

/// The search field, filled with `text`.
pub(crate) fn field(text: &str) -> Markup {
    html! {
        input name="payload" size="32" placeholder="payload.customer_id = 42" value=(text);
    }
}

/// What a search read, under its results: how many rows, and whether it
/// stopped at its budget with more left (the page's "Older" link goes on
/// from there).
pub(crate) fn summary(scanned: u32, found: usize, budget_spent: bool) -> Markup {
    html! {
        p.muted.search {
            "Searched " (scanned) @if scanned == 1 { " row, " } @else { " rows, " } (found) " found."
            @if budget_spent {
                " Stopped after " (SCAN) " rows: older rows are searched from the next page."
            }
        }
    }
}
