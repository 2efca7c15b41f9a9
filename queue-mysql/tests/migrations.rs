//! The MySQL migrations against a real server (MariaDB here; MySQL 8 by URL).

mod common;

use std::path::Path;

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use queue_core::QueueError;
use queue_mysql::{MIGRATIONS, migrate};
use queue_testkit::harness::assert_migrations_match_dir;
use queue_testkit::harness::mysql::TestDatabase;

#[derive(QueryableByName, Debug, PartialEq)]
struct Name {
    #[diesel(sql_type = Text)]
    name: String,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

async fn connect(db: &TestDatabase) -> AsyncMysqlConnection {
    AsyncMysqlConnection::establish(&db.url())
        .await
        .expect("connect to the test database")
}

async fn names(conn: &mut AsyncMysqlConnection, sql: &str) -> Vec<String> {
    diesel::sql_query(sql)
        .load::<Name>(conn)
        .await
        .expect("query names")
        .into_iter()
        .map(|n| n.name)
        .collect()
}

async fn tables(conn: &mut AsyncMysqlConnection) -> Vec<String> {
    names(
        conn,
        "SELECT CAST(table_name AS CHAR) AS name FROM information_schema.tables \
         WHERE table_schema = DATABASE() ORDER BY 1",
    )
    .await
}

/// A migrated database and a connection to it.
async fn migrated() -> (TestDatabase, AsyncMysqlConnection) {
    let db = TestDatabase::create().await;
    let mut conn = connect(&db).await;
    migrate(&mut conn).await.expect("migrate");
    (db, conn)
}

#[test]
fn every_migration_file_is_embedded_unchanged() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    assert_migrations_match_dir(&dir, MIGRATIONS);
}

#[tokio::test]
async fn migrations_apply_to_an_empty_database() {
    let db = TestDatabase::create().await;
    let mut conn = connect(&db).await;
    assert_eq!(tables(&mut conn).await, Vec::<String>::new());

    assert_eq!(
        migrate(&mut conn).await.expect("migrate"),
        MIGRATIONS.iter().map(|m| m.version).collect::<Vec<_>>()
    );
    assert_eq!(
        tables(&mut conn).await,
        [
            "job_dependency",
            "job_group_turn",
            "job_history",
            "job_queue",
            "job_ready_0",
            "job_ready_1",
            "job_ready_2",
            "job_ready_3",
            "job_ready_inbox",
            "job_sample_depth",
            "job_sample_lag",
            "job_throughput",
            "job_waiting",
            "queue_config",
            "queue_group_limit",
            "queue_group_weight",
            "queue_ready_ring",
            "queue_schedule",
            "queue_schema_migrations",
            "queue_worker"
        ]
    );
    drop(conn);
    db.drop_database().await;
}

#[tokio::test]
async fn applying_migrations_twice_is_a_no_op() {
    let (db, mut conn) = migrated().await;
    assert_eq!(
        migrate(&mut conn).await.expect("second migrate"),
        Vec::<u32>::new()
    );
    drop(conn);
    db.drop_database().await;
}

#[tokio::test]
async fn concurrent_migrations_apply_each_version_once() {
    let db = TestDatabase::create().await;
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let url = db.url();
            tokio::spawn(async move {
                let mut conn = AsyncMysqlConnection::establish(&url)
                    .await
                    .expect("connect");
                migrate(&mut conn).await
            })
        })
        .collect();
    let mut applied = Vec::new();
    for run in runs {
        applied.extend(run.await.expect("task").expect("migrate"));
    }
    assert_eq!(
        applied,
        MIGRATIONS.iter().map(|m| m.version).collect::<Vec<_>>()
    );
    db.drop_database().await;
}

#[tokio::test]
async fn an_edited_migration_is_a_conflict() {
    let (db, mut conn) = migrated().await;
    diesel::sql_query(
        "UPDATE queue_schema_migrations SET checksum = checksum + 1 WHERE version = 1",
    )
    .execute(&mut conn)
    .await
    .expect("tamper");
    let err = migrate(&mut conn).await.expect_err("edited migration");
    assert!(matches!(err, QueueError::Conflict { .. }), "{err:?}");
    drop(conn);
    db.drop_database().await;
}

