//! Every statement that names its rows by id reaches them through the
//! primary key, also on a table so small that a scan looks cheaper to the
//! planner (the end of every drain). A locking scan holds each row it
//! passes for a moment, and a concurrent claim's `SKIP LOCKED` then passes
//! over a due job no one is taking: the worker's ordering test saw a job
//! claimed after the one behind it, once in 36 runs on a loaded machine.

use std::time::Duration;

use diesel::sql_query;
use diesel_async::{RunQueryDsl, SimpleAsyncConnection};
use queue_core::{Ack, DequeueRequest, NewJob, QueueName, Storage, WorkerId};
use queue_testkit::harness::mysql::TestDatabase;
use serde_json::json;

use crate::MySqlStorage;
use crate::explain::ExplainRow;

/// How many ids each statement names: 32 of a table of 40 made both
/// servers scan the whole table before these statements took the key.
const NAMED: usize = 32;

/// `sql` with each `?` replaced by the next of `binds`, then by the next
/// of `first`, `first + 1`, …: distinct ids, and harmless numbers for the
/// other binds (EXPLAIN does not run the statement).
fn bound(sql: &str, binds: &[String], first: usize) -> String {
    let mut given = binds.iter();
    let mut next = first;
    let mut out = String::with_capacity(sql.len() + 64);
    for c in sql.chars() {
        if c == '?' {
            match given.next() {
                Some(bind) => out.push_str(bind),
                None => {
                    out.push_str(&next.to_string());
                    next += 1;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_by_id_use_the_primary_key_on_a_small_table() {
    let db = TestDatabase::create().await;
    let storage = MySqlStorage::connect_with_size(&db.url(), 2).expect("pool");
    storage.migrate().await.expect("migrate");
    // 80 jobs; the first 40 completed: history holds ids 1..=40 and the
    // live table 41..=80.
    let jobs = (0..80)
        .map(|i| NewJob::new("plans", json!({ "i": i })))
        .collect();
    storage.enqueue_batch(jobs).await.expect("enqueue");
    let request = DequeueRequest::new(
        vec![QueueName::new("plans").expect("queue")],
        40,
        Duration::from_secs(60),
        WorkerId::new("plans").expect("worker"),
    )
    .expect("request");
    let claimed = storage.dequeue(&request).await.expect("claim");
    assert_eq!(claimed.len(), 40);
    let acks: Vec<Ack> = claimed
        .iter()
        .map(|job| Ack {
            lease: job.lease().expect("leased").clone(),
            result: None,
        })
        .collect();
    let acked = storage.ack_batch(&acks).await.expect("ack");
    assert!(acked.iter().all(|a| *a));

    let mut conn = storage.pool().get().await.expect("connection");
    conn.batch_execute("ANALYZE TABLE job_queue, job_history")
        .await
        .expect("analyze");
    let live = [
        ("dequeue_lock_picked", super::dequeue_lock_picked(NAMED)),
        ("dequeue_lease", super::dequeue_lease(NAMED)),
        ("lock_leased", super::lock_leased(NAMED, true)),
        ("heartbeat_extend", super::heartbeat_extend(NAMED)),
        ("ack_archive", super::ack_archive(NAMED)),
        ("delete_live", super::delete_live(NAMED)),
        ("nack_dead_letter", super::nack_dead_letter(NAMED)),
        ("reclaim_requeue", super::reclaim_requeue(NAMED)),
        ("reclaim_dead_letter", super::reclaim_dead_letter(NAMED)),
        ("enqueue_clear_markers", super::enqueue_clear_markers(NAMED)),
        ("run_now", super::run_now(NAMED)),
        ("discard_jobs", super::discard_jobs(NAMED)),
    ];
    let archived = [
        (
            "retry_dead_letters_requeue",
            super::retry_dead_letters_requeue(NAMED),
        ),
        (
            "retry_dead_letters_delete",
            super::retry_dead_letters_delete(NAMED),
        ),
    ];
    let named = live
        .iter()
        .map(|(name, sql)| (*name, sql, "job_queue", 41))
        .chain(
            archived
                .iter()
                .map(|(name, sql)| (*name, sql, "job_history", 1)),
        );
    // The lease fence must name the same ids as the list, or the servers
    // see an impossible WHERE and read nothing.
    let lease_binds: Vec<String> = (41..41 + NAMED)
        .map(|id| id.to_string())
        .chain((41..41 + NAMED).flat_map(|id| [id.to_string(), "'plans'".into(), "1".into()]))
        .collect();
    let mut checked = 0;
    for (name, sql, table, first) in named {
        let binds: &[String] = if name == "lock_leased" {
            &lease_binds
        } else {
            &[]
        };
        let plan = sql_query(format!("EXPLAIN {}", bound(sql, binds, first)))
            .load::<ExplainRow>(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        // The step that reads the table (aliases: j, t, or the name).
        let steps: Vec<&ExplainRow> = plan
            .iter()
            .filter(|row| {
                row.key.as_deref() == Some("PRIMARY")
                    || matches!(row.table.as_deref(), Some(t) if t == table || t == "j" || t == "t")
            })
            .collect();
        assert!(!steps.is_empty(), "{name}: no step reads {table}");
        for step in steps {
            let access = step.access.as_deref().unwrap_or_default();
            assert!(
                matches!(access, "const" | "eq_ref" | "range")
                    && step.key.as_deref() == Some("PRIMARY"),
                "{name} reads {table} by {access} on {:?}, not through its primary key",
                step.key
            );
        }
        checked += 1;
    }
    assert_eq!(checked, live.len() + archived.len());
    drop(conn);
    db.drop_database().await;
}
