//! The PostgreSQL migrations against a real server.

mod common;

use std::path::Path;

use queue_core::QueueError;
use queue_postgres::{MIGRATIONS, migrate};
use queue_testkit::harness::assert_migrations_match_dir;
use queue_testkit::harness::postgres::TestSchema;
use sqlx::PgPool;

async fn tables(pool: &PgPool, schema: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
    )
    .bind(schema)
    .fetch_all(pool)
    .await
    .expect("list tables")
}

/// A migrated schema and a pool on it.
async fn migrated() -> (TestSchema, PgPool) {
    let schema = TestSchema::create().await;
    let pool = schema.pool().await;
    migrate(&pool, schema.name()).await.expect("migrate");
    (schema, pool)
}

async fn finish(schema: TestSchema, pool: PgPool) {
    pool.close().await;
    schema.drop_schema().await;
}

fn all_versions() -> Vec<u32> {
    MIGRATIONS.iter().map(|m| m.version).collect()
}

/// A claim of up to `n` jobs of `queue` for a minute, by worker "w".
fn claim_of(queue: &queue_core::QueueName, n: u32) -> queue_core::DequeueRequest {
    queue_core::DequeueRequest::new(
        vec![queue.clone()],
        n,
        std::time::Duration::from_secs(60),
        queue_core::WorkerId::new("w").expect("valid"),
    )
    .expect("valid request")
}

/// The payloads of `jobs`, in order.
fn payloads(jobs: &[queue_core::Job]) -> Vec<serde_json::Value> {
    jobs.iter().map(|j| j.payload.clone()).collect()
}

#[test]
fn every_migration_file_is_embedded_unchanged() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    assert_migrations_match_dir(&dir, MIGRATIONS);
}

#[tokio::test]
async fn migrations_apply_to_an_empty_schema() {
    let schema = TestSchema::create().await;
    let pool = schema.pool().await;
    assert_eq!(tables(&pool, schema.name()).await, Vec::<String>::new());

    assert_eq!(
        migrate(&pool, schema.name()).await.expect("migrate"),
        all_versions()
    );
    assert_eq!(
        tables(&pool, schema.name()).await,
        [
            "job_dependency",
            "job_group_turn",
            "job_history",
            "job_queue",
            "job_ready",
            "job_ready_0",
            "job_ready_1",
            "job_ready_2",
            "job_ready_3",
            "job_sample_depth",
            "job_sample_lag",
            "job_throughput",
            "job_waiting",
            "queue_config",
            "queue_group_limit",
            "queue_group_weight",
            "queue_schedule",
            "queue_schema_migrations",
            "queue_worker"
        ]
    );
    finish(schema, pool).await;
}

#[tokio::test]
async fn applying_migrations_twice_is_a_no_op() {
    let (schema, pool) = migrated().await;
    assert_eq!(
        migrate(&pool, schema.name()).await.expect("second migrate"),
        Vec::<u32>::new()
    );
    finish(schema, pool).await;
}

#[tokio::test]
async fn concurrent_migrations_apply_each_version_once() {
    let schema = TestSchema::create().await;
    let pool = schema.pool().await;
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let pool = pool.clone();
            let name = schema.name().to_owned();
            tokio::spawn(async move { migrate(&pool, &name).await })
        })
        .collect();
    let mut applied = Vec::new();
    for run in runs {
        applied.extend(run.await.expect("task").expect("migrate"));
    }
    assert_eq!(applied, all_versions());
    finish(schema, pool).await;
}

#[tokio::test]
async fn an_edited_migration_is_a_conflict() {
    let (schema, pool) = migrated().await;
    sqlx::query("UPDATE queue_schema_migrations SET checksum = checksum + 1 WHERE version = 1")
        .execute(&pool)
        .await
        .expect("tamper");
    let err = migrate(&pool, schema.name())
        .await
        .expect_err("edited migration");
    assert!(matches!(err, QueueError::Conflict { .. }), "{err:?}");
    finish(schema, pool).await;
}

