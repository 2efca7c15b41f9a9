//! Search (`queue_core::search_jobs`, `search_history`): the listings'
//! filters and a value in the payload, through the storage's own listing
//! statements, a bounded number of rows per call.

use queue_core::{
    FinalStatus, HistoryFilter, JobFilter, JobId, MAX_SEARCH_SCAN, NewJob, PayloadMatch, Storage,
    search_history, search_jobs,
};
use serde_json::json;

use super::{Ctx, assert_invalid, queue};

fn customer(id: u64) -> PayloadMatch {
    format!("payload.customer_id = {id}")
        .parse()
        .expect("valid match")
}

impl<S: Storage> Ctx<S> {
    /// Enqueues `n` jobs into `queue_name` in batches, job `i` with
    /// payload `{"customer_id": customer(i), "i": i}`; their ids in order.
    async fn enqueue_customers(
        &self,
        queue_name: &str,
        n: u64,
        customer: impl Fn(u64) -> u64,
    ) -> Vec<JobId> {
        let mut ids = Vec::new();
        for start in (0..n).step_by(500) {
            let batch = (start..(start + 500).min(n))
                .map(|i| NewJob::new(queue_name, json!({ "customer_id": customer(i), "i": i })))
                .collect();
            let outcomes = (self.storage.enqueue_batch(batch).await).expect("enqueue_batch");
            ids.extend(outcomes.into_iter().map(|o| o.id));
        }
        ids
    }
}

/// A search keeps the listing's filters and order (newest first), finds
/// the payload's value across many pages, and answers where to continue:
/// three calls find every match of the queue, and none of the other's.
pub async fn search_finds_payload_values_newest_first_and_resumes<S: Storage>(ctx: Ctx<S>) {
    let ids = ctx.enqueue_customers("q", 2_300, |i| i % 100).await;
    ctx.enqueue_customers("other", 300, |_| 7).await;
    let mut expected: Vec<JobId> = (ids.iter().enumerate())
        .filter(|(i, _)| i % 100 == 7)
        .map(|(_, id)| *id)
        .collect();
    expected.reverse();
    assert_eq!(expected.len(), 23);

    let wanted = customer(7);
    let mut filter = JobFilter {
        queue: Some(queue("q")),
        limit: 10,
        ..JobFilter::default()
    };
    let mut found = Vec::new();
    let mut calls = 0;
    loop {
        let page = search_jobs(&*ctx.storage, &filter, Some(&wanted), 10_000)
            .await
            .expect("search_jobs");
        calls += 1;
        assert!(page.items.len() <= 10);
        assert!(!page.budget_spent, "2,300 rows fit the budget");
        assert!(
            page.items
                .iter()
                .all(|job| job.payload["customer_id"] == 7 && job.queue.as_str() == "q"),
            "{:?}",
            page.items
        );
        found.extend(page.items.iter().map(|job| job.id));
        match page.next {
            Some(next) => filter.before = Some(next),
            None => break,
        }
    }
    assert_eq!(found, expected, "every match, newest first, once");
    assert_eq!(calls, 3);

    // Without a payload match a search is the listing itself.
    let plain = JobFilter {
        queue: Some(queue("q")),
        limit: 50,
        ..JobFilter::default()
    };
    let searched = (search_jobs(&*ctx.storage, &plain, None, 50))
        .await
        .expect("search_jobs");
    let listed = ctx.storage.list_jobs(&plain).await.expect("list_jobs");
    assert_eq!(searched.items, listed.jobs);
    assert_eq!(searched.next, listed.next);
    assert_eq!(searched.scanned, 50);
}

/// A call reads at most its budget of rows: with the only matches among
/// the oldest jobs, the first call reads its 1,000 rows, finds nothing and
/// says where to go on; the next finds them and reaches the end.
pub async fn search_stops_at_its_scan_budget_and_says_where_to_continue<S: Storage>(ctx: Ctx<S>) {
    let ids = ctx
        .enqueue_customers("q", 1_500, |i| if i < 5 { 7 } else { 1 })
        .await;
    let filter = JobFilter {
        limit: 10,
        ..JobFilter::default()
    };
    let first = (search_jobs(&*ctx.storage, &filter, Some(&customer(7)), 1_000))
        .await
        .expect("search_jobs");
    assert!(first.items.is_empty());
    assert_eq!(first.scanned, 1_000);
    assert!(first.budget_spent);
    let next = first.next.expect("more to read");
    let rest = JobFilter {
        before: Some(next),
        ..filter
    };
    let second = (search_jobs(&*ctx.storage, &rest, Some(&customer(7)), 1_000))
        .await
        .expect("search_jobs");
    let mut oldest: Vec<JobId> = ids[..5].to_vec();
    oldest.reverse();
    assert_eq!(
        second.items.iter().map(|job| job.id).collect::<Vec<_>>(),
        oldest
    );
    assert_eq!(second.scanned, 500);
    assert!(!second.budget_spent);
    assert_eq!(second.next, None);
}

/// History is searched the same way, by status and payload.
pub async fn search_history_finds_payload_values_by_status<S: Storage>(ctx: Ctx<S>) {
    for (customer_id, dead) in [(7, false), (8, false), (7, true)] {
        ctx.enqueue(NewJob::new("h", json!({ "customer_id": customer_id })))
            .await;
        let job = ctx.claim_one("h").await;
        if dead {
            let lease = super::lease_of(&job);
            ctx.storage
                .nack(&lease, json!("boom"), queue_core::Retry::Never)
                .await
                .expect("nack");
        } else {
            ctx.storage
                .ack(&super::lease_of(&job), None)
                .await
                .expect("ack");
        }
    }
    let filter = HistoryFilter {
        status: Some(FinalStatus::Completed),
        limit: 10,
        ..HistoryFilter::default()
    };
    let page = (search_history(&*ctx.storage, &filter, Some(&customer(7)), 100))
        .await
        .expect("search_history");
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].payload, json!({ "customer_id": 7 }));
    assert_eq!(page.items[0].status, FinalStatus::Completed);
    assert_eq!(page.next, None);
    let any = HistoryFilter {
        status: None,
        ..filter
    };
    let page = (search_history(&*ctx.storage, &any, Some(&customer(7)), 100))
        .await
        .expect("search_history");
    assert_eq!(page.items.len(), 2, "completed and dead-lettered");
}

/// A budget of 0 or above the most, and a bad limit, are refused before
/// anything is read.
pub async fn search_with_invalid_input_is_rejected<S: Storage>(ctx: Ctx<S>) {
    ctx.enqueue(NewJob::new("q", json!({ "customer_id": 7 })))
        .await;
    let filter = JobFilter::default();
    for scan in [0, MAX_SEARCH_SCAN + 1] {
        assert_invalid(
            search_jobs(&*ctx.storage, &filter, Some(&customer(7)), scan).await,
            "scan",
        );
        assert_invalid(
            search_history(&*ctx.storage, &HistoryFilter::default(), None, scan).await,
            "scan",
        );
    }
    let zero = JobFilter {
        limit: 0,
        ..JobFilter::default()
    };
    assert_invalid(
        search_jobs(&*ctx.storage, &zero, Some(&customer(7)), 100).await,
        "limit",
    );
}
