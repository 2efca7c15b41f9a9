//! The charts page: for every queue together or one of them, over the last
//! hour (a bin a minute) or day (a bin every 15 minutes), the jobs that
//! finished ([`Capability::Throughput`]), their start lag at p50 and p99
//! and the queue's depth ([`Capability::Samples`], what the workers
//! recorded).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use chrono::{DateTime, TimeDelta, Utc};
use maud::{Markup, html};
use queue_core::{
    Capability, Depth, LagHistogram, QueueError, QueueName, QueueSample, Storage, Throughput,
    minute_of,
};
use serde::Deserialize;

use crate::AppState;
use crate::error::Failure;
use crate::href::component;
use crate::layout::page;
use crate::plot::{Plot, count, millis};

/// Where the page is served.
pub(crate) const PATH: &str = "/charts";

/// The page's choices: one queue (all when absent), and `hour` or `day`.
#[derive(Debug, Deserialize)]
pub(crate) struct ChartsQuery {
    queue: Option<String>,
    window: Option<String>,
}

/// The span the charts cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Span {
    Hour,
    Day,
}

impl Span {
    fn parse(raw: Option<&str>) -> Result<Self, QueueError> {
        match raw.filter(|w| !w.is_empty()) {
            None | Some("hour") => Ok(Span::Hour),
            Some("day") => Ok(Span::Day),
            Some(other) => Err(QueueError::invalid(
                "window",
                format!("is {other:?}; it must be hour or day"),
            )),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Span::Hour => "hour",
            Span::Day => "day",
        }
    }

    fn bin_minutes(self) -> i64 {
        match self {
            Span::Hour => 1,
            Span::Day => 15,
        }
    }

    fn bins(self) -> usize {
        match self {
            Span::Hour => 60,
            Span::Day => 96,
        }
    }

    fn duration(self) -> Duration {
        Duration::from_secs(self.bin_minutes() as u64 * 60 * self.bins() as u64)
    }
}

/// What the bins hold, for one queue or all.
struct Bins {
    start: DateTime<Utc>,
    span: Span,
    finished: Vec<Vec<u64>>,
    lag: Vec<LagHistogram>,
    /// Each queue's latest depth in each bin (by minute), summed per bin.
    depth: Vec<BTreeMap<QueueName, (DateTime<Utc>, Depth)>>,
}

impl Bins {
    fn new(span: Span, start: DateTime<Utc>) -> Self {
        Self {
            start,
            span,
            finished: vec![vec![0, 0]; span.bins()],
            lag: vec![LagHistogram::new(); span.bins()],
            depth: vec![BTreeMap::new(); span.bins()],
        }
    }

    fn bin(&self, minute: DateTime<Utc>) -> Option<usize> {
        let offset = (minute - self.start).num_minutes() / self.span.bin_minutes();
        usize::try_from(offset)
            .ok()
            .filter(|&b| b < self.span.bins())
    }

    fn add_throughput(&mut self, point: &Throughput) {
        if let Some(bin) = self.bin(point.minute) {
            self.finished[bin][0] += point.completed;
            self.finished[bin][1] += point.failed;
        }
    }

    fn add_sample(&mut self, sample: &QueueSample) {
        let Some(bin) = self.bin(sample.minute) else {
            return;
        };
        self.lag[bin].merge(&sample.lag);
        if let Some(depth) = sample.depth {
            let held = self.depth[bin]
                .entry(sample.queue.clone())
                .or_insert((sample.minute, depth));
            if sample.minute >= held.0 {
                *held = (sample.minute, depth);
            }
        }
    }

    fn lag_lines(&self) -> Vec<Vec<Option<u64>>> {
        let ms = |d: Option<Duration>| d.map(|d| d.as_millis() as u64);
        (self.lag.iter())
            .map(|lag| vec![ms(lag.quantile(0.5)), ms(lag.quantile(0.99))])
            .collect()
    }