/// The claim's two indexes in claim order (queue, then priority highest
/// first, then time and id): the ready ring's, and the scheduled jobs'
/// (partial); `job_queue_dequeue`, which held every unleased job, is gone
/// (migration 0012).
#[tokio::test]
async fn claim_indexes_are_led_by_queue_then_priority_desc() {
    let (schema, pool) = migrated().await;
    let definition = |name: &'static str| {
        let pool = pool.clone();
        let schema = schema.name().to_owned();
        async move {
            sqlx::query_scalar::<_, String>(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = $2",
            )
            .bind(schema)
            .bind(name)
            .fetch_optional(&pool)
            .await
            .expect("pg_indexes")
        }
    };
    let ring = definition("job_ready_claim").await.expect("ring index");
    assert!(
        ring.contains("(queue_name, priority DESC, available_at, id)"),
        "{ring}"
    );
    let scheduled = definition("job_queue_scheduled")
        .await
        .expect("scheduled index");
    assert!(
        scheduled.contains(
            "(queue_name, priority DESC, available_at, id) WHERE ((lease_until IS NULL) AND (available_at > updated_at))"
        ),
        "{scheduled}"
    );
    assert_eq!(definition("job_queue_dequeue").await, None);
    finish(schema, pool).await;
}

/// The definitions of the unique-key index and of any index left by an
/// interrupted switch (filtered by name: `indexdef` in a WHERE clause may be
/// computed for other tests' indexes as they are dropped, and fail).
async fn unique_key_index(pool: &PgPool, schema: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = 'job_queue' \
         AND indexname LIKE 'job\\_queue\\_unique\\_key%' ORDER BY indexname",
    )
    .bind(schema)
    .fetch_all(pool)
    .await
    .expect("read the indexes")
}

/// An application's own upsert on the unique key: the bare `ON CONFLICT
/// (queue_name, unique_key)` infers the plain index the migrations create
/// (as the design asks); `PgStorage::index_keyless_jobs`
/// (`queue-postgres/migrations/optional`) makes it partial and plain again, each
/// leaving exactly one unique index on the key, twice in a row a no-op,
/// and with the partial form only the upsert naming its predicate works.
#[tokio::test]
async fn an_application_can_upsert_on_the_unique_key_with_either_index() {
    let (schema, pool, storage) = common::storage_in_new_schema().await;
    assert!(storage.keyless_jobs_indexed().await.expect("read"));
    let upsert = |predicate: &str| {
        format!(
            "INSERT INTO job_queue (queue_name, unique_key, payload, max_attempts) \
             VALUES ('q', 'k', '{{}}', 1) ON CONFLICT (queue_name, unique_key) {predicate} DO NOTHING"
        )
    };
    let bare = upsert("");
    let named = upsert("WHERE unique_key IS NOT NULL");
    for _ in 0..2 {
        sqlx::raw_sql(sqlx::AssertSqlSafe(bare.clone()))
            .execute(&pool)
            .await
            .expect("ON CONFLICT infers the plain unique index");
    }

    for _ in 0..2 {
        storage.index_keyless_jobs(false).await.expect("unindex");
    }
    assert!(!storage.keyless_jobs_indexed().await.expect("read"));
    let indexes = unique_key_index(&pool, schema.name()).await;
    assert!(
        matches!(indexes.as_slice(), [one] if one.starts_with("CREATE UNIQUE INDEX job_queue_unique_key ON")
            && one.ends_with("WHERE (unique_key IS NOT NULL)")),
        "{indexes:?}"
    );
    let err = sqlx::raw_sql(sqlx::AssertSqlSafe(bare.clone()))
        .execute(&pool)
        .await
        .expect_err("a bare ON CONFLICT cannot infer a partial index");
    assert!(
        err.to_string()
            .contains("no unique or exclusion constraint matching"),
        "{err}"
    );
    for _ in 0..2 {
        sqlx::raw_sql(sqlx::AssertSqlSafe(named.clone()))
            .execute(&pool)
            .await
            .expect("ON CONFLICT naming the predicate infers the partial index");
    }

    for _ in 0..2 {
        storage.index_keyless_jobs(true).await.expect("index");
    }
    assert!(storage.keyless_jobs_indexed().await.expect("read"));
    let indexes = unique_key_index(&pool, schema.name()).await;
    assert_eq!(
        indexes,
        [format!(
            "CREATE UNIQUE INDEX job_queue_unique_key ON {}.job_queue USING btree (queue_name, unique_key)",
            schema.name()
        )]
    );
    for statement in [bare, named] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
            .execute(&pool)
            .await
            .expect("both forms infer the plain index");
    }
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM job_queue")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(count, 1);
    finish(schema, pool).await;
}

