//! Listings at size: what a page of `list_jobs` costs the server (the
//! commands its script makes, counted by a private server's
//! `INFO commandstats`) stays the same however many newer jobs the queue
//! holds in other states; pages walked to the end agree with the states
//! derived from the rows; a layout-2 namespace gets the id indexes.

mod common;
#[path = "common/server.rs"]
mod server;

use std::collections::BTreeSet;
use std::time::Duration;

use queue_core::{
    DequeueRequest, JobFilter, JobId, JobState, NewJob, QueueName, Storage, WorkerId, derive_state,
};
use queue_redis::RedisStorage;
use serde_json::json;
use server::Server;

const QUEUE: &str = "listed";

fn queue() -> QueueName {
    QueueName::new(QUEUE).expect("name")
}

async fn enqueue(storage: &RedisStorage, count: usize, delay: Option<Duration>) -> Vec<JobId> {
    let mut ids = Vec::new();
    let mut left = count;
    while left > 0 {
        let chunk = left.min(1000);
        left -= chunk;
        let jobs = (0..chunk)
            .map(|_| {
                let job = NewJob::new(QUEUE, json!({}));
                match delay {
                    Some(delay) => job.delay(delay),
                    None => job,
                }
            })
            .collect();
        let outcomes = storage.enqueue_batch(jobs).await.expect("enqueue");
        ids.extend(outcomes.into_iter().map(|o| o.id));
    }
    ids
}

async fn claim(storage: &RedisStorage, count: u32, lease: Duration) -> Vec<JobId> {
    let request = DequeueRequest::new(
        vec![queue()],
        count,
        lease,
        WorkerId::new("w").expect("worker id"),
    )
    .expect("request");
    let jobs = storage.dequeue(&request).await.expect("dequeue");
    assert_eq!(jobs.len(), count as usize, "claimed all");
    jobs.into_iter().map(|job| job.id).collect()
}

fn filter(state: Option<JobState>, limit: u32) -> JobFilter {
    JobFilter {
        queue: Some(queue()),
        state,
        limit,
        ..JobFilter::default()
    }
}

/// The calls of data commands the server ran so far (scripts' included;
/// connection, introspection and script commands not).
async fn calls(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("info");
    let skipped = [
        "info", "evalsha", "eval", "script", "client", "hello", "ping", "select",
    ];
    info.lines()
        .filter_map(|line| line.strip_prefix("cmdstat_"))
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            let count = rest.strip_prefix("calls=")?.split(',').next()?;
            let count: u64 = count.parse().ok()?;
            (!skipped.contains(&name.split('|').next().unwrap_or(name))).then_some(count)
        })
        .sum()
}

/// The commands one listing costs, and the ids it returned.
async fn cost(
    storage: &RedisStorage,
    conn: &mut redis::aio::MultiplexedConnection,
    filter: &JobFilter,
) -> (u64, Vec<JobId>) {
    let before = calls(conn).await;
    let page = storage.list_jobs(filter).await.expect("list");
    let after = calls(conn).await;
    (
        after - before,
        page.jobs.into_iter().map(|job| job.id).collect(),
    )
}

fn newest(ids: &[JobId], n: usize) -> Vec<JobId> {
    let mut ids = ids.to_vec();
    ids.sort_by_key(|id| std::cmp::Reverse(*id));
    ids.truncate(n);
    ids
}

#[tokio::test]
async fn a_page_costs_the_same_however_many_newer_jobs_are_in_other_states() {
    let server = Server::start(&[]);
    let storage = RedisStorage::connect(&server.url(""))
        .await
        .expect("connect");
    let client = redis::Client::open(server.url("").as_str()).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    // The oldest ids: 5 stalled (a lease of a millisecond, run out),
    // then 5 running, 5 scheduled, 5 pending.
    enqueue(&storage, 5, None).await;
    let stalled = claim(&storage, 5, Duration::from_millis(1)).await;
    enqueue(&storage, 5, None).await;
    let running = claim(&storage, 5, Duration::from_secs(3600)).await;
    let scheduled = enqueue(&storage, 5, Some(Duration::from_secs(3600))).await;
    let pending = enqueue(&storage, 5, None).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let wanted = [
        (Some(JobState::Stalled), stalled.clone()),
        (Some(JobState::Running), running.clone()),
        (Some(JobState::Scheduled), scheduled.clone()),
        (Some(JobState::Pending), pending.clone()),
        (None, pending.clone()),
    ];
    let mut small = Vec::new();
    for (state, ids) in &wanted {
        let (spent, got) = cost(&storage, &mut conn, &filter(*state, 4)).await;
        assert_eq!(got, newest(ids, 4), "{state:?}");
        small.push(spent);
    }
    // 10,000 newer jobs, pending and scheduled.
    let newer_pending = enqueue(&storage, 5000, None).await;
    let newer_scheduled = enqueue(&storage, 5000, Some(Duration::from_secs(3600))).await;
    for (i, (state, ids)) in wanted.iter().enumerate() {
        let mut expected = ids.clone();
        match state {
            Some(JobState::Pending) => expected.extend(&newer_pending),
            Some(JobState::Scheduled) => expected.extend(&newer_scheduled),
            None => expected.extend(&newer_scheduled),
            _ => {}
        }
        let (spent, got) = cost(&storage, &mut conn, &filter(*state, 4)).await;
        assert_eq!(got, newest(&expected, 4), "{state:?}");
        // (A state over 1,000 jobs is walked by id: one command more.)
        assert!(
            spent <= small[i] + 1,
            "listing {state:?} cost {spent} commands with 10,000 newer jobs, {} without",
            small[i]
        );
    }
}

