//! Concurrency: many dequeuers, one key raced by many enqueuers.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use queue_core::{FinalStatus, JobId, NewJob, Storage};
use serde_json::json;

use super::{Ctx, lease_of, request};

const JOBS: usize = 2_000;
const DEQUEUERS: usize = 8;

/// 8 dequeuers drain 2,000 jobs, acking each: every job completes exactly
/// once, none stays live, and no claim ever returns a job another holder
/// still leases.
pub async fn concurrent_dequeuers_complete_every_job_exactly_once<S: Storage>(ctx: Ctx<S>) {
    ctx.fill("q", JOBS).await;
    let completed = race(&ctx, 10, 0).await;
    let total = completed.len();
    assert_eq!(total, JOBS);
    assert_eq!(ctx.live_count().await, 0);
    let mut filter = queue_core::HistoryFilter {
        limit: queue_core::MAX_PAGE_SIZE,
        ..Default::default()
    };
    let mut archived = HashSet::new();
    loop {
        let page = ctx.history_page(&filter).await;
        for record in &page.records {
            assert_eq!(record.status, FinalStatus::Completed);
            assert_eq!(record.attempts, 1);
            assert!(archived.insert(record.id), "{} archived twice", record.id);
        }
        match page.next {
            Some(next) => filter.before = Some(next),
            None => break,
        }
    }
    assert_eq!(archived.len(), JOBS);
}

/// Racing enqueues of one unique key create exactly one job; every caller
/// gets its id.
pub async fn concurrent_enqueues_of_one_key_make_one_job<S: Storage>(ctx: Ctx<S>) {
    for round in 0..10 {
        let key = format!("race-{round}");
        // Polled together on this task (see `racing_claims_...`): a storage
        // that looks the key up, awaits, then inserts meets the other
        // producers in that window every run.
        let racers = (0..DEQUEUERS).map(|n| {
            let job = NewJob::new("q", json!({"n": n})).unique_key(key.clone());
            ctx.storage.enqueue(job)
        });
        let outcomes: Vec<_> = (futures_util::future::join_all(racers).await.into_iter())
            .map(|outcome| outcome.expect("enqueue"))
            .collect();
        let ids: HashSet<_> = outcomes.iter().map(|o| o.id).collect();
        assert_eq!(ids.len(), 1, "round {round}: {outcomes:?}");
        assert_eq!(
            outcomes.iter().filter(|o| !o.existed).count(),
            1,
            "round {round}: {outcomes:?}"
        );
    }
    assert_eq!(ctx.live_count().await, 10);
}

/// Workers that hold their jobs across awaits before acking never see a
/// job another worker holds: a claim that reads, awaits and then writes
/// without a lock hands the same job out twice, and this catches it.
pub async fn dequeue_never_hands_a_held_job_to_a_second_worker<S: Storage>(ctx: Ctx<S>) {
    const HELD_JOBS: usize = 200;
    ctx.fill("q", HELD_JOBS).await;
    let all = race(&ctx, 2, 4).await;
    assert_eq!(all.len(), HELD_JOBS);
    assert_eq!(ctx.live_count().await, 0);
}

/// Two claimers of one job each race over two queues whose best jobs are
/// one in each: between them they take only those two, never a worse one.
/// A claim that locks each queue's candidates as it scans them holds a row
/// it does not take until it commits, and the other claimer, skipping it,
/// takes a worse job. Repeated, since the race needs the claims to overlap.
pub async fn racing_claims_on_several_queues_take_only_the_best_jobs<S: Storage>(ctx: Ctx<S>) {
    for round in 0..40 {
        let (a, b) = (format!("a{round}"), format!("b{round}"));
        let mut best = HashSet::new();
        for (queue, priority) in [(&a, 10), (&b, 5), (&b, 1), (&a, 0)] {
            let id = ctx
                .storage
                .enqueue(NewJob::new(queue.as_str(), json!({})).priority(priority))
                .await
                .expect("enqueue")
                .id;
            if priority >= 5 {
                best.insert(id);
            }
        }
        let start = Arc::new(tokio::sync::Barrier::new(2));
        let claimers: Vec<_> = (0..2)
            .map(|n| {
                let ctx = ctx.clone();
                let start = Arc::clone(&start);
                let request = request(&[a.as_str(), b.as_str()], 1, &format!("c{n}"));
                tokio::spawn(async move {
                    start.wait().await;
                    ctx.storage.dequeue(&request).await.expect("dequeue")
                })
            })
            .collect();
        for claimer in claimers {
            for job in claimer.await.expect("claimer task") {
                assert!(
                    best.contains(&job.id),
                    "round {round}: claimed job {} (priority {}) while a better one was free",
                    job.id,
                    job.priority
                );
            }
        }
    }
}