#[tokio::test]
async fn the_unique_key_index_form_of_an_unmigrated_schema_is_an_error() {
    let schema = TestSchema::create().await;
    let pool = schema.pool().await;
    let storage = queue_postgres::PgStorage::from_pool(pool.clone())
        .with_schema(schema.name())
        .expect("valid name");
    for result in [
        storage.keyless_jobs_indexed().await.map(|_| ()),
        storage.index_keyless_jobs(false).await,
    ] {
        let err = result.expect_err("no index to read");
        assert!(
            matches!(err, QueueError::Backend { .. })
                && err.to_string().contains("run the migrations"),
            "{err:?}"
        );
    }
    finish(schema, pool).await;
}

#[tokio::test]
async fn a_lease_without_a_holder_is_refused_by_the_schema() {
    let (schema, pool) = migrated().await;
    let err = sqlx::query(
        "INSERT INTO job_queue (queue_name, payload, max_attempts, lease_until) \
         VALUES ('q', '{}', 1, now())",
    )
    .execute(&pool)
    .await
    .expect_err("check constraint");
    assert!(
        err.to_string().contains("job_queue_lease_has_holder"),
        "{err}"
    );
    finish(schema, pool).await;
}

/// A schema migrated by a newer release (a version this library does not
/// know is recorded): migrating again applies nothing and fails nothing,
/// so older workers keep running during a rolling upgrade.
#[tokio::test]
async fn a_schema_from_a_newer_release_is_left_alone() {
    let (schema, pool) = migrated().await;
    sqlx::query(
        "INSERT INTO queue_schema_migrations (version, name, checksum) VALUES (999, 'from_the_future', 1)",
    )
    .execute(&pool)
    .await
    .expect("record a newer version");
    assert_eq!(
        migrate(&pool, schema.name()).await.expect("migrate"),
        Vec::<u32>::new()
    );
    finish(schema, pool).await;
}

/// A read-only database (a replica, or a disk the server made read-only):
/// every write is a typed error and nothing is half-written.
#[tokio::test]
async fn a_read_only_database_refuses_writes_with_a_typed_error() {
    use queue_core::{NewJob, Storage};
    use queue_postgres::PgStorage;
    use sqlx::postgres::PgPoolOptions;

    let (schema, pool) = migrated().await;
    let read_only = PgPoolOptions::new()
        .max_connections(2)
        .connect_with(
            schema
                .connect_options()
                .options([("default_transaction_read_only", "on")]),
        )
        .await
        .expect("connect read-only");
    let storage = PgStorage::from_pool(read_only.clone())
        .with_schema(schema.name())
        .expect("schema");
    let jobs = vec![
        NewJob::new("emails", serde_json::json!({ "n": 1 })),
        NewJob::new("emails", serde_json::json!({ "n": 2 })),
    ];
    let err = storage.enqueue_batch(jobs).await.expect_err("read-only");
    assert!(matches!(err, QueueError::Backend(_)), "{err:?}");
    assert!(err.to_string().contains("read-only"), "{err}");
    assert!(storage.stats().await.expect("reads still work").is_empty());
    let live: i64 = sqlx::query_scalar("SELECT count(*) FROM job_queue")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(live, 0, "nothing written");
    read_only.close().await;
    finish(schema, pool).await;
}

