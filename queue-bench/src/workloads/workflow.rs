//! `workflow`: what dependencies cost. A fan-out/fan-in graph of `n` jobs
//! (one root, `n - 2` children depending on it, one join depending on
//! every child), enqueued in one `enqueue_batch` call, against `n`
//! independent jobs enqueued in batches of 1,000; both drained by one
//! worker at concurrency `c`, each on a fresh storage, `rounds` times in
//! turn. The figures are medians: the enqueue, the run (from the worker's
//! start to its shutdown after the last job, acks flushed), their sum, and
//! the graph's over the independent jobs'.
//!
//! Where the graph's extra time goes: `graph_fan_out_s`, from the root's
//! handler's return to the first child's start (the root's ack releasing
//! every child), and `graph_fan_in_s`, from the last child's start to the
//! join's.
//!
//! Checked in the run, not assumed: every job ran once and completed, no
//! child started before the root had run, and the join started only after
//! every child had.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use queue_core::{Capability, Dependency, NewJob};
use queue_worker::{JobContext, WorkerBuilder};
use serde_json::json;

use super::drain::FILL_BATCH;
use super::{Progress, QUEUE, fill, queue_options, time_limit, worker_options};
use crate::BenchError;
use crate::args::WorkflowArgs;
use crate::report::{Report, Row};
use crate::target::{Setup, Target};

pub(crate) async fn run<T: Target>(
    args: &WorkflowArgs,
    setup: &Setup,
    report: &mut Report,
) -> Result<(), BenchError> {
    if args.n < 3 {
        return Err("workflow: --n must be at least 3 (a root, a child, a join)".into());
    }
    let mut independent = Vec::new();
    let mut graph = Vec::new();
    for _ in 0..args.rounds.max(1) {
        independent.push(drain::<T>(args, setup, Shape::Independent).await?);
        graph.push(drain::<T>(args, setup, Shape::Graph).await?);
    }
    let independent = Timing::median(&independent);
    let graph = Timing::median(&graph);
    report.push(
        Row::new("workflow")
            .param("n", args.n)
            .param("c", args.concurrency)
            .param("rounds", args.rounds.max(1))
            .figure("independent_enqueue_s", secs(independent.enqueue))
            .figure("independent_run_s", secs(independent.run))
            .figure("graph_enqueue_s", secs(graph.enqueue))
            .figure("graph_run_s", secs(graph.run))
            .figure("graph_fan_out_s", secs(graph.fan_out))
            .figure("graph_fan_in_s", secs(graph.fan_in))
            .figure(
                "run_ratio",
                format!("{:.3}", graph.run / independent.run.max(1e-9)),
            )
            .figure(
                "total_ratio",
                format!("{:.3}", graph.total() / independent.total().max(1e-9)),
            ),
    );
    Ok(())
}

fn secs(seconds: f64) -> String {
    format!("{seconds:.3}")
}

/// The jobs of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Independent,
    Graph,
}

/// One run's seconds.
#[derive(Debug, Clone, Copy)]
struct Timing {
    enqueue: f64,
    run: f64,
    /// From the root's handler's return to the first child's start: its
    /// ack releasing the children (0 for independent jobs).
    fan_out: f64,
    /// From the last child's start to the join's.
    fan_in: f64,
}

impl Timing {
    fn total(&self) -> f64 {
        self.enqueue + self.run
    }

    /// The run of median total, with its own two parts.
    fn median(runs: &[Timing]) -> Timing {
        let mut sorted = runs.to_vec();
        sorted.sort_by(|a, b| a.total().total_cmp(&b.total()));
        sorted[sorted.len() / 2]
    }
}

/// What a handler sees of the graph's order, and when.
#[derive(Debug, Default)]
struct Order {
    /// When the root's handler returned, the first child and the join
    /// started, and the last child started.
    marks: std::sync::Mutex<Marks>,
    /// Children started so far.
    children: AtomicUsize,
    /// Children that started before the root had run.
    early_children: AtomicUsize,
    /// Whether the root has run (1) or not (0).
    root_done: AtomicUsize,
    /// Children started when the join started (set once).
    children_before_join: AtomicUsize,
}

/// The instants of [`Order::marks`].
#[derive(Debug, Default, Clone, Copy)]
struct Marks {
    root_done: Option<Instant>,
    first_child: Option<Instant>,
    last_child: Option<Instant>,
    join: Option<Instant>,
}

impl Order {
    fn mark(&self, set: impl FnOnce(&mut Marks)) {
        set(&mut self
            .marks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner));
    }
}