/// Two claimers of two jobs each race over queues `a` (priorities 10, 8, 2
/// and 1) and `b` (9): within each queue the jobs they take are its best,
/// never a worse one while a better one of that queue is left free (the
/// contract allows a worse job of *another* queue while the better ones of
/// a queue are all being taken). A claim that, finding part of a queue's
/// first page taken meanwhile, moves on to the next page leaves `a`'s 8
/// for its 2 and 1. Polled together on this task, as the key race is.
pub async fn racing_claims_take_each_queues_jobs_in_order<S: Storage>(ctx: Ctx<S>) {
    for round in 0..20 {
        let (a, b) = (format!("a{round}"), format!("b{round}"));
        let mut order: Vec<(String, JobId)> = Vec::new();
        for (queue, priority) in [(&a, 10), (&b, 9), (&a, 8), (&a, 2), (&a, 1)] {
            let id = ctx
                .enqueue(NewJob::new(queue.as_str(), json!({})).priority(priority))
                .await;
            order.push((queue.clone(), id));
        }
        let racers = (0..2).map(|n| {
            let request = request(&[a.as_str(), b.as_str()], 2, &format!("c{n}"));
            let storage = &ctx.storage;
            async move { storage.dequeue(&request).await.expect("dequeue") }
        });
        let taken: HashSet<JobId> = futures_util::future::join_all(racers)
            .await
            .into_iter()
            .flatten()
            .map(|job| job.id)
            .collect();
        for queue in [&a, &b] {
            let in_order: Vec<bool> = order
                .iter()
                .filter(|(q, _)| q == queue)
                .map(|(_, id)| taken.contains(id))
                .collect();
            assert!(
                in_order.windows(2).all(|w| w[0] || !w[1]),
                "round {round}: queue {queue}'s jobs best first, taken or not: {in_order:?}"
            );
        }
    }
}

/// [`DEQUEUERS`] workers, started together, drain queue `q`: each claims
/// `limit` jobs at a time, checks that nobody else holds them, holds them
/// across `hold` yields and a millisecond (when `hold > 0`), then acks them.
/// Returns every completed id, checked to be completed once.
async fn race<S: Storage>(ctx: &Ctx<S>, limit: u32, hold: usize) -> HashSet<JobId> {
    let held = Arc::new(Mutex::new(HashSet::new()));
    let start = Arc::new(tokio::sync::Barrier::new(DEQUEUERS));
    let workers: Vec<_> = (0..DEQUEUERS)
        .map(|n| {
            let ctx = ctx.clone();
            let held = Arc::clone(&held);
            let start = Arc::clone(&start);
            tokio::spawn(async move {
                let worker_name = format!("w{n}");
                let mut completed = Vec::new();
                start.wait().await;
                loop {
                    let jobs = ctx
                        .storage
                        .dequeue(&request(&["q"], limit, &worker_name))
                        .await
                        .expect("dequeue");
                    if jobs.is_empty() {
                        return completed;
                    }
                    for job in &jobs {
                        let fresh = held
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .insert(job.id);
                        assert!(
                            fresh,
                            "job {} handed out while another worker holds it",
                            job.id
                        );
                    }
                    if hold > 0 {
                        for _ in 0..hold {
                            tokio::task::yield_now().await;
                        }
                        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                    }
                    for job in jobs {
                        held.lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .remove(&job.id);
                        ctx.storage.ack(&lease_of(&job), None).await.expect("ack");
                        completed.push(job.id);
                    }
                }
            })
        })
        .collect();
    let mut all = HashSet::new();
    for worker in workers {
        for id in worker.await.expect("dequeuer task") {
            assert!(all.insert(id), "job {id} completed twice");
        }
    }
    all
}
