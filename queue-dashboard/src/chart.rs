//! The overview's throughput chart: an inline SVG, no script.

use chrono::{DateTime, Duration as TimeDelta, Utc};
use maud::{Markup, html};
use queue_core::Throughput;

/// Minutes the chart covers, one bar each.
pub(crate) const MINUTES: i64 = 60;
const BAR: i64 = 3;
const HEIGHT: i64 = 28;

/// Stacked bars per minute of the hour ending at `now`'s minute: completed
/// (green) under dead-lettered (red), scaled to the busiest minute.
pub(crate) fn throughput(points: &[&Throughput], now: DateTime<Utc>) -> Markup {
    let last = queue_core::minute_of(now);
    let first = last - TimeDelta::minutes(MINUTES - 1);
    let mut bars = vec![(0u64, 0u64); MINUTES as usize];
    for point in points {
        let offset = (point.minute - first).num_minutes();
        if (0..MINUTES).contains(&offset) {
            let bar = &mut bars[offset as usize];
            bar.0 += point.completed;
            bar.1 += point.failed;
        }
    }
    let peak = bars.iter().map(|(c, f)| c + f).max().unwrap_or(0).max(1);
    let (completed, failed) = bars
        .iter()
        .fold((0, 0), |(c, f), bar| (c + bar.0, f + bar.1));
    let scale = |n: u64| (n * HEIGHT as u64).div_ceil(peak) as i64;
    html! {
        svg.chart width=(MINUTES * BAR) height=(HEIGHT) viewBox=(format!("0 0 {} {HEIGHT}", MINUTES * BAR))
            role="img" {
            title { "last hour: " (completed) " completed, " (failed) " dead-lettered; busiest minute " (peak) }
            @for (i, (done, dead)) in bars.iter().enumerate() {
                @let x = i as i64 * BAR;
                @let done_h = scale(*done);
                @let dead_h = scale(*dead);
                @if done_h > 0 {
                    rect.done x=(x) y=(HEIGHT - done_h) width=(BAR - 1) height=(done_h) {}
                }
                @if dead_h > 0 {
                    rect.dead x=(x) y=(HEIGHT - done_h - dead_h) width=(BAR - 1) height=(dead_h) {}
                }
            }
        }
    }
}