    fn depth_lines(&self) -> Vec<Vec<Option<u64>>> {
        (self.depth.iter())
            .map(|queues| {
                if queues.is_empty() {
                    return vec![None, None, None];
                }
                let sum = |f: fn(&Depth) -> u64| Some(queues.values().map(|(_, d)| f(d)).sum());
                vec![sum(|d| d.pending), sum(|d| d.scheduled), sum(|d| d.running)]
            })
            .collect()
    }
}

/// `GET /charts`: 501 on a storage with neither throughput nor samples.
pub(crate) async fn charts<S: Storage>(
    State(state): State<Arc<AppState<S>>>,
    Query(query): Query<ChartsQuery>,
) -> Result<Markup, Failure> {
    let (with_throughput, with_samples) = (
        state.offers(Capability::Throughput),
        state.offers(Capability::Samples),
    );
    if !with_throughput && !with_samples {
        return Err(QueueError::not_supported(Capability::Samples, "samples").into());
    }
    let span = Span::parse(query.window.as_deref())?;
    let only = match query.queue.as_deref().filter(|q| !q.is_empty()) {
        Some(name) => Some(QueueName::new(name)?),
        None => None,
    };
    let now = state.storage.now().await?;
    let end = minute_of(now) + TimeDelta::minutes(1);
    let start = end - TimeDelta::from_std(span.duration()).unwrap_or(TimeDelta::days(1));
    let throughput = if with_throughput {
        state.storage.throughput(span.duration()).await?
    } else {
        Vec::new()
    };
    let samples = if with_samples {
        state.storage.samples(span.duration()).await?
    } else {
        Vec::new()
    };
    let queues: BTreeSet<&QueueName> = (throughput.iter().map(|t| &t.queue))
        .chain(samples.iter().map(|s| &s.queue))
        .collect();
    let wanted = |queue: &QueueName| only.as_ref().is_none_or(|q| q == queue);
    let mut bins = Bins::new(span, start);
    throughput
        .iter()
        .filter(|t| wanted(&t.queue))
        .for_each(|t| bins.add_throughput(t));
    samples
        .iter()
        .filter(|s| wanted(&s.queue))
        .for_each(|s| bins.add_sample(s));

    let per = if span == Span::Hour {
        "per minute"
    } else {
        "per 15 minutes"
    };
    let plot = |title, series, unit| Plot {
        title,
        start,
        end,
        series,
        unit,
    };
    let finished_title = format!("Jobs finished {per}");
    let lag_title = format!("Start lag {per}");
    let depth_title = "Depth (the last measure of each bin)".to_owned();
    let link = |queue: Option<&QueueName>, window: Span| {
        let mut href = format!("{PATH}?window={}", window.name());
        if let Some(queue) = queue {
            href.push_str(&format!("&queue={}", component(queue.as_str())));
        }
        href
    };
    let title = match &only {
        Some(queue) => format!("Charts: {queue}"),
        None => "Charts: every queue".to_owned(),
    };
    let body = html! {
        p.picker {
            "Over the last "
            @for window in [Span::Hour, Span::Day] {
                @if window == span { strong { (window.name()) } } @else { a href=(link(only.as_ref(), window)) { (window.name()) } }
                " "
            }
            "· "
            @if only.is_none() { strong { "every queue" } } @else { a href=(link(None, span)) { "every queue" } }
            @for queue in &queues {
                " "
                @if only.as_ref() == Some(*queue) { strong { (queue) } } @else { a href=(link(Some(queue), span)) { (queue) } }
            }
        }
        @if with_throughput {
            (plot(&finished_title, &["completed", "dead-lettered"], count).bars(&bins.finished))
        } @else {
            p.muted { "This storage does not count throughput." }
        }
        @if with_samples {
            (plot(&lag_title, &["p50", "p99"], millis).lines(&bins.lag_lines()))
            (plot(&depth_title, &["pending", "scheduled", "running"], count).lines(&bins.depth_lines()))
            p.muted {
                "Start lags and depths are what running workers record (every 15 s by default; depths once a minute): "
                "without workers, or before their first round, these charts stay empty."
            }
        } @else {
            p.muted { "This storage does not keep start lags and depths." }
        }
    };
    Ok(page(&state, &title, body))
}