#[tokio::test]
async fn dequeue_index_is_queue_then_lease_then_priority_desc_then_available_at_then_id() {
    let (db, mut conn) = migrated().await;
    let columns = names(
        &mut conn,
        "SELECT CAST(CONCAT(column_name, ' ', COALESCE(collation, '-')) AS CHAR) AS name \
         FROM information_schema.statistics \
         WHERE table_schema = DATABASE() AND table_name = 'job_queue' \
           AND index_name = 'job_queue_dequeue' ORDER BY seq_in_index",
    )
    .await;
    assert_eq!(
        columns,
        [
            "queue_name A",
            "lease_until A",
            "priority D",
            "available_at A",
            "id A"
        ]
    );
    drop(conn);
    db.drop_database().await;
}

#[tokio::test]
async fn times_are_microsecond_datetimes_and_text_is_binary_utf8mb4() {
    let (db, mut conn) = migrated().await;
    let columns = names(
        &mut conn,
        "SELECT CAST(CONCAT(table_name, '.', column_name, ' ', column_type) AS CHAR) AS name \
         FROM information_schema.columns WHERE table_schema = DATABASE() \
           AND (column_name LIKE '%\\_at' OR column_name = 'lease_until') \
           AND table_name <> 'queue_schema_migrations' ORDER BY 1",
    )
    .await;
    assert!(!columns.is_empty());
    for column in &columns {
        assert!(column.ends_with(" datetime(6)"), "{column}");
    }
    let collations = names(
        &mut conn,
        "SELECT DISTINCT CAST(table_collation AS CHAR) AS name FROM information_schema.tables \
         WHERE table_schema = DATABASE()",
    )
    .await;
    assert_eq!(collations, ["utf8mb4_bin"]);
    drop(conn);
    db.drop_database().await;
}

#[tokio::test]
async fn unique_key_allows_many_nulls_but_one_key_per_queue() {
    let (db, mut conn) = migrated().await;
    let insert = |key: &str| {
        format!(
            "INSERT INTO job_queue (queue_name, unique_key, payload, max_attempts, available_at, \
             created_at, updated_at) VALUES ('q', {key}, '{{}}', 1, UTC_TIMESTAMP(6), \
             UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))"
        )
    };
    for _ in 0..2 {
        diesel::sql_query(insert("NULL"))
            .execute(&mut conn)
            .await
            .expect("NULL keys never conflict");
    }
    diesel::sql_query(insert("'k'"))
        .execute(&mut conn)
        .await
        .expect("first key");
    diesel::sql_query(insert("'k'"))
        .execute(&mut conn)
        .await
        .expect_err("second identical key");
    let count = diesel::sql_query("SELECT COUNT(*) AS n FROM job_queue")
        .get_result::<Count>(&mut conn)
        .await
        .expect("count");
    assert_eq!(count.n, 3);
    drop(conn);
    db.drop_database().await;
}

