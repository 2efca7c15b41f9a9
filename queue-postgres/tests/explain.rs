//! The claim is served by the partial dequeue index on a large backlog:
//! no sequential scan of `job_queue`, and no sort of the backlog; and the
//! other statements an operator can explain read index ranges too.

mod common;

use std::time::Duration;

use queue_core::backend::PlanStep;
use queue_core::{DequeueRequest, NewJob, QueueName, Storage, WorkerId};
use queue_postgres::PgStorage;
use queue_testkit::harness::postgres::TestSchema;
use queue_testkit::placement;
use queue_testkit::suite::acks_of;
use serde_json::json;

const BACKLOG: usize = 100_000;

/// Every plan step as (operation, table, planned rows), depth first.
fn plan_nodes(steps: &[PlanStep]) -> Vec<(String, Option<String>, f64)> {
    steps
        .iter()
        .map(|s| (s.operation.clone(), s.table.clone(), s.rows.unwrap_or(0.0)))
        .collect()
}

/// A worker's claim: `limit` split over `queues` as the dispatcher splits
/// its free slots (caps adding up to the limit, so the per-queue scans lock
/// as they go; an over-subscribed request takes the statement that locks
/// only the winners, which the conformance and model tests cover).
fn request(queues: &[&str], limit: u32) -> DequeueRequest {
    let cap = limit.div_ceil(u32::try_from(queues.len()).expect("few queues"));
    DequeueRequest::with_queue_limits(
        queues
            .iter()
            .map(|q| (QueueName::new(*q).expect("valid"), cap))
            .collect(),
        Duration::from_secs(30),
        WorkerId::new("explain").expect("valid"),
    )
    .expect("valid request")
}

