//! Time-series plots as inline SVG, no script: stacked bars or lines over
//! equal time bins, with the highest value and the two ends of the time
//! axis written on the chart. Colours come from the style sheet (classes
//! `s0`, `s1`, `s2` by series).

use chrono::{DateTime, Utc};
use maud::{Markup, html};

const WIDTH: u64 = 720;
const HEIGHT: u64 = 160;
/// Room for the labels: left of the plot, and under it.
const LEFT: u64 = 64;
const BOTTOM: u64 = 18;

/// One plot: `bins` equal bins from `start` to `end`.
pub(crate) struct Plot<'a> {
    pub(crate) title: &'a str,
    pub(crate) start: DateTime<Utc>,
    pub(crate) end: DateTime<Utc>,
    /// Each series' name, for the legend and the title of the SVG.
    pub(crate) series: &'a [&'a str],
    /// How a value reads on the axis (a count, a duration).
    pub(crate) unit: fn(u64) -> String,
}

impl Plot<'_> {
    /// Bars per bin, the series stacked bottom up: `values[bin][series]`.
    pub(crate) fn bars(&self, values: &[Vec<u64>]) -> Markup {
        let peak = values
            .iter()
            .map(|bin| bin.iter().sum::<u64>())
            .max()
            .unwrap_or(0);
        let step = (WIDTH - LEFT) as f64 / values.len().max(1) as f64;
        let mut rects = Vec::new();
        for (bin, stack) in values.iter().enumerate() {
            let mut base = 0;
            for (series, &value) in stack.iter().enumerate().filter(|(_, v)| **v > 0) {
                let (top, bottom) = (self.y(base + value, peak), self.y(base, peak));
                let x = LEFT as f64 + bin as f64 * step;
                rects.push((series, x, top, bottom - top));
                base += value;
            }
        }
        let width = format!("{:.1}", (step - 1.0).max(1.0));
        self.frame(
            peak,
            html! {
                @for (series, x, y, h) in rects {
                    rect class=(format!("s{series}")) x=(format!("{x:.1}")) y=(format!("{y:.1}"))
                        width=(width) height=(format!("{h:.1}")) {}
                }
            },
        )
    }

    /// A line per series over the bins it has a value in:
    /// `values[bin][series]`, `None` where nothing was measured.
    pub(crate) fn lines(&self, values: &[Vec<Option<u64>>]) -> Markup {
        let peak = values
            .iter()
            .flatten()
            .flatten()
            .copied()
            .max()
            .unwrap_or(0);
        let step = (WIDTH - LEFT) as f64 / values.len().max(1) as f64;
        let points = |series: usize| -> String {
            (values.iter().enumerate())
                .filter_map(|(bin, row)| row.get(series).copied().flatten().map(|v| (bin, v)))
                .map(|(bin, v)| {
                    let x = LEFT as f64 + (bin as f64 + 0.5) * step;
                    format!("{x:.1},{:.1}", self.y(v, peak))
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        self.frame(
            peak,
            html! {
                @for series in 0..self.series.len() {
                    polyline class=(format!("s{series}")) points=(points(series)) {}
                }
            },
        )
    }

    fn y(&self, value: u64, peak: u64) -> f64 {
        let plot = (HEIGHT - BOTTOM) as f64;
        plot - value as f64 / peak.max(1) as f64 * (plot - 4.0)
    }

    fn frame(&self, peak: u64, marks: Markup) -> Markup {
        let legend = self.series.join(", ");
        html! {
            figure.plot {
                figcaption {
                    (self.title)
                    @for (i, name) in self.series.iter().enumerate() {
                        " " span class=(format!("key s{i}")) { "■" } " " (name)
                    }
                }
                svg.plot width=(WIDTH) height=(HEIGHT) viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) role="img" {
                    title { (self.title) " (" (legend) "), highest " ((self.unit)(peak)) }
                    line.axis x1=(LEFT) y1=(HEIGHT - BOTTOM) x2=(WIDTH) y2=(HEIGHT - BOTTOM) {}
                    text.label x=(LEFT - 6) y="12" text-anchor="end" { ((self.unit)(peak)) }
                    text.label x=(LEFT - 6) y=(HEIGHT - BOTTOM) text-anchor="end" { "0" }
                    text.label x=(LEFT) y=(HEIGHT - 4) { (self.start.format("%H:%M UTC")) }
                    text.label x=(WIDTH) y=(HEIGHT - 4) text-anchor="end" { (self.end.format("%H:%M UTC")) }
                    (marks)
                }
            }
        }
    }
}

/// A count as the axis writes it.
pub(crate) fn count(n: u64) -> String {
    n.to_string()
}

/// Milliseconds as the axis writes them: ms under a second, then seconds,
/// then minutes.
pub(crate) fn millis(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{:.1} min", ms as f64 / 60_000.0),
    }
}