/// Migration 0013 (fair groups) on a database the previous release left
/// holding pending, leased and scheduled jobs of two groups and of none,
/// with a concurrency limit: nothing moves, the group limits still count
/// the leased job, and once the queue is made fair its claims take the
/// groups in turn.
#[tokio::test]
async fn an_upgrade_to_fair_groups_keeps_jobs_and_limits() {
    use diesel_async::SimpleAsyncConnection;
    use queue_core::{DequeueRequest, GroupKey, QueueLimits, QueueName, Storage, WorkerId};
    use queue_mysql::MySqlStorage;
    use serde_json::{Value, json};

    let (db, mut conn) = common::schema_before(13).await;
    // Rows as plain SQL writes them (migration 0006's trigger adds the
    // ring entries of the jobs due now).
    let pending = [("a1", "'a'", 5), ("a2", "'a'", 4), ("a3", "'a'", 3)]
        .into_iter()
        .chain([("b1", "'b'", 2), ("none", "NULL", 1)]);
    for (payload, group, minutes) in pending {
        conn.batch_execute(&format!(
            "INSERT INTO job_queue (queue_name, priority, payload, max_attempts, available_at, \
                                    attempts, created_at, updated_at, group_key) \
             VALUES ('q', 0, '\"{payload}\"', 5, UTC_TIMESTAMP(6) - INTERVAL {minutes} MINUTE, 0, \
                     UTC_TIMESTAMP(6) - INTERVAL {minutes} MINUTE, \
                     UTC_TIMESTAMP(6) - INTERVAL {minutes} MINUTE, {group})"
        ))
        .await
        .expect("a pending job of the old schema");
    }
    conn.batch_execute(
        "INSERT INTO job_queue (queue_name, priority, payload, max_attempts, available_at, \
                                lease_until, locked_by, attempts, created_at, updated_at, group_key) \
         VALUES ('q', 0, '\"a leased\"', 5, UTC_TIMESTAMP(6) - INTERVAL 9 MINUTE, \
                 UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, 'old', 1, \
                 UTC_TIMESTAMP(6) - INTERVAL 9 MINUTE, UTC_TIMESTAMP(6), 'a'), \
                ('q', 0, '\"b later\"', 5, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, NULL, NULL, 0, \
                 UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 'b'); \
         INSERT INTO queue_config (queue_name, paused, updated_at, concurrency_limit, \
                                   group_concurrency_limit) \
         VALUES ('q', FALSE, UTC_TIMESTAMP(6), 4, 3)",
    )
    .await
    .expect("leased and scheduled jobs, the queue's limits");
    drop(conn);

    let storage = MySqlStorage::connect(&db.url()).expect("pool");
    assert_eq!(storage.migrate().await.expect("upgrade"), vec![13, 14, 15]);
    let queue = QueueName::new("q").expect("valid");
    let limits = QueueLimits {
        concurrency: Some(4),
        group_concurrency: Some(3),
        fair_groups: true,
        ..QueueLimits::default()
    };
    storage
        .configure_queue(&queue, &limits)
        .await
        .expect("configure");
    assert_eq!(
        storage.queue_configs().await.expect("configs")[0].limits,
        limits
    );
    let claim = || {
        DequeueRequest::new(
            vec![queue.clone()],
            10,
            std::time::Duration::from_secs(30),
            WorkerId::new("upgraded").expect("valid"),
        )
        .expect("a valid request")
    };
    let payloads = |jobs: &[queue_core::Job]| -> Vec<Value> {
        jobs.iter().map(|job| job.payload.clone()).collect()
    };
    // Three slots left of four; group "a" holds one lease of its three.
    // No group has been served yet: the oldest head first, then each
    // group in turn (in plain order: a1, a2, b1).
    let first = storage.dequeue(&claim()).await.expect("dequeue");
    assert_eq!(
        payloads(&first),
        vec![json!("a1"), json!("b1"), json!("none")]
    );
    for job in &first {
        storage
            .ack(&job.lease().expect("leased"), None)
            .await
            .expect("ack");
    }
    let second = storage.dequeue(&claim()).await.expect("dequeue");
    assert_eq!(payloads(&second), vec![json!("a2"), json!("a3")]);
    let group_a = GroupKey::new("a").expect("valid");
    assert!(
        second
            .iter()
            .all(|job| job.group_key.as_ref() == Some(&group_a))
    );
    let third = storage.dequeue(&claim()).await.expect("dequeue");
    assert!(third.is_empty(), "a holds its three leases: {third:?}");
    let live = storage
        .list_jobs(&queue_core::JobFilter::default())
        .await
        .expect("list");
    assert_eq!(
        live.jobs.len(),
        4,
        "a2, a3 and the leased job, the scheduled b"
    );
    db.drop_database().await;
}