/// Gives `queue` a concurrency limit, so that its claims take the limited
/// statement.
async fn limit_concurrency(storage: &PgStorage, queue: &str, limit: u32) {
    let limits = queue_core::QueueLimits {
        concurrency: Some(limit),
        ..queue_core::QueueLimits::default()
    };
    storage
        .configure_queue(&QueueName::new(queue).expect("valid"), &limits)
        .await
        .expect("configure");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_use_the_dequeue_index_on_a_100k_backlog() {
    let (schema, pool, storage) = common::storage_in_new_schema().await;

    // Four queues, mixed priorities and delays, plus running jobs.
    for chunk in (0..BACKLOG).collect::<Vec<_>>().chunks(5_000) {
        let batch = chunk
            .iter()
            .map(|i| {
                let job = NewJob::new(
                    ["emails", "reports", "sync", "misc"][i % 4],
                    json!({"i": i}),
                )
                .priority((i % 7) as i32 - 3);
                if i % 10 == 0 {
                    job.delay(Duration::from_secs(3600))
                } else {
                    job
                }
            })
            .collect();
        storage.enqueue_batch(batch).await.expect("enqueue_batch");
    }
    let running = storage
        .dequeue(&request(&["emails"], 200))
        .await
        .expect("dequeue");
    assert_eq!(running.len(), 200);
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "ANALYZE \"{}\".job_queue",
        schema.name()
    )))
    .execute(&pool)
    .await
    .expect("analyze");

    let one_steps = storage
        .explain_dequeue(&request(&["emails"], 10))
        .await
        .expect("explain");
    let many_steps = storage
        .explain_dequeue(&request(&["emails", "reports", "sync", "misc"], 10))
        .await
        .expect("explain");
    let (one, many) = (plan_nodes(&one_steps), plan_nodes(&many_steps));
    for (label, plan, steps) in [
        ("one queue", &one, &one_steps),
        ("four queues", &many, &many_steps),
    ] {
        assert!(
            plan.iter()
                .any(|n| n.0 == "Index Scan" && n.1.as_deref() == Some("job_queue")),
            "{label}: no index scan of job_queue in {plan:?}"
        );
        assert!(
            !scans_without_order(steps),
            "{label}: job_queue is scanned without the dequeue order in {plan:?}"
        );
    }
    assert!(
        sorts_only_the_merge(&one),
        "one queue: the index order needs no sort but the merge of the pick's two parts: {one:?}"
    );
    // The lease of the picked jobs (`queue_lease`, migration 0009), the
    // last plan `explain_dequeue` appends: by primary key.
    assert!(
        one_steps
            .iter()
            .any(|s| s.operation == "Index Scan" && s.index.as_deref() == Some("job_queue_pkey")),
        "one queue: the lease does not read job_queue_pkey: {one_steps:?}"
    );
    // The limited statements too, whose caps the planner cannot see (they
    // are computed in the statement): once it planned the lease UPDATE as
    // a hash join over a sequential scan of the whole table.
    limit_concurrency(&storage, "misc", 64).await;
    for (label, queues) in [
        ("limited, one queue", &["misc"][..]),
        ("limited, two queues", &["misc", "sync"][..]),
    ] {
        let steps = storage
            .explain_dequeue(&request(queues, 10))
            .await
            .expect("explain");
        assert!(
            steps.iter().any(|s| s.operation == "Index Scan"
                && s.table
                    .as_deref()
                    .is_some_and(|t| t.starts_with("job_ready_"))),
            "{label}: no index scan of the ready ring in {steps:?}"
        );
        assert!(
            !scans_without_order(&steps),
            "{label}: job_queue is scanned without the dequeue order in {steps:?}"
        );
    }
    // Several queues: only the per-queue winners are sorted. Each queue's
    // scan is cut by its own cap (a Limit right above the locking index
    // scan); the planner cannot know the caps (an array parameter), so its
    // row estimates for them are guesses and not checked here.
    let kinds: Vec<(&str, Option<&str>)> = many
        .iter()
        .map(|n| (n.0.as_str(), n.1.as_deref()))
        .collect();
    assert!(
        kinds.windows(3).any(|w| w
            == [
                ("Limit", None),
                ("LockRows", None),
                ("Index Scan", Some("job_queue"))
            ]),
        "four queues: a per-queue scan without its limit: {many:?}"
    );

    // Reclaim reads stalled and exhausted jobs through their own indexes,
    // never the backlog.
    let reclaim_steps = storage.explain_reclaim(100).await.expect("explain");
    let indexes: Vec<&str> = reclaim_steps
        .iter()
        .filter_map(|s| s.index.as_deref())
        .collect();
    assert!(
        indexes.contains(&"job_queue_leased")
            && indexes.iter().all(|i| {
                ["job_queue_leased", "job_queue_exhausted", "job_queue_pkey"].contains(i)
            }),
        "reclaim reads other indexes than the leased and exhausted jobs' (and ids): {indexes:?}"
    );
    let reclaim = plan_nodes(&reclaim_steps);
    let on_jobs: Vec<_> = reclaim
        .iter()
        .filter(|n| n.1.as_deref() == Some("job_queue"))
        .collect();
    assert!(
        !on_jobs
            .iter()
            .any(|n| n.0 == "Seq Scan" || n.0 == "Bitmap Heap Scan"),
        "reclaim scans the backlog: {reclaim:?}"
    );
    assert!(
        !reclaim.iter().any(|n| n.0 == "Sort" && n.2 > 200.0),
        "reclaim sorts more than its two batches: {reclaim:?}"
    );

    // next_due probes the index per distinct priority (7 here, 4 queues)
    // instead of reading the 10k scheduled or 90k pending rows.
    let queues: Vec<QueueName> = ["emails", "reports", "sync", "misc"]
        .iter()
        .map(|q| QueueName::new(*q).expect("valid"))
        .collect();
    let due = storage.next_due(&queues).await.expect("next_due");
    assert!(
        due.is_some_and(|d| d > Duration::from_secs(3500)),
        "the delayed jobs are due in an hour: {due:?}"
    );
    let executed = storage.explain_next_due(&queues).await.expect("explain");
    let read: Vec<(String, f64)> = executed
        .iter()
        .filter(|s| s.table.as_deref() == Some("job_queue"))
        .map(|s| (s.operation.clone(), s.actual_rows.unwrap_or(0.0)))
        .collect();
    assert!(
        !read
            .iter()
            .any(|(kind, _)| kind == "Seq Scan" || kind == "Bitmap Heap Scan"),
        "next_due scans job_queue: {read:?}"
    );
    let total: f64 = read.iter().map(|(_, rows)| rows).sum();
    assert!(total <= 200.0, "next_due read {total} index rows: {read:?}");

    pool.close().await;
    schema.drop_schema().await;
}