/// A schema of the release before group limits (migration 0015) holding
/// a pending, a scheduled and an expired leased job, a finished one and a
/// queue with a concurrency limit: after migration 0016 every job is
/// where it was and claimed when it should be, the limit still holds, and
/// the queue takes group limits (a group's own limit included) that its
/// claims keep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_to_group_limits_keeps_jobs_and_limits() {
    use queue_core::{GroupKey, JobFilter, NewJob, QueueLimits, QueueName, Storage};
    use queue_postgres::PgStorage;
    use serde_json::json;

    let (schema, pool) = common::schema_at(
        15,
        "INSERT INTO job_queue (queue_name, payload) VALUES ('q', '\"pending\"');
         INSERT INTO job_queue (queue_name, payload, available_at)
             VALUES ('q', '\"scheduled\"', now() + interval '1 hour');
         INSERT INTO job_queue (queue_name, payload, attempts, lease_until, locked_by)
             VALUES ('q', '\"leased\"', 1, now() - interval '1 second', 'gone');
         INSERT INTO job_history (id, queue_name, priority, payload, status_final, attempts,
                                  max_attempts, created_at, finished_at)
             VALUES (1000, 'q', 0, '\"done\"', 'completed', 1, 20, now(), now());
         INSERT INTO queue_config (queue_name, concurrency_limit) VALUES ('q', 2);",
    )
    .await;
    let storage = PgStorage::from_pool(pool.clone())
        .with_schema(schema.name())
        .expect("valid");
    // 0017 (listing by queue), 0018 (priority aging), 0019 (samples) and
    // 0020 (fair groups) come with it, and change none of this.
    assert_eq!(
        storage.migrate().await.expect("migrate"),
        vec![16, 17, 18, 19, 20, 21, 22, 23, 24]
    );
    let queue = QueueName::new("q").expect("valid");
    let claim = |n: u32| claim_of(&queue, n);
    let history = storage
        .get_history(queue_core::JobId(1000))
        .await
        .expect("history");
    assert_eq!(history.map(|h| h.group_key), Some(None));
    // The leased job holds one of the two slots until reclaim.
    let first = storage.dequeue(&claim(10)).await.expect("dequeue");
    assert_eq!(
        first.iter().map(|j| j.payload.clone()).collect::<Vec<_>>(),
        vec![json!("pending")]
    );
    assert!(first[0].group_key.is_none());
    assert_eq!(
        storage.reclaim_stalled(10).await.expect("reclaim").requeued,
        1
    );

    let limits = QueueLimits {
        concurrency: Some(2),
        group_concurrency: Some(1),
        ..QueueLimits::default()
    };
    storage
        .configure_queue(&queue, &limits)
        .await
        .expect("configure");
    let big = GroupKey::new("big").expect("valid");
    storage
        .set_group_limit(&queue, &big, Some(2))
        .await
        .expect("set_group_limit");
    let jobs = ["a", "a", "big", "big", "big"]
        .map(|group| NewJob::new("q", json!(group)).priority(1).group_key(group));
    storage.enqueue_batch(jobs.into()).await.expect("enqueue");
    let lease = first[0].lease().expect("leased");
    storage.ack(&lease, None).await.expect("ack");
    // Concurrency 2 across the queue: one of a (its limit), one of big.
    let second = storage.dequeue(&claim(10)).await.expect("dequeue");
    let groups: Vec<_> = second.iter().map(|j| j.group_key.clone()).collect();
    assert_eq!(
        groups,
        vec![Some(GroupKey::new("a").expect("valid")), Some(big.clone())]
    );
    let configs = storage.queue_configs().await.expect("configs");
    assert_eq!(configs[0].limits.group_concurrency, Some(1));
    let live = storage
        .list_jobs(&JobFilter::default())
        .await
        .expect("list");
    assert_eq!(
        live.jobs.len(),
        7,
        "the requeued one, the scheduled one and the five grouped"
    );
    finish(schema, pool).await;
}

