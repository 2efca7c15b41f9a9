//! `ops`: the latency of each `Storage` operation on its own, one call at a
//! time on an otherwise idle storage (no worker): where a round trip goes.

use std::future::Future;
use std::time::{Duration, Instant};

use queue_core::{Ack, DequeueRequest, HistoryFilter, NewJob, QueueName, Retry, WorkerId};
use serde_json::json;

use super::QUEUE;
use crate::BenchError;
use crate::args::OpsArgs;
use crate::report::{Report, Row};
use crate::stats::Spread;
use crate::target::{Setup, Target};

/// The samples of one operation.
struct Timings {
    name: &'static str,
    samples: Vec<Duration>,
}

impl Timings {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            samples: Vec::new(),
        }
    }

    async fn time<T, F: Future<Output = T>>(&mut self, op: F) -> T {
        let started = Instant::now();
        let value = op.await;
        self.samples.push(started.elapsed());
        value
    }

    fn report(self, report: &mut Report) -> Result<(), BenchError> {
        let spread = Spread::of(&self.samples).ok_or("no sample")?;
        report.push(
            Row::new("ops")
                .param("op", self.name)
                .figure("n", self.samples.len())
                .ms("p50_ms", spread.p50)
                .ms("p99_ms", spread.p99)
                .ms("max_ms", spread.max),
        );
        Ok(())
    }
}

pub(crate) async fn run<T: Target>(
    args: &OpsArgs,
    setup: &Setup,
    report: &mut Report,
) -> Result<(), BenchError> {
    let storage = T::fresh(setup).await?;
    let n = args.n.max(10);
    let request = DequeueRequest::new(
        vec![QueueName::new(QUEUE)?],
        1,
        Duration::from_secs(60),
        WorkerId::new("bench")?,
    )?;

    let mut t = Timings::new("enqueue");
    for i in 0..n {
        t.time(storage.enqueue(NewJob::new(QUEUE, json!({ "i": i }))))
            .await?;
    }
    t.report(report)?;

    let mut t = Timings::new("enqueue_batch(100)");
    for i in 0..n / 10 {
        let batch = (0..100)
            .map(|j| NewJob::new("bench_batch", json!({ "i": i, "j": j })))
            .collect();
        t.time(storage.enqueue_batch(batch)).await?;
    }
    t.report(report)?;

    let mut t = Timings::new("dequeue(1)");
    let mut leases = Vec::with_capacity(n);
    for _ in 0..n {
        let jobs = t.time(storage.dequeue(&request)).await?;
        leases.extend(jobs.iter().filter_map(|j| j.lease()));
    }
    t.report(report)?;

    let mut t = Timings::new("heartbeat");
    for lease in &leases {
        t.time(storage.heartbeat(lease, Duration::from_secs(60)))
            .await?;
    }
    t.report(report)?;

    let mut t = Timings::new("heartbeat_batch(100)");
    for chunk in leases.chunks(100) {
        t.time(storage.heartbeat_batch(chunk, Duration::from_secs(60)))
            .await?;
    }
    t.report(report)?;

    let (to_ack, to_nack) = leases.split_at(leases.len() / 2);
    let (one_by_one, batched) = to_ack.split_at(to_ack.len() / 2);
    let mut t = Timings::new("ack");
    for lease in one_by_one {
        t.time(storage.ack(lease, Some(json!("ok")))).await?;
    }
    t.report(report)?;

    let mut t = Timings::new("ack_batch(50)");
    for chunk in batched.chunks(50) {
        let acks: Vec<Ack> = chunk
            .iter()
            .map(|l| Ack {
                lease: l.clone(),
                result: None,
            })
            .collect();
        t.time(storage.ack_batch(&acks)).await?;
    }
    t.report(report)?;

    let mut t = Timings::new("nack");
    let later = Retry::After(Duration::from_secs(3600));
    for lease in to_nack {
        t.time(storage.nack(lease, json!("failed"), later)).await?;
    }
    t.report(report)?;

    let rounds = (n / 10).max(1);
    let mut t = Timings::new("stats");
    for _ in 0..rounds {
        t.time(storage.stats()).await?;
    }
    t.report(report)?;

    let mut t = Timings::new("list_history(100)");
    for _ in 0..rounds {
        t.time(storage.list_history(&HistoryFilter::default()))
            .await?;
    }
    t.report(report)?;

    let mut t = Timings::new("reclaim_stalled(100)");
    for _ in 0..rounds {
        t.time(storage.reclaim_stalled(100)).await?;
    }
    t.report(report)
}