/// Whether every sort of a plan is the pick's merge of its two parts
/// (the ring's and the scheduled jobs', migration 0010): a Sort over an
/// Append of CTE scans, at most a few caps of rows, never a sort of what
/// a table scan read.
fn sorts_only_the_merge(plan: &[(String, Option<String>, f64)]) -> bool {
    plan.iter().enumerate().all(|(at, node)| {
        node.0 != "Sort"
            || (plan.get(at + 1).is_some_and(|n| n.0 == "Append")
                && plan.get(at + 2).is_some_and(|n| n.0 == "CTE Scan"))
    })
}

/// Whether a claim's plan reads `job_queue` or the ready ring other than
/// through an index in the dequeue order: a sequential scan, or a bitmap
/// from any index but the primary key (the lease UPDATE finds the picked
/// ids through it).
fn scans_without_order(steps: &[PlanStep]) -> bool {
    steps.iter().any(|s| {
        (s.table
            .as_deref()
            .is_some_and(|t| t == "job_queue" || t.starts_with("job_ready"))
            && s.operation == "Seq Scan")
            || (s.operation == "Bitmap Index Scan"
                && s.index
                    .as_deref()
                    .is_some_and(|i| i.starts_with("job_queue_") && i != "job_queue_pkey"))
    })
}

/// Buffers an executed claim touched (the root step counts its
/// children's), after checking that it scans no table. Buffers, not rows:
/// index entries an index condition rejects are counted in neither
/// actual rows nor rows removed by a filter.
fn claim_buffers(steps: &[PlanStep]) -> f64 {
    assert!(
        !scans_without_order(steps),
        "the claim scans job_queue: {steps:?}"
    );
    steps.first().and_then(|s| s.buffers).unwrap_or(0.0)
}

/// An idle claim (nothing due) reads a few index entries per priority
/// level, not the jobs waiting for a later time; a claim with a few due
/// jobs reads those and stops at the first one not yet due. (A scan in
/// plain claim order read the whole queue's part of the index: about 750
/// buffers here.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_do_not_read_jobs_that_are_not_due_yet() {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    for chunk in (0..BACKLOG).collect::<Vec<_>>().chunks(5_000) {
        let batch = chunk
            .iter()
            .map(|i| {
                NewJob::new("delayed", json!({"i": i}))
                    .priority((i % 3) as i32)
                    .delay(Duration::from_secs(3600))
            })
            .collect();
        storage.enqueue_batch(batch).await.expect("enqueue_batch");
    }
    for queues in [&["delayed"][..], &["delayed", "other"][..]] {
        let plan = storage
            .explain_dequeue_analyzed(&request(queues, 16))
            .await
            .expect("explain");
        let buffers = claim_buffers(&plan);
        assert!(
            buffers > 0.0 && buffers <= 60.0,
            "{queues:?}: an idle claim touched {buffers} buffers"
        );
    }

    let due: Vec<_> = (0..3)
        .map(|i| NewJob::new("delayed", json!({"due": i})).priority(1))
        .collect();
    storage.enqueue_batch(due).await.expect("enqueue_batch");
    let plan = storage
        .explain_dequeue_analyzed(&request(&["delayed"], 16))
        .await
        .expect("explain");
    let buffers = claim_buffers(&plan);
    // About 35 a job since the ready ring (migration 0010): its entry in
    // the ring's index and table, the job's row by primary key, the lease,
    // and the entry's delete (in the one slot it is in since 0011).
    assert!(
        buffers > 0.0 && buffers <= 150.0,
        "a claim of 3 due jobs touched {buffers} buffers"
    );
    let claimed = storage
        .dequeue(&request(&["delayed"], 16))
        .await
        .expect("dequeue");
    assert_eq!(claimed.len(), 3, "the analysed claim was rolled back");

    pool.close().await;
    schema.drop_schema().await;
}