/// A schema of the release before priority aging (migration 0016)
/// holding jobs of two priorities, due long ago and just now, and a queue
/// with a concurrency limit and a group concurrency: after migration 0018
/// the jobs are claimed in plain order until the queue is given a period,
/// then by effective priority within the same limits; the previous
/// release's pick (`queue_pick_limited` of 0016, which its workers call)
/// is still there and answers in plain order; lifting the period restores
/// the plain order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_to_priority_aging_keeps_jobs_and_limits() {
    use std::time::Duration;

    use queue_core::{QueueLimits, QueueName, Storage};
    use queue_postgres::PgStorage;
    use serde_json::json;

    let (schema, pool) = common::schema_at(
        16,
        "INSERT INTO job_queue (queue_name, payload, priority, available_at, updated_at)
             VALUES ('q', '\"old low\"', 0, now() - interval '10 minutes',
                     now() - interval '10 minutes');
         INSERT INTO job_queue (queue_name, payload, priority, group_key)
             VALUES ('q', '\"new high a\"', 3, 'a'), ('q', '\"new high a2\"', 3, 'a'),
                    ('q', '\"new mid\"', 1, NULL);
         INSERT INTO queue_config (queue_name, concurrency_limit, group_concurrency_limit)
             VALUES ('q', 2, 1);",
    )
    .await;
    let storage = PgStorage::from_pool(pool.clone())
        .with_schema(schema.name())
        .expect("valid");
    assert_eq!(
        storage.migrate().await.expect("migrate"),
        vec![17, 18, 19, 20, 21, 22, 23, 24]
    );
    let queue = QueueName::new("q").expect("valid");
    let claim = |n: u32| claim_of(&queue, n);
    // The previous release's pick, as its workers call it: plain order,
    // group a held to one (nothing claimed, nothing locked: no lock).
    let old_pick: Vec<String> = sqlx::query_scalar(
        "SELECT j.payload::text FROM queue_pick_limited('q', 10, now(), FALSE, TRUE, 1) p
         JOIN job_queue j ON j.id = p.pick_id ORDER BY p.pick_priority DESC, p.pick_available_at",
    )
    .fetch_all(&pool)
    .await
    .expect("the 0016 pick");
    assert_eq!(
        old_pick,
        vec!["\"new high a\"", "\"new mid\"", "\"old low\""]
    );

    let limits = QueueLimits {
        concurrency: Some(2),
        group_concurrency: Some(1),
        priority_aging: Some(Duration::from_secs(60)),
        ..QueueLimits::default()
    };
    storage
        .configure_queue(&queue, &limits)
        .await
        .expect("configure");
    let configs = storage.queue_configs().await.expect("configs");
    assert_eq!(configs[0].limits, limits);
    // Ten minutes at one level a minute: the old job is at 10, first; then
    // one of group a (its limit); the concurrency limit stops the claim.
    let first = storage.dequeue(&claim(10)).await.expect("dequeue");
    assert_eq!(
        payloads(&first),
        vec![json!("old low"), json!("new high a")]
    );
    assert_eq!(first[0].priority, 0, "stored priority unchanged");
    for job in &first {
        let lease = job.lease().expect("leased");
        storage.ack(&lease, None).await.expect("ack");
    }
    storage
        .configure_queue(
            &queue,
            &QueueLimits {
                priority_aging: None,
                ..limits
            },
        )
        .await
        .expect("lift the period");
    let second = storage.dequeue(&claim(10)).await.expect("dequeue");
    assert_eq!(
        payloads(&second),
        vec![json!("new high a2"), json!("new mid")]
    );
    finish(schema, pool).await;
}