/// The graph: a root, children depending on it, a join depending on them.
fn graph(n: usize) -> Vec<NewJob> {
    let mut jobs = Vec::with_capacity(n);
    jobs.push(NewJob::new(QUEUE, json!({ "role": "root" })));
    for i in 1..n - 1 {
        jobs.push(
            NewJob::new(QUEUE, json!({ "role": "child", "i": i }))
                .depends_on(Dependency::InBatch(0)),
        );
    }
    jobs.push(
        NewJob::new(QUEUE, json!({ "role": "join" }))
            .depends_on_all((1..n - 1).map(Dependency::InBatch)),
    );
    jobs
}

/// Enqueues `shape`'s jobs on a fresh storage and drains them.
async fn drain<T: Target>(
    args: &WorkflowArgs,
    setup: &Setup,
    shape: Shape,
) -> Result<Timing, BenchError> {
    let n = args.n;
    let storage = T::fresh(setup).await?;
    if !storage.capabilities().supports(Capability::Dependencies) {
        return Err(format!("workflow: the {} storage has no dependencies", T::NAME).into());
    }
    let enqueue_start = Instant::now();
    match shape {
        Shape::Independent => fill(&storage, QUEUE, n, 0, FILL_BATCH, 1).await?,
        Shape::Graph => {
            storage.enqueue_batch(graph(n)).await?;
        }
    }
    let enqueue = enqueue_start.elapsed().as_secs_f64();
    let progress = Progress::new(n);
    let order = Arc::new(Order::default());
    let (seen, watched) = (progress.clone(), Arc::clone(&order));
    let run_start = Instant::now();
    let worker = WorkerBuilder::new(storage.clone())
        .options(worker_options(setup))
        .queue(
            QUEUE,
            queue_options(setup, args.concurrency),
            move |ctx: JobContext| {
                match ctx.job().payload["role"].as_str() {
                    Some("child") => {
                        if watched.root_done.load(Ordering::SeqCst) == 0 {
                            watched.early_children.fetch_add(1, Ordering::SeqCst);
                        }
                        watched.children.fetch_add(1, Ordering::SeqCst);
                        let now = Instant::now();
                        watched.mark(|m| {
                            m.first_child.get_or_insert(now);
                            m.last_child = Some(now);
                        });
                    }
                    Some("join") => {
                        let children = watched.children.load(Ordering::SeqCst);
                        watched
                            .children_before_join
                            .store(children, Ordering::SeqCst);
                        watched.mark(|m| m.join = Some(Instant::now()));
                    }
                    _ => {}
                }
                seen.started(ctx.job().id);
                let (watched, root) = (
                    Arc::clone(&watched),
                    ctx.job().payload["role"] == json!("root"),
                );
                async move {
                    if root {
                        // Before its ack: a child started before this is early.
                        watched.root_done.store(1, Ordering::SeqCst);
                        watched.mark(|m| m.root_done = Some(Instant::now()));
                    }
                    Ok(None)
                }
            },
        )?
        .start()?;
    let started = progress.all_started(time_limit(n, 100)).await;
    let report = worker.shutdown(Duration::from_secs(30)).await;
    let run = run_start.elapsed().as_secs_f64();
    started?;
    if report.cancelled > 0 {
        return Err(format!("{} runs were still going at shutdown", report.cancelled).into());
    }
    let completed = storage.count_completed(QUEUE).await?;
    let live = storage.count_live(QUEUE).await?;
    if completed != n as i64 || live != 0 || progress.runs() != n {
        return Err(format!(
            "workflow ({shape:?}) of {n} jobs did not verify: {completed} completed, {live} left, \
             {} runs",
            progress.runs()
        )
        .into());
    }
    if shape == Shape::Graph {
        let early = order.early_children.load(Ordering::SeqCst);
        let before_join = order.children_before_join.load(Ordering::SeqCst);
        if early > 0 || before_join != n - 2 {
            return Err(format!(
                "workflow order broken: {early} children started before the root ran, the join \
                 started after {before_join} of {} children",
                n - 2
            )
            .into());
        }
    }
    let marks = *order
        .marks
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let between = |from: Option<Instant>, to: Option<Instant>| match (from, to) {
        (Some(from), Some(to)) => to.saturating_duration_since(from).as_secs_f64(),
        _ => 0.0,
    };
    Ok(Timing {
        enqueue,
        run,
        fan_out: between(marks.root_done, marks.first_child),
        fan_in: between(marks.last_child, marks.join),
    })
}