/// The limited claim counts a queue's held leases up to its limit with an
/// index scan of `job_queue_leased` (migration 0008; `job_queue_held`
/// before), even on a table never analyzed
/// (autovacuum off, or right after a bulk load) and full of finished jobs'
/// dead entries: counted from `job_queue_unique_key`, or by a bitmap scan
/// of every entry, it read each job of the queue or each job claimed since
/// the last vacuum, and a limited queue with 50,000 jobs waiting drained at
/// 16% of the speed of an unlimited one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_held_lease_count_reads_only_leased_jobs() {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    for _ in 0..10 {
        let batch = (0..2_000)
            .map(|i| NewJob::new("limited", json!({"i": i})))
            .collect();
        storage.enqueue_batch(batch).await.expect("enqueue_batch");
    }
    // 5,000 jobs claimed and completed: dead entries a count may wade through.
    for _ in 0..5 {
        let claimed = storage
            .dequeue(&request(&["limited"], 1_000))
            .await
            .expect("dequeue");
        let acks = acks_of(&claimed);
        storage.ack_batch(&acks).await.expect("ack");
    }
    let held = storage
        .dequeue(&request(&["limited"], 16))
        .await
        .expect("dequeue");
    assert_eq!(held.len(), 16);
    let queue = QueueName::new("limited").expect("valid");
    limit_concurrency(&storage, queue.as_str(), 64).await;
    let plan = storage.explain_held(&queue, 64).await.expect("explain");
    let indexes: Vec<&str> = plan.iter().filter_map(|s| s.index.as_deref()).collect();
    assert!(
        !indexes.is_empty()
            && indexes.iter().all(|i| *i == "job_queue_leased")
            && !plan
                .iter()
                .any(|s| s.operation == "Seq Scan" || s.operation.starts_with("Bitmap")),
        "the held count is not an index scan of job_queue_leased: {plan:?}"
    );
    let counted: f64 = plan
        .iter()
        .filter(|s| s.index.as_deref() == Some("job_queue_leased"))
        .map(|s| s.actual_rows.unwrap_or(0.0))
        .sum();
    assert!(
        counted <= 16.0,
        "counted {counted} leases, 16 are held: {plan:?}"
    );
    // Its buffers are not checked: an index scan skips the entries it
    // found dead before only once no snapshot in the cluster can see them,
    // and the other tests running meanwhile hold such snapshots.
    pool.close().await;
    schema.drop_schema().await;
}

