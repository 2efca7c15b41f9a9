//! `inspect`: what operators wait for at size. With `--live` jobs (over
//! four queues, placed as a real queue has them: see [`placement`]) and
//! `--history` finished jobs, the time of `stats`, the dashboard
//! overview's reads, every listing (each state, with and without a queue,
//! by unique key and by id, history by queue and by status; first and
//! later pages) and every dashboard page, each against its target: a
//! listing within 25 ms at p99, a page within 250 ms. The tables are
//! settled first ([`Target::settle`]: `VACUUM ANALYZE` on PostgreSQL, as
//! autovacuum would), so the reads are timed as a running server serves
//! them.

mod pages;
mod placement;

use std::future::Future;
use std::time::{Duration, Instant};

use queue_core::{Capability, FinalStatus, HistoryFilter, JobFilter, JobId, JobState, QueueName};

use crate::BenchError;
use crate::args::InspectArgs;
use crate::report::{Report, Row};
use crate::stats::Spread;
use crate::target::{Setup, Target};
use placement::{DONE, Placed, QUEUES};

/// A listing's target at p99.
const LISTING_MS: f64 = 25.0;
/// A page's target at p99.
const PAGE_MS: f64 = 250.0;
/// Rows per listing page, as the dashboard asks.
const PAGE: u32 = 50;

/// One timed read: what it is, its spread, its size (a listing's rows, a
/// page's bytes), its target.
struct Timed {
    read: String,
    spread: Spread,
    rows: usize,
    target_ms: Option<f64>,
}

pub(crate) async fn run<T: Target>(
    args: &InspectArgs,
    setup: &Setup,
    report: &mut Report,
) -> Result<(), BenchError> {
    let storage = T::fresh(setup).await?;
    let filled = Instant::now();
    let placed = placement::place(&storage, args).await?;
    let fill_s = filled.elapsed().as_secs_f64();
    // As autovacuum would have by the time an operator looks.
    storage.settle().await?;

    let n = args.rounds.max(1);
    let mut timed = vec![
        Timed::of("stats", None, n, || async {
            Ok(storage.stats().await?.len())
        })
        .await?,
        Timed::of("overview", None, n, || async {
            let stats = storage.stats().await?;
            storage.now().await?;
            storage.throughput(Duration::from_secs(24 * 3600)).await?;
            Ok(stats.len())
        })
        .await?,
        Timed::of("throughput(1h)", Some(LISTING_MS), n, || async {
            Ok(storage.throughput(Duration::from_secs(3600)).await?.len())
        })
        .await?,
    ];
    if storage.capabilities().supports(Capability::Samples) {
        // A day of every live queue's minutes: what the charts page reads.
        timed.push(
            Timed::of("samples(1d)", None, n, || async {
                Ok(storage.samples(Duration::from_secs(24 * 3600)).await?.len())
            })
            .await?,
        );
    }
    for (read, filter) in job_listings(&placed)? {
        timed.extend(list(&storage, read, filter, n).await?);
    }
    for (read, filter) in history_listings()? {
        timed.extend(list(&storage, read, filter, n).await?);
    }
    timed.extend(pages::time(&storage, &placed, n).await?);
    for t in timed {
        let mut row = Row::new("inspect")
            .param("read", &t.read)
            .param("live", args.live)
            .param("history", args.history)
            .figure("n", n)
            .figure("size", t.rows)
            .ms("p50_ms", t.spread.p50)
            .ms("p99_ms", t.spread.p99)
            .ms("max_ms", t.spread.max);
        if let Some(target) = t.target_ms {
            let p99 = t.spread.p99;
            row = row
                .figure("target_ms", target)
                .figure("within", if p99 <= target { "yes" } else { "NO" });
        }
        report.push(row.figure("fill_s", format!("{fill_s:.1}")));
    }
    Ok(())
}

