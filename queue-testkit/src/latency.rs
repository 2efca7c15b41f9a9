//! Single-connection latency of each `Storage` operation, for the
//! backends' `op_latency` examples: each operation timed on its own, with
//! a human table and one `result key=value …` line per operation.

use std::future::Future;
use std::time::{Duration, Instant};

use queue_core::{
    Ack, DequeueRequest, HistoryFilter, NewJob, QueueName, Result, Retry, Storage, WorkerId,
};
use serde_json::json;

struct Timings(Vec<Duration>);

impl Timings {
    fn report(mut self, backend: &str, name: &str) {
        self.0.sort();
        let n = self.0.len();
        let at = |q: f64| self.0[((n as f64 * q) as usize).min(n - 1)].as_secs_f64() * 1e6;
        let mean = self.0.iter().sum::<Duration>().as_secs_f64() * 1e6 / n as f64;
        println!(
            "{name:<22} {n:>6} {:>9.0} {:>9.0} {mean:>9.0}",
            at(0.5),
            at(0.99)
        );
        println!(
            "result backend={backend} op={name} n={n} p50_us={:.0} p99_us={:.0} mean_us={mean:.0}",
            at(0.5),
            at(0.99)
        );
    }
}

async fn time<T, F: Future<Output = T>>(timings: &mut Timings, op: F) -> T {
    let started = Instant::now();
    let value = op.await;
    timings.0.push(started.elapsed());
    value
}

/// Times `n` of each operation (fewer for the batched and inspecting ones)
/// on an empty `storage`, and prints the figures labelled with `backend`.
///
/// # Errors
/// The first error an operation returns.
pub async fn measure<S: Storage>(storage: &S, backend: &str, n: usize) -> Result<()> {
    let queue = QueueName::new("latency")?;
    let request = DequeueRequest::new(
        vec![queue.clone()],
        1,
        Duration::from_secs(60),
        WorkerId::new("bench")?,
    )?;

    println!(
        "{:<22} {:>6} {:>9} {:>9} {:>9}",
        "operation", "n", "p50 µs", "p99 µs", "mean µs"
    );
    let mut t = Timings(Vec::new());
    for i in 0..n {
        time(
            &mut t,
            storage.enqueue(NewJob::new("latency", json!({ "i": i }))),
        )
        .await?;
    }
    t.report(backend, "enqueue");

    let mut t = Timings(Vec::new());
    for i in 0..n / 10 {
        let batch = (0..100)
            .map(|j| NewJob::new("batch", json!({ "i": i, "j": j })))
            .collect();
        time(&mut t, storage.enqueue_batch(batch)).await?;
    }
    t.report(backend, "enqueue_batch(100)");

    let mut t = Timings(Vec::new());
    let mut leases = Vec::with_capacity(n);
    for _ in 0..n {
        let jobs = time(&mut t, storage.dequeue(&request)).await?;
        leases.extend(jobs.iter().filter_map(|j| j.lease()));
    }
    t.report(backend, "dequeue(1)");

    let mut t = Timings(Vec::new());
    for lease in &leases {
        time(&mut t, storage.heartbeat(lease, Duration::from_secs(60))).await?;
    }
    t.report(backend, "heartbeat");

    let mut t = Timings(Vec::new());
    for chunk in leases.chunks(100) {
        time(
            &mut t,
            storage.heartbeat_batch(chunk, Duration::from_secs(60)),
        )
        .await?;
    }
    t.report(backend, "heartbeat_batch(100)");

    let (to_ack, to_nack) = leases.split_at(leases.len() / 2);
    let (one_by_one, batched) = to_ack.split_at(to_ack.len() / 2);
    let mut t = Timings(Vec::new());
    for lease in one_by_one {
        time(&mut t, storage.ack(lease, Some(json!("ok")))).await?;
    }
    t.report(backend, "ack");

    let mut t = Timings(Vec::new());
    for chunk in batched.chunks(50) {
        let acks: Vec<Ack> = chunk
            .iter()
            .map(|l| Ack {
                lease: l.clone(),
                result: None,
            })
            .collect();
        time(&mut t, storage.ack_batch(&acks)).await?;
    }
    t.report(backend, "ack_batch(50)");

    let mut t = Timings(Vec::new());
    for lease in to_nack {
        time(
            &mut t,
            storage.nack(
                lease,
                json!("failed"),
                Retry::After(Duration::from_secs(3600)),
            ),
        )
        .await?;
    }
    t.report(backend, "nack");

    let mut t = Timings(Vec::new());
    for _ in 0..(n / 10).max(1) {
        time(&mut t, storage.stats()).await?;
    }
    t.report(backend, "stats");

    let mut t = Timings(Vec::new());
    for _ in 0..(n / 10).max(1) {
        time(&mut t, storage.list_history(&HistoryFilter::default())).await?;
    }
    t.report(backend, "list_history(100)");

    let mut t = Timings(Vec::new());
    for _ in 0..(n / 10).max(1) {
        time(&mut t, storage.reclaim_stalled(100)).await?;
    }
    t.report(backend, "reclaim_stalled(100)");
    Ok(())
}