/// Every claim statement keeps PostgreSQL's generic plan: after five
/// custom plans the server plans a prepared statement once for good only
/// if the generic plan does not look dearer than the custom ones. A claim
/// whose estimate grows with the number of queues in its array parameter
/// (`unnest` in the statement: ten rows assumed, against the two or three
/// a worker names) never qualified and was planned again on every call,
/// 1 ms of a 2 ms claim; nor did a one-queue claim for one or two jobs
/// (its LIMIT bound as such: 0.5-0.7 ms). Checked on one connection through
/// `pg_prepared_statements`, for each shape the worker sends: one queue,
/// several, several over-subscribed, the limited forms and the grouped
/// claim of a queue whose only limits are its groups'.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_keep_their_generic_plans() {
    let schema = TestSchema::create().await;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(schema.connect_options())
        .await
        .expect("pool");
    let storage = PgStorage::from_pool(pool.clone())
        .with_schema(schema.name())
        .expect("valid schema");
    storage.migrate().await.expect("migrate");
    for queue in ["plain", "other", "limited"] {
        let batch = (0..200)
            .map(|i| NewJob::new(queue, json!({ "i": i })))
            .collect();
        storage.enqueue_batch(batch).await.expect("enqueue_batch");
    }
    limit_concurrency(&storage, "limited", 1_000).await;
    let grouped = (0..200)
        .map(|i| NewJob::new("grouped", json!({ "i": i })).group_key(format!("g{}", i % 50)))
        .collect();
    storage.enqueue_batch(grouped).await.expect("enqueue_batch");
    let groups_only = queue_core::QueueLimits {
        group_concurrency: Some(1),
        ..queue_core::QueueLimits::default()
    };
    storage
        .configure_queue(&QueueName::new("grouped").expect("valid"), &groups_only)
        .await
        .expect("configure");
    // Each queue's cap is the whole limit: over-subscribed.
    let over = DequeueRequest::new(
        vec![
            QueueName::new("plain").expect("valid"),
            QueueName::new("other").expect("valid"),
        ],
        3,
        Duration::from_secs(30),
        WorkerId::new("explain").expect("valid"),
    )
    .expect("valid request");
    assert!(over.over_subscribed());
    let shapes = [
        request(&["plain"], 2),
        request(&["plain", "other"], 2),
        over,
        request(&["limited"], 2),
        request(&["limited", "plain"], 2),
        request(&["grouped"], 2),
    ];
    for shape in &shapes {
        for _ in 0..8 {
            storage.dequeue(shape).await.expect("dequeue");
        }
    }
    let plans: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements \
         WHERE statement LIKE '%.queue_lease(%' \
           AND statement NOT LIKE '%pg_prepared_statements%'",
    )
    .fetch_all(&pool)
    .await
    .expect("prepared statements");
    assert_eq!(
        plans.len(),
        shapes.len(),
        "one statement per shape: {plans:?}"
    );
    for (statement, generic, custom) in &plans {
        assert!(
            *generic >= 3 && *custom <= 5,
            "planned {custom} times for its parameters, {generic} times generic: {statement}"
        );
    }
    pool.close().await;
    schema.drop_schema().await;
}

/// A batch enqueue's plan stays under `jit_above_cost` at 5,000 jobs, keyed
/// or not. Each connection plans its first five executions of a statement
/// for their parameters; a statement priced over the JIT thresholds is then
/// JIT-compiled each time, which cost 736 ms against a 70 ms insert of
/// 5,000 rows when the outcome was a join the planner estimated at 125,000
/// rows (and made the enqueue of a 1,000,000-job backlog a third slower).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_enqueues_plan_under_the_jit_threshold() {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    let jit_above: f64 = sqlx::query_scalar("SELECT current_setting('jit_above_cost')::float8")
        .fetch_one(&pool)
        .await
        .expect("setting");
    for keyed in [false, true] {
        let jobs: Vec<NewJob> = (0..5_000)
            .map(|i| {
                let job = NewJob::new("jit", json!({ "i": i })).delay(Duration::from_secs(3600));
                if keyed {
                    job.unique_key(format!("key-{i}"))
                } else {
                    job
                }
            })
            .collect();
        let plan = storage.explain_enqueue(&jobs).await.expect("explain");
        let cost = plan[0].cost.expect("PostgreSQL prices every step");
        assert!(
            cost < jit_above,
            "keyed {keyed}: a batch of 5,000 is priced {cost}, over jit_above_cost {jit_above}: {:?}",
            plan_nodes(&plan)
        );
    }
    // Nothing was written: the plan was not executed.
    let live: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM \"{}\".job_queue",
        schema.name()
    )))
    .fetch_one(&pool)
    .await
    .expect("count");
    assert_eq!(live, 0);
}