/// A schema of the release before fair groups (migration 0019) holding a
/// backlog of group a, one job of group b, one without a group, a leased
/// job of a and a scheduled one of b, in a queue with a concurrency limit:
/// after migration 0020 the jobs are claimed in plain order until the
/// queue is made fair, then a, b and the jobs without a group in turn
/// (a served longest ago: never), within the same limit; the previous
/// release's pick (0018's `queue_pick_limited`, which its workers call) is
/// still there and answers in plain order; the leased and scheduled jobs
/// are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_to_fair_groups_keeps_jobs_and_limits() {
    use queue_core::{JobFilter, QueueLimits, QueueName, Storage};
    use queue_postgres::PgStorage;
    use serde_json::json;

    let (schema, pool) = common::schema_at(
        19,
        "INSERT INTO job_queue (queue_name, payload, group_key, available_at, updated_at)
             VALUES ('q', '\"a1\"', 'a', now() - interval '5 minutes', now() - interval '5 minutes'),
                    ('q', '\"a2\"', 'a', now() - interval '4 minutes', now() - interval '4 minutes'),
                    ('q', '\"a3\"', 'a', now() - interval '3 minutes', now() - interval '3 minutes'),
                    ('q', '\"b1\"', 'b', now() - interval '2 minutes', now() - interval '2 minutes'),
                    ('q', '\"none\"', NULL, now() - interval '1 minute', now() - interval '1 minute');
         INSERT INTO job_queue (queue_name, payload, group_key, available_at, updated_at,
                                lease_until, locked_by, attempts)
             VALUES ('q', '\"a leased\"', 'a', now() - interval '9 minutes',
                     now() - interval '9 minutes', now() + interval '1 hour', 'old', 1);
         INSERT INTO job_queue (queue_name, payload, group_key, available_at)
             VALUES ('q', '\"b later\"', 'b', now() + interval '1 hour');
         INSERT INTO queue_config (queue_name, concurrency_limit) VALUES ('q', 4);",
    )
    .await;
    let storage = PgStorage::from_pool(pool.clone())
        .with_schema(schema.name())
        .expect("valid");
    assert_eq!(
        storage.migrate().await.expect("migrate"),
        vec![20, 21, 22, 23, 24]
    );
    let queue = QueueName::new("q").expect("valid");
    let claim = |n: u32| claim_of(&queue, n);
    // The previous release's pick, as its workers call it: plain order.
    let old_pick: Vec<String> = sqlx::query_scalar(
        "SELECT j.payload::text FROM queue_pick_limited('q', 3, now(), FALSE, FALSE, NULL, NULL) p
         JOIN job_queue j ON j.id = p.pick_id ORDER BY p.pick_available_at",
    )
    .fetch_all(&pool)
    .await
    .expect("the 0018 pick");
    assert_eq!(old_pick, vec!["\"a1\"", "\"a2\"", "\"a3\""]);

    // The fair index is built by the first configure_queue that makes a
    // queue fair, not by the migration: enqueues pay for it only then.
    let fair_index = || async {
        sqlx::query_scalar::<_, bool>("SELECT to_regclass('job_queue_fair') IS NOT NULL")
            .fetch_one(&pool)
            .await
            .expect("the index's presence")
    };
    assert!(!fair_index().await, "migration 0020 built job_queue_fair");
    let limits = QueueLimits {
        concurrency: Some(4),
        fair_groups: true,
        ..QueueLimits::default()
    };
    storage
        .configure_queue(&queue, &limits)
        .await
        .expect("configure");
    assert!(
        fair_index().await,
        "configure_queue did not build job_queue_fair"
    );
    let configs = storage.queue_configs().await.expect("configs");
    assert_eq!(configs[0].limits, limits);
    // Three slots left of four: a, b and the jobs without a group, oldest
    // head first (no group has been served yet).
    let first = storage.dequeue(&claim(10)).await.expect("dequeue");
    assert_eq!(
        payloads(&first),
        vec![json!("a1"), json!("b1"), json!("none")]
    );
    for job in &first {
        let lease = job.lease().expect("leased");
        storage.ack(&lease, None).await.expect("ack");
    }
    let second = storage.dequeue(&claim(10)).await.expect("dequeue");
    assert_eq!(payloads(&second), vec![json!("a2"), json!("a3")]);
    let live = storage
        .list_jobs(&JobFilter::default())
        .await
        .expect("list");
    assert_eq!(
        live.jobs.len(),
        4,
        "the two just claimed, the leased one and the scheduled one"
    );
    finish(schema, pool).await;
}