/// A database of the release before group weights (migration 0014), with
/// a fair queue whose group "a" was served at turn 5: the upgrade keeps
/// the turn, and weights apply from the next claim.
#[tokio::test]
async fn an_upgrade_to_group_weights_keeps_the_turns_of_fair_queues() {
    use diesel_async::SimpleAsyncConnection;
    use queue_core::{DequeueRequest, GroupKey, QueueName, Storage, WorkerId};
    use queue_mysql::MySqlStorage;

    let (db, mut conn) = common::schema_before(14).await;
    conn.batch_execute(
        "INSERT INTO queue_config (queue_name, paused, updated_at, fair_groups, claim_count) \
         VALUES ('q', FALSE, UTC_TIMESTAMP(6), TRUE, 5); \
         INSERT INTO job_group_turn (queue_name, group_key, turn) VALUES ('q', 'a', 5)",
    )
    .await
    .expect("a fair queue of the old schema");
    for (group, minutes) in [("a", 4), ("a", 3), ("a", 2), ("b", 1)] {
        conn.batch_execute(&format!(
            "INSERT INTO job_queue (queue_name, priority, payload, max_attempts, available_at, \
                                    attempts, created_at, updated_at, group_key) \
             VALUES ('q', 0, '{{}}', 5, UTC_TIMESTAMP(6) - INTERVAL {minutes} MINUTE, 0, \
                     UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), '{group}')"
        ))
        .await
        .expect("a pending job of the old schema");
    }
    let storage = MySqlStorage::connect(&db.url()).expect("pool");
    assert_eq!(storage.migrate().await.expect("upgrade"), vec![14, 15]);
    let queue = QueueName::new("q").expect("valid");
    let claim = || async {
        let request = DequeueRequest::new(
            vec![QueueName::new("q").expect("valid")],
            1,
            std::time::Duration::from_secs(30),
            WorkerId::new("upgraded").expect("valid"),
        )
        .expect("a valid request");
        let jobs = storage.dequeue(&request).await.expect("dequeue");
        (jobs.iter())
            .map(|job| {
                job.group_key
                    .as_ref()
                    .map_or("-", GroupKey::as_str)
                    .to_owned()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        claim().await,
        ["b"],
        "a's turn, kept by the upgrade, is later"
    );
    let a = GroupKey::new("a").expect("valid");
    storage
        .set_group_weight(&queue, &a, Some(2))
        .await
        .expect("set_group_weight");
    assert_eq!(claim().await, ["a"]);
    let taken: Vec<i64> = {
        use diesel::sql_types::BigInt;
        #[derive(diesel::QueryableByName)]
        struct Taken {
            #[diesel(sql_type = BigInt)]
            taken: i64,
        }
        let mut conn = common::connect(&db).await;
        diesel_async::RunQueryDsl::load::<Taken>(
            diesel::sql_query(
                "SELECT CAST(taken AS SIGNED) AS taken FROM job_group_turn WHERE group_key = 'a'",
            ),
            &mut conn,
        )
        .await
        .expect("taken")
        .into_iter()
        .map(|row| row.taken)
        .collect()
    };
    assert_eq!(taken, [1], "one job of a's weight of 2 taken");
    drop(storage);
    db.drop_database().await;
}

/// A database of the release before workflows (migration 0014) holding a
/// pending, a leased and a scheduled job: after the upgrade each can be
/// depended on, and its finish releases the job waiting on it.
#[tokio::test]
async fn an_upgrade_to_workflows_keeps_jobs_that_new_jobs_can_depend_on() {
    use diesel_async::SimpleAsyncConnection;
    use queue_core::{
        DequeueRequest, JobFilter, JobId, JobState, NewJob, QueueName, Storage, WorkerId,
    };
    use queue_mysql::MySqlStorage;
    use serde_json::json;

    let (db, mut conn) = common::schema_before(15).await;
    conn.batch_execute(
        "INSERT INTO job_queue (queue_name, priority, payload, max_attempts, available_at, \
                                lease_until, locked_by, attempts, created_at, updated_at) \
         VALUES ('q', 0, '\"pending\"', 5, UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE, NULL, NULL, 0, \
                 UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE, UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE), \
                ('q', 0, '\"leased\"', 5, UTC_TIMESTAMP(6) - INTERVAL 2 MINUTE, \
                 UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, 'old', 1, \
                 UTC_TIMESTAMP(6) - INTERVAL 2 MINUTE, UTC_TIMESTAMP(6)), \
                ('q', 0, '\"scheduled\"', 5, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, NULL, NULL, 0, \
                 UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
    )
    .await
    .expect("jobs of the old schema");
    drop(conn);

    let storage = MySqlStorage::connect(&db.url()).expect("pool");
    assert_eq!(storage.migrate().await.expect("upgrade"), vec![15]);
    let old = storage
        .list_jobs(&JobFilter::default())
        .await
        .expect("list")
        .jobs;
    let ids: Vec<JobId> = old.iter().rev().map(|job| job.id).collect();
    assert_eq!(ids.len(), 3, "{old:?}");
    let waiting = storage
        .enqueue(NewJob::new("after", json!({})).depends_on_all(ids.clone()))
        .await
        .expect("a job depending on the three old ones");
    let state = |id| {
        let storage = &storage;
        async move {
            storage
                .get_job(id)
                .await
                .expect("get")
                .map(|job| queue_core::derive_state(&job, chrono::Utc::now()))
        }
    };
    assert_eq!(state(waiting.id).await, Some(JobState::Waiting));
    let claim = DequeueRequest::new(
        vec![QueueName::new("q").expect("valid")],
        10,
        std::time::Duration::from_secs(30),
        WorkerId::new("upgraded").expect("valid"),
    )
    .expect("a valid request");
    let claimed = storage.dequeue(&claim).await.expect("dequeue");
    assert_eq!(claimed.len(), 1, "the pending job: {claimed:?}");
    storage
        .ack(&claimed[0].lease().expect("leased"), None)
        .await
        .expect("ack the pending job");
    storage
        .cancel(ids[1])
        .await
        .expect("cancel the old lease's job");
    assert_eq!(
        state(waiting.id).await,
        None,
        "a cancelled dependency cancels the job"
    );
    let links = storage.job_links(waiting.id).await.expect("links");
    assert_eq!(links.dependencies.len(), 3);
    db.drop_database().await;
}