/// The claim keeps to the dequeue index, in order, when the statistics say
/// `job_queue` is empty, as they do after autovacuum visited a drained
/// queue (`reltuples = 0`, and no column statistics if it never saw a
/// row). The planner then takes every scan for one row, and reading the
/// whole queue through a bitmap, or through `job_queue_unique_key`, plus
/// a sort costs about what the ordered scan does: in a soak, claims
/// switched to such a plan and read the whole pile on every call until
/// the next ANALYZE. `queue_pick` (migration 0007) leaves the planner no
/// such plan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_keep_the_dequeue_order_when_statistics_say_the_queue_is_empty() {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    let table = format!("\"{}\".job_queue", schema.name());
    let storage = &storage;
    let pile = |queue: &'static str| async move {
        for chunk in (0..60_000_i32).collect::<Vec<_>>().chunks(5_000) {
            let batch = chunk
                .iter()
                .map(|i| NewJob::new(queue, json!({"i": i})).priority(i % 3))
                .collect();
            storage.enqueue_batch(batch).await.expect("enqueue_batch");
        }
    };
    // A queue drained when autovacuum came: pages, and no live row (its
    // pages kept, as a busy queue's are). Another queue, after "busy" in
    // the index: the tests running beside this one hold snapshots that
    // keep VACUUM from removing its dead entries, which a claim of "busy"
    // never reads.
    pile("drained").await;
    schema.vacuum_job_queue_empty(&pool).await;
    // The pile the statistics do not know about.
    pile("busy").await;
    let reltuples: f32 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT reltuples FROM pg_class WHERE oid = '{table}'::regclass"
    )))
    .fetch_one(&pool)
    .await
    .expect("reltuples");
    assert_eq!(reltuples, 0.0, "the statistics say the table is empty");

    let steps = storage
        .explain_dequeue(&request(&["busy"], 16))
        .await
        .expect("explain");
    let plan = plan_nodes(&steps);
    assert!(
        !scans_without_order(&steps) && sorts_only_the_merge(&plan),
        "the claim reads the queue out of order: {plan:?}"
    );
    let executed = storage
        .explain_dequeue_analyzed(&request(&["busy"], 3))
        .await
        .expect("explain");
    let buffers = claim_buffers(&executed);
    assert!(
        buffers > 0.0 && buffers <= 150.0,
        "a claim of 3 of 60,000 due jobs touched {buffers} buffers: {executed:?}"
    );
    // An idle worker's next_due, on the same statistics: index probes, not
    // a read of the 60,000 jobs.
    let probes = storage
        .explain_next_due(&[QueueName::new("busy").expect("valid")])
        .await
        .expect("explain");
    let read: Vec<(String, f64)> = probes
        .iter()
        .filter(|s| s.table.as_deref() == Some("job_queue") || s.operation == "Sort")
        .map(|s| (s.operation.clone(), s.actual_rows.unwrap_or(0.0)))
        .collect();
    assert!(
        read.iter()
            .all(|(kind, rows)| kind.starts_with("Index") && *rows <= 10.0),
        "next_due reads the queue: {read:?}"
    );

    pool.close().await;
    schema.drop_schema().await;
}