/// A database of the release before group weights (migration 0021), with
/// a fair queue whose group "a" was served at turn 5: the upgrade keeps
/// the turn, and weights apply from the next claim, counted across
/// claims.
#[tokio::test]
async fn an_upgrade_to_group_weights_keeps_the_turns_of_fair_queues() {
    use queue_core::{GroupKey, QueueLimits, QueueName, Storage};
    use queue_postgres::PgStorage;
    use serde_json::json;

    let (schema, pool) = common::schema_at(
        20,
        "INSERT INTO job_queue (queue_name, payload, group_key, available_at, updated_at)
             VALUES ('q', '\"a1\"', 'a', now() - interval '4 minutes', now()),
                    ('q', '\"a2\"', 'a', now() - interval '3 minutes', now()),
                    ('q', '\"a3\"', 'a', now() - interval '2 minutes', now()),
                    ('q', '\"b1\"', 'b', now() - interval '1 minute', now());
         INSERT INTO queue_config (queue_name, fair_groups, claim_count) VALUES ('q', TRUE, 5);
         INSERT INTO job_group_turn (queue_name, group_key, turn) VALUES ('q', 'a', 5);",
    )
    .await;
    let storage = PgStorage::from_pool(pool.clone())
        .with_schema(schema.name())
        .expect("valid");
    assert_eq!(
        storage.migrate().await.expect("migrate"),
        vec![21, 22, 23, 24]
    );
    let queue = QueueName::new("q").expect("valid");
    let fair = QueueLimits {
        fair_groups: true,
        ..QueueLimits::default()
    };
    storage
        .configure_queue(&queue, &fair)
        .await
        .expect("configure");
    let claim = |n: u32| claim_of(&queue, n);
    let first = storage.dequeue(&claim(1)).await.expect("dequeue");
    assert_eq!(
        payloads(&first),
        vec![json!("b1")],
        "a's turn, kept by the upgrade, is later"
    );
    storage
        .set_group_weight(&queue, &GroupKey::new("a").expect("valid"), Some(2))
        .await
        .expect("set_group_weight");
    let second = storage.dequeue(&claim(1)).await.expect("dequeue");
    assert_eq!(payloads(&second), vec![json!("a1")]);
    let turn: (i64, i32) = sqlx::query_as(
        "SELECT turn, taken FROM job_group_turn WHERE queue_name = 'q' AND group_key = 'a'",
    )
    .fetch_one(&pool)
    .await
    .expect("a's turn");
    assert_eq!(
        turn,
        (5, 1),
        "a keeps its turn, one job of its weight of 2 taken"
    );
    let third = storage.dequeue(&claim(1)).await.expect("dequeue");
    assert_eq!(payloads(&third), vec![json!("a2")]);
    let turn: (i64, i32) = sqlx::query_as(
        "SELECT turn, taken FROM job_group_turn WHERE queue_name = 'q' AND group_key = 'a'",
    )
    .fetch_one(&pool)
    .await
    .expect("a's turn");
    assert_eq!(
        turn,
        (8, 0),
        "the second job moved a's turn to the claim count"
    );
    finish(schema, pool).await;
}

/// A database of the release before workflows (migration 0022) holding a
/// pending, a leased and a scheduled job: the upgrade keeps all three as
/// they were, and a job enqueued afterwards may depend on them (none of
/// them was marked as having dependants before): it waits until the lease
/// is acked and the other two have completed.
#[tokio::test]
async fn an_upgrade_to_workflows_keeps_jobs_that_new_jobs_can_depend_on() {
    use queue_core::{JobFilter, JobId, JobState, Lease, NewJob, QueueName, Storage, WorkerId};
    use queue_postgres::PgStorage;
    use serde_json::json;

    let (schema, pool) = common::schema_at(
        21,
        "INSERT INTO job_queue (id, queue_name, payload, available_at, updated_at)
             VALUES (1, 'q', '\"pending\"', now() - interval '1 minute', now() - interval '1 minute'),
                    (3, 'q', '\"scheduled\"', now() + interval '1 hour', now());
         INSERT INTO job_queue (id, queue_name, payload, available_at, updated_at, attempts,
                                lease_until, locked_by, first_locked_at)
             VALUES (2, 'q', '\"leased\"', now() - interval '2 minutes', now(), 1,
                     now() + interval '5 minutes', 'w-old', now());
         SELECT setval('job_queue_id_seq', 3);",
    )
    .await;
    let storage = PgStorage::from_pool(pool.clone())
        .with_schema(schema.name())
        .expect("valid");
    assert_eq!(storage.migrate().await.expect("migrate"), vec![22, 23, 24]);
    let now = storage.now().await.expect("now");
    let states: Vec<(i64, JobState)> = storage
        .list_jobs(&JobFilter::default())
        .await
        .expect("list")
        .jobs
        .iter()
        .map(|job| (job.id.get(), job.state(now)))
        .collect();
    assert_eq!(
        states,
        [
            (3, JobState::Scheduled),
            (2, JobState::Running),
            (1, JobState::Pending)
        ]
    );
    let after = storage
        .enqueue(NewJob::new("after", json!({})).depends_on_all([JobId(1), JobId(2), JobId(3)]))
        .await
        .expect("enqueue")
        .id;
    let job_state = |id: JobId| {
        let storage = &storage;
        async move {
            let now = storage.now().await.expect("now");
            storage
                .get_job(id)
                .await
                .expect("get_job")
                .map(|job| job.state(now))
        }
    };
    assert_eq!(job_state(after).await, Some(JobState::Waiting));
    let leased = Lease {
        job_id: JobId(2),
        worker_id: WorkerId::new("w-old").expect("valid"),
        attempt: 1,
    };
    storage.ack(&leased, None).await.expect("ack the old lease");
    let pending = storage
        .dequeue(&claim_of(&QueueName::new("q").expect("valid"), 1))
        .await;
    let pending = pending.expect("dequeue");
    assert_eq!(payloads(&pending), vec![json!("pending")]);
    storage
        .ack(&pending[0].lease().expect("leased"), None)
        .await
        .expect("ack");
    assert_eq!(
        job_state(after).await,
        Some(JobState::Waiting),
        "the scheduled job is still to run"
    );
    let moved = storage
        .run_now(&JobFilter {
            limit: 10,
            ..JobFilter::default()
        })
        .await
        .expect("run_now");
    assert_eq!(moved, 1);
    let scheduled = storage
        .dequeue(&claim_of(&QueueName::new("q").expect("valid"), 1))
        .await
        .expect("dequeue");
    assert_eq!(payloads(&scheduled), vec![json!("scheduled")]);
    storage
        .ack(&scheduled[0].lease().expect("leased"), None)
        .await
        .expect("ack");
    assert_eq!(job_state(after).await, Some(JobState::Pending));
    finish(schema, pool).await;
}