/// Every page of every state, walked to the end with a small limit, is
/// what the rows' derived states say, in both ways a state is read (by
/// its time range when it is small, by walking the id index when not).
#[tokio::test]
async fn pages_of_each_state_agree_with_the_derived_states() {
    let namespace = common::fresh_namespace();
    let storage = common::standalone_in(&namespace).await;
    // Over 1,000 stalled jobs newer than 1,000 running ones, scheduled
    // jobs among pending ones, some due already (never promoted: no claim
    // ran since).
    enqueue(&storage, 1100, None).await;
    claim(&storage, 1000, Duration::from_secs(3600)).await;
    claim(&storage, 100, Duration::from_secs(3600)).await;
    enqueue(&storage, 1200, None).await;
    claim(&storage, 1000, Duration::from_millis(1)).await;
    claim(&storage, 200, Duration::from_millis(1)).await;
    for _ in 0..3 {
        enqueue(&storage, 400, Some(Duration::from_millis(30))).await;
        enqueue(&storage, 400, Some(Duration::from_secs(3600))).await;
        enqueue(&storage, 300, None).await;
    }
    tokio::time::sleep(Duration::from_millis(60)).await;
    check_pages(&storage).await;
    common::purge(false, namespace).await;
}

/// Walks every listing with limit 97 and compares it with the full
/// listing's rows filtered by their derived state.
async fn check_pages(storage: &RedisStorage) {
    let all = walk(storage, None).await;
    assert!(all.windows(2).all(|w| w[0].0 > w[1].0), "ids descend");
    for state in [
        JobState::Pending,
        JobState::Scheduled,
        JobState::Running,
        JobState::Stalled,
        JobState::Exhausted,
    ] {
        let expected: Vec<JobId> = all
            .iter()
            .filter(|(_, s)| *s == state)
            .map(|(id, _)| *id)
            .collect();
        let got: Vec<JobId> = walk(storage, Some(state))
            .await
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(got.len(), expected.len(), "{state:?}");
        assert!(got == expected, "{state:?} pages differ");
    }
}

async fn walk(storage: &RedisStorage, state: Option<JobState>) -> Vec<(JobId, JobState)> {
    let now = storage.now().await.expect("now");
    let mut out = Vec::new();
    let mut filter = filter(state, 97);
    loop {
        let page = storage.list_jobs(&filter).await.expect("list");
        out.extend(page.jobs.iter().map(|job| (job.id, derive_state(job, now))));
        match page.next {
            Some(next) => filter.before = Some(next),
            None => break,
        }
    }
    out
}

#[tokio::test]
async fn migrate_upgrades_layout_two_to_the_id_indexes() {
    let namespace = common::fresh_namespace();
    let storage = common::standalone_in(&namespace).await;
    storage.migrate().await.expect("migrate");
    enqueue(&storage, 30, None).await;
    claim(&storage, 10, Duration::from_secs(3600)).await;
    enqueue(&storage, 10, Some(Duration::from_secs(3600))).await;
    let before: Vec<BTreeSet<JobId>> = listed(&storage).await;
    let mut conn = common::raw_connection().await;
    // What a layout-2 version left: its version and no id indexes.
    let layout = common::layout_key(&namespace);
    let prefix = format!("{namespace}:{{{QUEUE}}}");
    let _: () = redis::pipe()
        .cmd("SET")
        .arg(&layout)
        .arg("2")
        .ignore()
        .cmd("DEL")
        .arg(format!("{prefix}:ids:ready"))
        .arg(format!("{prefix}:ids:delayed"))
        .arg(format!("{prefix}:ids:leased"))
        .ignore()
        .query_async(&mut conn)
        .await
        .expect("a layout-2 namespace");
    assert!(
        listed(&storage).await[0].is_empty(),
        "without the indexes a listing of every state finds nothing"
    );
    assert_eq!(
        storage.migrate().await.expect("upgrade"),
        vec![queue_redis::LAYOUT_VERSION]
    );
    common::assert_current_layout(&mut conn, &namespace).await;
    let after = listed(&storage).await;
    assert_eq!(after, before);
    assert_eq!(
        after.iter().map(BTreeSet::len).collect::<Vec<_>>(),
        vec![40, 20, 10, 10]
    );
    assert!(storage.migrate().await.expect("again").is_empty());
    common::purge(false, namespace).await;
}

/// The ids listed with no state, pending, scheduled and running.
async fn listed(storage: &RedisStorage) -> Vec<BTreeSet<JobId>> {
    let mut out = Vec::new();
    for state in [
        None,
        Some(JobState::Pending),
        Some(JobState::Scheduled),
        Some(JobState::Running),
    ] {
        let page = storage.list_jobs(&filter(state, 1000)).await.expect("list");
        out.push(page.jobs.into_iter().map(|job| job.id).collect());
    }
    out
}