/// `stats` finds its queues and counts from index ranges with either form
/// of `job_queue_unique_key`: it once enumerated the queues by a skip-scan
/// of that index, which once partial (keyed jobs only:
/// `PgStorage::index_keyless_jobs(false)`) no longer
/// serves a query for every job, and the enumeration became a sequential
/// scan of the table for each queue. Since migration 0012 it reads the
/// ready ring and `job_queue_scheduled`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_reads_index_ranges_with_either_unique_key_index() {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    for queue in ["alpha", "beta"] {
        for _ in 0..5 {
            let batch = (0..2_000)
                .map(|i| NewJob::new(queue, json!({"i": i})))
                .collect();
            storage.enqueue_batch(batch).await.expect("enqueue_batch");
        }
    }
    let held = storage
        .dequeue(&request(&["beta"], 16))
        .await
        .expect("dequeue");
    assert_eq!(held.len(), 16);
    for form in ["plain", "partial"] {
        if form == "partial" {
            storage.index_keyless_jobs(false).await.expect("partial");
        }
        sqlx::query("ANALYZE job_queue")
            .execute(&pool)
            .await
            .expect("analyze");
        let plan = storage.explain_stats(10_000).await.expect("explain");
        // Each recursive skip-scan (the queues with ring entries and with
        // scheduled jobs, then each queue's priority levels in both) must
        // probe an index: a Limit over a sequential scan reads the table
        // until it finds the next queue or level. The ring's probes merge
        // its four slots' indexes.
        let nodes = plan_nodes(&plan);
        let probes: Vec<usize> = plan
            .windows(2)
            .enumerate()
            .filter(|(_, w)| w[0].operation == "Recursive Union" && w[1].operation == "Limit")
            .map(|(i, _)| i + 2)
            .collect();
        let is_probe = |at: usize| {
            let step = &plan[at];
            let index_on = |s: &PlanStep, table: &str| {
                s.operation.starts_with("Index") && s.table.as_deref() == Some(table)
            };
            if step.operation == "Merge Append" {
                (1..=4).all(|k| {
                    plan.get(at + k)
                        .is_some_and(|s| index_on(s, &format!("job_ready_{}", k - 1)))
                })
            } else {
                index_on(step, "job_queue")
            }
        };
        assert!(
            probes.len() == 4 && probes.iter().all(|at| is_probe(*at)),
            "with the {form} unique-key index, a skip-scan of stats is not an index probe: {nodes:?}"
        );
        let stats = storage.stats().await.expect("stats");
        let counts: Vec<(&str, u64, u64)> = stats
            .iter()
            .map(|s| (s.queue.as_str(), s.pending, s.running))
            .collect();
        assert_eq!(
            counts,
            [("alpha", 10_000, 0), ("beta", 9_984, 16)],
            "with the {form} unique-key index"
        );
    }
    pool.close().await;
    schema.drop_schema().await;
}

/// Enqueues `n` jobs into `queue`, in batches.
async fn fill(storage: &PgStorage, queue: &str, n: usize) {
    for start in (0..n).step_by(1_000) {
        let jobs = (start..(start + 1_000).min(n))
            .map(|i| NewJob::new(queue, json!({ "i": i })))
            .collect();
        storage.enqueue_batch(jobs).await.expect("enqueue");
    }
}