/// Every live listing the dashboard and the CLI make: all jobs, one
/// queue, each state over every queue and in one queue, a unique key, an
/// id.
fn job_listings(placed: &Placed) -> Result<Vec<(String, JobFilter)>, BenchError> {
    let queue = QueueName::new(QUEUES[0])?;
    let page = |queue: Option<&QueueName>, state: Option<JobState>| JobFilter {
        queue: queue.cloned(),
        state,
        limit: PAGE,
        ..JobFilter::default()
    };
    let mut listings = vec![
        ("list_jobs".to_owned(), page(None, None)),
        ("list_jobs(queue)".to_owned(), page(Some(&queue), None)),
    ];
    for state in JobState::ALL {
        let name = state.as_str();
        listings.push((format!("list_jobs(state={name})"), page(None, Some(state))));
        listings.push((
            format!("list_jobs(queue,state={name})"),
            page(Some(&queue), Some(state)),
        ));
    }
    listings.push((
        "list_jobs(queue of retries,state=scheduled)".to_owned(),
        page(
            Some(&QueueName::new(placement::RETRIES_ONLY)?),
            Some(JobState::Scheduled),
        ),
    ));
    listings.push((
        "list_jobs(deep page)".to_owned(),
        JobFilter {
            before: Some(placed.middle),
            ..page(None, None)
        },
    ));
    listings.push((
        "list_jobs(unique_key)".to_owned(),
        JobFilter {
            unique_key: Some(queue_core::UniqueKey::new(placed.unique_key.clone())?),
            ..page(None, None)
        },
    ));
    listings.push((
        "list_jobs(id)".to_owned(),
        JobFilter {
            id: Some(placed.running),
            ..page(None, None)
        },
    ));
    Ok(listings)
}

/// Every history listing: all, one queue, each final status.
fn history_listings() -> Result<Vec<(String, HistoryFilter)>, BenchError> {
    let page = |queue: Option<QueueName>, status: Option<FinalStatus>| HistoryFilter {
        queue,
        status,
        limit: PAGE,
        ..HistoryFilter::default()
    };
    Ok(vec![
        ("list_history".to_owned(), page(None, None)),
        (
            "list_history(queue)".to_owned(),
            page(Some(QueueName::new(DONE)?), None),
        ),
        (
            "list_history(completed)".to_owned(),
            page(None, Some(FinalStatus::Completed)),
        ),
        (
            "list_dead_letters".to_owned(),
            page(None, Some(FinalStatus::DeadLetter)),
        ),
        (
            "list_history(queue,dead_letter)".to_owned(),
            page(Some(QueueName::new(DONE)?), Some(FinalStatus::DeadLetter)),
        ),
    ])
}

/// A listing's filter: its page of a storage, and the filter of the page
/// after one.
trait Paged: Sized {
    /// The rows of this filter's page and the `next` it answers.
    async fn page<T: Target>(&self, storage: &T) -> Result<(usize, Option<JobId>), BenchError>;
    /// This filter below `next`: the following page.
    fn after(self, next: JobId) -> Self;
}

impl Paged for JobFilter {
    async fn page<T: Target>(&self, storage: &T) -> Result<(usize, Option<JobId>), BenchError> {
        let page = storage.list_jobs(self).await?;
        Ok((page.jobs.len(), page.next))
    }

    fn after(self, next: JobId) -> Self {
        Self {
            before: Some(next),
            ..self
        }
    }
}

impl Paged for HistoryFilter {
    async fn page<T: Target>(&self, storage: &T) -> Result<(usize, Option<JobId>), BenchError> {
        let page = storage.list_history(self).await?;
        Ok((page.records.len(), page.next))
    }

    fn after(self, next: JobId) -> Self {
        Self {
            before: Some(next),
            ..self
        }
    }
}

/// `filter`'s first page and, when there is one, its second.
async fn list<T: Target, F: Paged>(
    storage: &T,
    read: String,
    filter: F,
    n: usize,
) -> Result<Vec<Timed>, BenchError> {
    let (_, next) = filter.page(storage).await?;
    let first = Timed::of(&read, Some(LISTING_MS), n, || async {
        Ok(filter.page(storage).await?.0)
    })
    .await?;
    let mut out = vec![first];
    if let Some(next) = next {
        let later = filter.after(next);
        out.push(
            Timed::of(&format!("{read} page 2"), Some(LISTING_MS), n, || async {
                Ok(later.page(storage).await?.0)
            })
            .await?,
        );
    }
    Ok(out)
}

impl Timed {
    /// `n` calls of `read`, one at a time; `read` returns the rows it saw.
    async fn of<F, Fut>(
        name: &str,
        target_ms: Option<f64>,
        n: usize,
        mut read: F,
    ) -> Result<Self, BenchError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<usize, BenchError>>,
    {
        let mut samples = Vec::with_capacity(n);
        let mut rows = 0;
        for _ in 0..n {
            let started = Instant::now();
            rows = read().await?;
            samples.push(started.elapsed());
        }
        Ok(Self {
            read: name.to_owned(),
            spread: Spread::of(&samples).ok_or("no sample")?,
            rows,
            target_ms,
        })
    }
}
