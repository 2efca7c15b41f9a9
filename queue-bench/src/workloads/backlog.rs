//! `backlog`: the drain again with a large backlog already waiting, and its
//! ratio to the drain on an empty table.
//!
//! - `empty`: the baseline, no backlog.
//! - `other_queue`: the backlog is pending in another queue.
//! - `same_queue`: the backlog is pending in the measured queue itself, at
//!   a lower priority, so the measured jobs run first and the claim has to
//!   find them among the waiting rows (backlog jobs the worker reaches in
//!   the last moments are run too, but not counted).

use super::drain::{FILL_BATCH, drain_once};
use super::{QUEUE, fill};
use crate::BenchError;
use crate::args::BacklogArgs;
use crate::report::Report;
use crate::target::{Setup, Target};

/// The queue holding the backlog in the `other_queue` variant.
const OTHER_QUEUE: &str = "bench_backlog";

pub(crate) async fn run<T: Target>(
    args: &BacklogArgs,
    setup: &Setup,
    report: &mut Report,
) -> Result<(), BenchError> {
    let storage = T::fresh(setup).await?;
    fill(&storage, QUEUE, args.n, 0, FILL_BATCH, 2).await?;
    let empty = drain_once(&storage, setup, args.n, args.concurrency).await?;
    report.push(
        empty
            .row("backlog", args.n, args.concurrency)
            .param("variant", "empty")
            .param("backlog", 0)
            .figure("ratio", "1.00"),
    );

    for (variant, backlog_queue) in [("other_queue", OTHER_QUEUE), ("same_queue", QUEUE)] {
        let storage = T::fresh(setup).await?;
        fill(&storage, backlog_queue, args.backlog, -1, 5 * FILL_BATCH, 2).await?;
        fill(&storage, QUEUE, args.n, 0, FILL_BATCH, 2).await?;
        let drained = drain_once(&storage, setup, args.n, args.concurrency).await?;
        report.push(
            drained
                .row("backlog", args.n, args.concurrency)
                .param("variant", variant)
                .param("backlog", args.backlog)
                .figure(
                    "ratio",
                    format!("{:.2}", drained.jobs_per_s / empty.jobs_per_s),
                ),
        );
    }
    Ok(())
}