/// Claims up to `n` jobs of `queue` with `lease`.
async fn claim(storage: &PgStorage, queue: &str, n: u32, lease: Duration) -> Vec<queue_core::Job> {
    let request = DequeueRequest::new(
        vec![QueueName::new(queue).expect("valid")],
        n,
        lease,
        WorkerId::new("explain").expect("valid"),
    )
    .expect("valid request");
    storage.dequeue(&request).await.expect("claim")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_read_their_queue_and_state_wherever_the_ids_sit() {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    // The queue listed holds the oldest ids, as a quiet queue does beside a
    // busy one; the claim took its oldest (running), some of those failed
    // back to wait for a retry (scheduled, old ids), the next ones stalled.
    // Then a busy queue's newer jobs, which no listing of the old queue
    // and no listing of a rare state may read through.
    const JOBS: usize = 20_000;
    fill(&storage, "old", JOBS).await;
    let held = claim(&storage, "old", 200, Duration::from_secs(3_600)).await;
    for job in held.iter().step_by(10) {
        let lease = job.lease().expect("leased");
        storage
            .nack(
                &lease,
                json!("retry"),
                queue_core::Retry::After(Duration::from_secs(3_600)),
            )
            .await
            .expect("nack");
    }
    claim(&storage, "old", 20, Duration::from_millis(1)).await;
    fill(&storage, "busy", JOBS).await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "ANALYZE \"{}\".job_queue",
        schema.name()
    )))
    .execute(&pool)
    .await
    .expect("analyze");
    tokio::time::sleep(Duration::from_millis(5)).await;

    let old = QueueName::new("old").expect("valid");
    let page = |queue: Option<&QueueName>, state| queue_core::JobFilter {
        queue: queue.cloned(),
        state,
        limit: 50,
        ..queue_core::JobFilter::default()
    };
    let mut filters = vec![("old, any state", page(Some(&old), None))];
    for state in queue_core::JobState::ALL {
        filters.push((state.as_str(), page(Some(&old), Some(state))));
        filters.push((state.as_str(), page(None, Some(state))));
    }
    let expected = |filter: &queue_core::JobFilter| match (filter.queue.is_some(), filter.state) {
        (_, Some(queue_core::JobState::Running)) => 50,
        (_, Some(queue_core::JobState::Scheduled)) => 20,
        (_, Some(queue_core::JobState::Stalled)) => 20,
        (_, Some(queue_core::JobState::Exhausted | queue_core::JobState::Waiting)) => 0,
        _ => 50,
    };
    for (what, filter) in filters {
        let listed = storage.list_jobs(&filter).await.expect("list");
        assert_eq!(listed.jobs.len(), expected(&filter), "{what}: {filter:?}");
        let plan = storage.explain_list_jobs(&filter).await.expect("explain");
        // The page's rows and the index pages leading to them: a few dozen
        // pages. Reading the busy queue's jobs newest first to reach the
        // old queue's (or the old leased ones) touches hundreds.
        let pages = plan[0].buffers.expect("buffers");
        assert!(
            pages <= 120.0,
            "{what} (queue {:?}) read {pages} pages: {:?}",
            filter.queue.as_ref().map(QueueName::as_str),
            plan_nodes(&plan)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_listings_read_their_queue_and_status_wherever_the_ids_sit() {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    let filters = queue_testkit::placement::history_beside_a_busy_queue(&storage, 20_000).await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "ANALYZE \"{}\".job_history",
        schema.name()
    )))
    .execute(&pool)
    .await
    .expect("analyze");
    for (what, filter, rows) in filters {
        let listed = storage.list_history(&filter).await.expect("list");
        assert_eq!(listed.records.len(), rows, "{what}: {filter:?}");
        let plan = storage
            .explain_list_history(&filter)
            .await
            .expect("explain");
        // A page per status at most, and the index pages leading to it.
        // Reading the busy queue's 20,000 rows newest first to reach the
        // quiet queue's touches hundreds.
        let pages = plan[0].buffers.expect("buffers");
        assert!(
            pages <= 60.0,
            "{what} read {pages} pages: {:?}",
            plan_nodes(&plan)
        );
    }
    pool.close().await;
    schema.drop_schema().await;
}

/// A fair claim reads a few index entries per group and priority level and
/// the jobs it takes, not a group's backlog: the same claim beside a
/// backlog of 100,000 jobs of one group touches about the buffers it
/// touches beside 1,000 (here 374 against 313: the deeper btrees of
/// `job_queue_fair` and the ring), and serves the other groups first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_claims_read_each_group_not_its_backlog() {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    let mut buffers = Vec::new();
    for (queue, backlog) in [("fair_small", 1_000), ("fair_big", BACKLOG)] {
        placement::fair_queue_behind_a_backlog(&storage, queue, backlog).await;
        let plan = storage
            .explain_dequeue_analyzed(&request(&[queue], 8))
            .await
            .expect("explain");
        buffers.push(claim_buffers(&plan));
        let claimed = claim(&storage, queue, 8, Duration::from_secs(60)).await;
        assert_eq!(
            placement::groups_of(&claimed),
            placement::FAIR_CLAIM_GROUPS,
            "{queue}"
        );
    }
    let (small, big) = (buffers[0], buffers[1]);
    assert!(
        small > 0.0 && big <= small * 1.2 + 40.0,
        "a fair claim touched {big} buffers beside 100,000 jobs, {small} beside 1,000"
    );
    pool.close().await;
    schema.drop_schema().await;
}