/// A database at migration 0022 with a workflow in flight (a leased job
/// another waits for, and a pending one whose dependant is cancelled if it
/// fails): after the upgrade to counting at commit (0023), the ack
/// releases the first dependant, claimable at once, and the discard
/// cancels the second, naming its dependency.
#[tokio::test]
async fn an_upgrade_to_counting_at_commit_keeps_workflows_in_flight() {
    use queue_core::{FinalStatus, JobId, JobState, Lease, QueueName, Storage, WorkerId};
    use queue_postgres::PgStorage;

    let (schema, pool) = common::schema_at(
        22,
        "INSERT INTO job_queue (id, queue_name, payload, available_at, updated_at, attempts,
                                lease_until, locked_by, first_locked_at, has_dependants)
             VALUES (1, 'q', '\"leased\"', now() - interval '2 minutes', now(), 1,
                     now() + interval '5 minutes', 'w-old', now(), true);
         INSERT INTO job_queue (id, queue_name, payload, available_at, updated_at, has_dependants)
             VALUES (2, 'after', '\"released\"', '9999-12-31 23:59:59.999999+00', now(), false),
                    (3, 'q', '\"discarded\"', now() + interval '1 hour', now(), true),
                    (4, 'after', '\"cancelled\"', '9999-12-31 23:59:59.999999+00', now(), false);
         INSERT INTO job_dependency (job_id, depends_on, unfinished)
             VALUES (2, 1, true), (4, 3, true);
         INSERT INTO job_waiting (job_id, remaining, run_at, on_failure)
             VALUES (2, 1, now() - interval '1 minute', 'cancel'),
                    (4, 1, now() - interval '1 minute', 'cancel');
         SELECT setval('job_queue_id_seq', 4);",
    )
    .await;
    let storage = PgStorage::from_pool(pool.clone())
        .with_schema(schema.name())
        .expect("valid");
    assert_eq!(storage.migrate().await.expect("migrate"), vec![23, 24]);
    let now = storage.now().await.expect("now");
    let waiting = storage.get_job(JobId(2)).await.expect("get").expect("live");
    assert_eq!(waiting.state(now), JobState::Waiting);
    let leased = Lease {
        job_id: JobId(1),
        worker_id: WorkerId::new("w-old").expect("valid"),
        attempt: 1,
    };
    storage.ack(&leased, None).await.expect("ack the old lease");
    let released = storage
        .dequeue(&claim_of(&QueueName::new("after").expect("valid"), 10))
        .await
        .expect("dequeue");
    assert_eq!(payloads(&released), vec![serde_json::json!("released")]);
    storage.discard(JobId(3)).await.expect("discard");
    let cancelled = storage
        .get_history(JobId(4))
        .await
        .expect("history")
        .expect("archived");
    assert_eq!(cancelled.status, FinalStatus::Cancelled);
    assert_eq!(
        cancelled.last_error.expect("a reason")["dependency"],
        serde_json::json!(3)
    );
    finish(schema, pool).await;
}
