//! Data placed where a real queue has it, for the backends' explain tests:
//! a listing must read the index range of its filters wherever their rows
//! sit in id order, so the rare rows are the oldest, under many newer ones.

use queue_core::{FinalStatus, HistoryFilter, NewJob, QueueName, Retry, Storage};
use serde_json::json;

use crate::suite::{acks_of, lease_of, request};

/// The queue [`history_beside_a_busy_queue`] finishes first.
pub const QUIET: &str = "quiet";

/// The page size of [`history_beside_a_busy_queue`]'s filters.
pub const PAGE: u32 = 10;

/// Finishes 40 jobs of [`QUIET`] (20 completed, 10 dead-lettered, 5
/// cancelled and 5 discarded: the oldest history ids), then `busy` jobs
/// of queue `busy`, all completed. Returns each history listing to check,
/// named, with the rows it must return: every combination of a queue,
/// a status and a later page, pages of [`PAGE`] rows.
///
/// # Panics
/// When the storage refuses a step (it must offer cancel and discard).
pub async fn history_beside_a_busy_queue(
    storage: &dyn Storage,
    busy: usize,
) -> Vec<(String, HistoryFilter, usize)> {
    let quiet: Vec<NewJob> = (0..40)
        .map(|i| NewJob::new(QUIET, json!({ "i": i })))
        .collect();
    let ids = storage.enqueue_batch(quiet).await.expect("enqueue quiet");
    let claimed = storage
        .dequeue(&request(&[QUIET], 30, "placement"))
        .await
        .expect("claim quiet");
    assert_eq!(claimed.len(), 30, "the quiet queue's jobs are due");
    for job in &claimed[..10] {
        storage
            .nack(&lease_of(job), json!("failed"), Retry::Never)
            .await
            .expect("dead-letter");
    }
    storage
        .ack_batch(&acks_of(&claimed[10..]))
        .await
        .expect("ack quiet");
    let waiting: Vec<_> = ids
        .into_iter()
        .map(|outcome| outcome.id)
        .filter(|id| !claimed.iter().any(|job| job.id == *id))
        .collect();
    for id in &waiting[..5] {
        storage.cancel(*id).await.expect("cancel");
    }
    for id in &waiting[5..] {
        storage.discard(*id).await.expect("discard");
    }
    for start in (0..busy).step_by(1_000) {
        let jobs = (start..(start + 1_000).min(busy))
            .map(|i| NewJob::new("busy", json!({ "i": i })))
            .collect();
        storage.enqueue_batch(jobs).await.expect("enqueue busy");
        let claimed = storage
            .dequeue(&request(&["busy"], 1_000, "placement"))
            .await
            .expect("claim busy");
        storage
            .ack_batch(&acks_of(&claimed))
            .await
            .expect("ack busy");
    }

    let quiet = QueueName::new(QUIET).expect("valid");
    let newest_quiet = storage
        .list_history(&HistoryFilter {
            queue: Some(quiet.clone()),
            limit: 1,
            ..HistoryFilter::default()
        })
        .await
        .expect("list")
        .records[0]
        .id;
    let filter = |queue: Option<&QueueName>, status| HistoryFilter {
        queue: queue.cloned(),
        status,
        limit: PAGE,
        ..HistoryFilter::default()
    };
    let page = PAGE as usize;
    let mut filters = vec![
        ("any queue and status".to_owned(), filter(None, None), page),
        (
            format!("{QUIET}, any status"),
            filter(Some(&quiet), None),
            page,
        ),
        (
            format!("{QUIET}, any status, a later page"),
            HistoryFilter {
                before: Some(newest_quiet),
                ..filter(Some(&quiet), None)
            },
            page,
        ),
    ];
    for status in FinalStatus::ALL {
        let rows = match status {
            FinalStatus::Cancelled | FinalStatus::Discarded => 5,
            FinalStatus::Completed | FinalStatus::DeadLetter => page,
        };
        filters.push((
            format!("{QUIET}, {status}"),
            filter(Some(&quiet), Some(status)),
            rows,
        ));
        filters.push((format!("{status}"), filter(None, Some(status)), rows));
        // The newest quiet row is the last one discarded.
        let older = if status == FinalStatus::Discarded {
            rows - 1
        } else {
            rows
        };
        filters.push((
            format!("{status}, a later page"),
            HistoryFilter {
                before: Some(newest_quiet),
                ..filter(None, Some(status))
            },
            older,
        ));
    }
    filters
}

/// The groups, in order, of the first eight jobs a fair claim takes from a
/// queue [`fair_queue_behind_a_backlog`] filled ("" for the job without a
/// group key): each group in turn, the large one first (its head is the
/// oldest), then the large one alone.
pub const FAIR_CLAIM_GROUPS: [&str; 8] = [
    "tenant-a", "tenant-b", "tenant-c", "", "tenant-a", "tenant-b", "tenant-a", "tenant-a",
];

/// Makes `queue` fair and fills it as a tenant's backlog fills a shared
/// queue: `backlog` jobs of group `tenant-a` first, then two of
/// `tenant-b`, one of `tenant-c` and one without a group key. A fair claim
/// must then read each group's head, not the backlog: the explain tests
/// compare its reads beside a small and a large backlog.
///
/// # Panics
/// When the storage refuses a step (it must offer fair groups).
pub async fn fair_queue_behind_a_backlog(storage: &dyn Storage, queue: &str, backlog: usize) {
    for start in (0..backlog).step_by(5_000) {
        let jobs = (start..(start + 5_000).min(backlog))
            .map(|i| NewJob::new(queue, json!({ "i": i })).group_key("tenant-a"))
            .collect();
        storage
            .enqueue_batch(jobs)
            .await
            .expect("enqueue the backlog");
    }
    let others = ["tenant-b", "tenant-b", "tenant-c"]
        .into_iter()
        .map(|g| NewJob::new(queue, json!("small")).group_key(g))
        .chain([NewJob::new(queue, json!("none"))])
        .collect();
    storage
        .enqueue_batch(others)
        .await
        .expect("enqueue the others");
    let limits = queue_core::QueueLimits {
        fair_groups: true,
        ..queue_core::QueueLimits::default()
    };
    storage
        .configure_queue(&QueueName::new(queue).expect("valid"), &limits)
        .await
        .expect("configure");
}

/// The group of each of `jobs`, "" for none: what [`FAIR_CLAIM_GROUPS`]
/// is compared with.
pub fn groups_of(jobs: &[queue_core::Job]) -> Vec<&str> {
    jobs.iter()
        .map(|j| j.group_key.as_ref().map_or("", |g| g.as_str()))
        .collect()
}
