//! Opening databases: migrations, defaults, and every kind of bad file.

use queue_core::QueueError;
use queue_sqlite::{MIGRATIONS, SqliteStorage, migrate};

fn url(path: &std::path::Path, mode: &str) -> String {
    format!("sqlite://{}?mode={mode}", path.display())
}

fn assert_names_path(error: &QueueError, path: &std::path::Path) {
    let message = std::error::Error::source(error)
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(
        message.contains(&path.display().to_string()),
        "error does not name {}: {message}",
        path.display()
    );
}

async fn table_count(path: &std::path::Path) -> i64 {
    let pool = sqlx::SqlitePool::connect(&url(path, "ro"))
        .await
        .expect("open read-only");
    sqlx::query_scalar("SELECT count(*) FROM sqlite_schema")
        .fetch_one(&pool)
        .await
        .expect("count")
}

#[tokio::test]
async fn memory_database_migrates_once_and_fills_defaults() {
    let storage = SqliteStorage::connect("sqlite::memory:")
        .await
        .expect("connect");
    let again = migrate(storage.pool(), storage.path())
        .await
        .expect("migrate");
    assert!(again.is_empty(), "second migrate applied {again:?}");
    let before = storage
        .database_now()
        .await
        .expect("now")
        .timestamp_micros();
    sqlx::query("INSERT INTO job_queue (queue_name, payload) VALUES ('q', '{}')")
        .execute(storage.pool())
        .await
        .expect("plain insert");
    let (priority, attempts, max_attempts, available_at, created_at, updated_at): (
        i64,
        i64,
        i64,
        i64,
        i64,
        i64,
    ) = sqlx::query_as(
        "SELECT priority, attempts, max_attempts, available_at, created_at, updated_at FROM job_queue",
    )
    .fetch_one(storage.pool())
    .await
    .expect("read back");
    assert_eq!((priority, attempts, max_attempts), (0, 0, 20));
    for time in [available_at, created_at, updated_at] {
        assert!(
            (before - 1_000..=before + 60_000_000).contains(&time),
            "default time {time} not near now {before}"
        );
    }
}

#[tokio::test]
async fn file_database_uses_wal_and_reopens_without_migrating() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("queue.db");
    let first = SqliteStorage::connect(&url(&path, "rwc"))
        .await
        .expect("create");
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(first.pool())
        .await
        .expect("journal mode");
    assert_eq!(mode, "wal");
    let second = SqliteStorage::connect(&url(&path, "rwc"))
        .await
        .expect("reopen");
    let versions: Vec<i64> = sqlx::query_scalar("SELECT version FROM queue_schema_migrations")
        .fetch_all(second.pool())
        .await
        .expect("ledger");
    assert_eq!(versions.len(), MIGRATIONS.len());
}

#[tokio::test]
async fn directory_instead_of_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let error = SqliteStorage::connect(&url(dir.path(), "rwc"))
        .await
        .expect_err("a directory is not a database");
    assert!(matches!(error, QueueError::Backend(_)), "{error:?}");
    assert_names_path(&error, dir.path());
}

#[tokio::test]
async fn corrupt_file_is_an_error_naming_it_and_is_left_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("corrupt.db");
    let garbage: Vec<u8> = (0..8192u32).map(|i| (i * 7 + 13) as u8).collect();
    std::fs::write(&path, &garbage).expect("write garbage");
    let error = SqliteStorage::connect(&url(&path, "rwc"))
        .await
        .expect_err("garbage is not a database");
    assert_names_path(&error, &path);
    assert_eq!(std::fs::read(&path).expect("read back"), garbage);
}

#[tokio::test]
async fn read_only_file_is_an_error_naming_it_and_nothing_is_migrated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("empty.db");
    // An existing, empty database file opened without write access.
    drop(
        sqlx::SqlitePool::connect(&url(&path, "rwc"))
            .await
            .expect("create empty database"),
    );
    let error = SqliteStorage::connect(&url(&path, "ro"))
        .await
        .expect_err("a read-only database cannot be migrated");
    assert_names_path(&error, &path);
    assert_eq!(table_count(&path).await, 0, "something was migrated");
}

#[tokio::test]
async fn file_locked_by_another_program_is_unavailable_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("locked.db");
    // Another program holds an exclusive lock on a database in rollback
    // journal mode: nobody else may read or write until it lets go.
    let holder = sqlx::SqlitePool::connect(&url(&path, "rwc"))
        .await
        .expect("holder opens");
    let mut lock = holder
        .begin_with("BEGIN EXCLUSIVE")
        .await
        .expect("holder locks");
    sqlx::query("CREATE TABLE other_program (x INTEGER)")
        .execute(&mut *lock)
        .await
        .expect("holder writes");
    let error = SqliteStorage::connect(&url(&path, "rwc"))
        .await
        .expect_err("the lock is held");
    assert!(error.is_transient(), "busy should be transient: {error:?}");
    assert_names_path(&error, &path);
    lock.rollback().await.expect("holder lets go");
    assert_eq!(table_count(&path).await, 0, "something was migrated");
}

#[tokio::test]
async fn edited_migration_is_a_conflict() {
    let storage = SqliteStorage::connect("sqlite::memory:")
        .await
        .expect("connect");
    sqlx::query("UPDATE queue_schema_migrations SET checksum = checksum + 1 WHERE version = 1")
        .execute(storage.pool())
        .await
        .expect("edit the ledger");
    let error = migrate(storage.pool(), storage.path())
        .await
        .expect_err("edited migration");
    assert!(matches!(error, QueueError::Conflict { .. }), "{error:?}");
}

/// `PRAGMA synchronous` as every pooled connection of `storage` sees it
/// (1 = NORMAL, 2 = FULL).
async fn synchronous(storage: &SqliteStorage) -> i64 {
    sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(storage.pool())
        .await
        .expect("read synchronous")
}

#[tokio::test]
async fn synchronous_parameter_sets_the_durability_and_defaults_to_normal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plain = SqliteStorage::connect(&url(&dir.path().join("plain.db"), "rwc"))
        .await
        .expect("connect without the parameter");
    assert_eq!(synchronous(&plain).await, 1);
    let full_url = format!(
        "{}&synchronous=full",
        url(&dir.path().join("full.db"), "rwc")
    );
    let full = SqliteStorage::connect(&full_url)
        .await
        .expect("connect with synchronous=full");
    assert_eq!(synchronous(&full).await, 2);
    let normal_url = format!(
        "sqlite://{}?synchronous=NORMAL&mode=rwc",
        dir.path().join("normal.db").display()
    );
    let normal = SqliteStorage::connect(&normal_url)
        .await
        .expect("connect with synchronous=NORMAL first");
    assert_eq!(synchronous(&normal).await, 1);
}

#[tokio::test]
async fn unknown_synchronous_value_is_an_invalid_url_and_creates_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("off.db");
    let bad = format!("{}&synchronous=off", url(&path, "rwc"));
    match SqliteStorage::connect(&bad).await {
        Err(QueueError::InvalidInput { field, .. }) => assert_eq!(field, "url"),
        other => panic!("expected an invalid url, got {other:?}"),
    }
    assert!(!path.exists(), "the file was created");
}

/// A database migrated by the previous release (version 1 only) with
/// finished jobs upgrades in place: history keeps its rows (snoozes 0),
/// its indexes are back after the rebuild, and 'cancelled' is accepted.
#[tokio::test]
async fn a_version_one_database_upgrades_keeping_its_history() {
    use queue_core::{FinalStatus, JobId, Storage};

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("old.db");
    let pool = sqlx::SqlitePool::connect(&url(&path, "rwc"))
        .await
        .expect("create");
    sqlx::raw_sql(MIGRATIONS[0].sql)
        .execute(&pool)
        .await
        .expect("version 1");
    sqlx::query(
        "CREATE TABLE queue_schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,
         checksum INTEGER NOT NULL, applied_at INTEGER NOT NULL DEFAULT 0)",
    )
    .execute(&pool)
    .await
    .expect("ledger");
    sqlx::query("INSERT INTO queue_schema_migrations (version, name, checksum) VALUES (1, ?1, ?2)")
        .bind(MIGRATIONS[0].name)
        .bind(MIGRATIONS[0].checksum())
        .execute(&pool)
        .await
        .expect("record version 1");
    sqlx::query(
        "INSERT INTO job_history (id, queue_name, priority, payload, status_final, attempts,
         max_attempts, created_at, finished_at) VALUES (7, 'q', 0, '{}', 'completed', 1, 3, 1, 2)",
    )
    .execute(&pool)
    .await
    .expect("an old history row");
    pool.close().await;

    let storage = SqliteStorage::connect(&url(&path, "rw"))
        .await
        .expect("upgrade");
    let record = storage
        .get_history(JobId(7))
        .await
        .expect("read")
        .expect("kept");
    assert_eq!((record.status, record.snoozes), (FinalStatus::Completed, 0));
    let indexes: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'job_history'
         AND name LIKE 'job_history_%'",
    )
    .fetch_one(storage.pool())
    .await
    .expect("indexes");
    assert_eq!(indexes, 3);
    let job = storage
        .enqueue(queue_core::NewJob::new("q", serde_json::json!(1)))
        .await
        .expect("enqueue");
    storage.cancel(job.id).await.expect("cancel");
    let cancelled = storage
        .get_history(job.id)
        .await
        .expect("read")
        .expect("archived");
    assert_eq!(cancelled.status, FinalStatus::Cancelled);
}

#[tokio::test]
async fn an_upgrade_to_throughput_counters_counts_the_history_already_there() {
    use queue_core::Storage;
    let storage = SqliteStorage::connect("sqlite::memory:")
        .await
        .expect("connect");
    // Back to the schema before migration 6, then history written as it
    // was then (no counters), then the upgrade.
    sqlx::raw_sql(
        "DROP TRIGGER job_throughput_added;
         DROP TRIGGER job_throughput_removed;
         DROP TRIGGER job_throughput_changed;
         DROP TABLE job_throughput;
         DELETE FROM queue_schema_migrations WHERE version = 6;",
    )
    .execute(storage.pool())
    .await
    .expect("downgrade");
    let now = storage
        .database_now()
        .await
        .expect("now")
        .timestamp_micros();
    let minute = now / 60_000_000 * 60_000_000;
    for (id, status, finished_at) in [
        (1, "completed", minute - 120_000_000),
        (2, "completed", minute - 120_000_000 + 1),
        (3, "dead_letter", minute - 60_000_000),
        (4, "discarded", minute - 60_000_000),
        (5, "completed", minute),
    ] {
        sqlx::query(
            "INSERT INTO job_history (id, queue_name, priority, payload, status_final, attempts,
                                      max_attempts, created_at, finished_at)
             VALUES (?1, 'q', 0, '{}', ?2, 1, 20, ?3, ?3)",
        )
        .bind(id)
        .bind(status)
        .bind(finished_at)
        .execute(storage.pool())
        .await
        .expect("history");
    }
    let applied = migrate(storage.pool(), storage.path())
        .await
        .expect("migrate");
    assert_eq!(applied, vec![6]);
    let series: Vec<(i64, u64, u64)> = storage
        .throughput(std::time::Duration::from_secs(3_600))
        .await
        .expect("throughput")
        .iter()
        .map(|t| (t.minute.timestamp_micros(), t.completed, t.failed))
        .collect();
    assert_eq!(
        series,
        [
            (minute - 120_000_000, 2, 0),
            (minute - 60_000_000, 0, 1),
            (minute, 1, 0)
        ]
    );
    // And the triggers count what comes after.
    sqlx::query("DELETE FROM job_history WHERE id = 1")
        .execute(storage.pool())
        .await
        .expect("delete");
    let first = storage
        .throughput(std::time::Duration::from_secs(3_600))
        .await
        .expect("throughput");
    assert_eq!(first[0].completed, 1);
}

#[tokio::test]
async fn an_upgrade_to_listing_indexes_indexes_the_jobs_already_there() {
    use queue_core::{JobFilter, JobState, QueueName, Storage};
    let storage = SqliteStorage::connect("sqlite::memory:")
        .await
        .expect("connect");
    // Back to the schema before migration 8, then live jobs written as
    // they were then (one out of attempts), then the upgrade.
    sqlx::raw_sql(
        "DROP INDEX job_queue_queue;
         DROP INDEX job_queue_exhausted;
         DELETE FROM queue_schema_migrations WHERE version = 8;",
    )
    .execute(storage.pool())
    .await
    .expect("downgrade");
    for (id, queue, attempts) in [(1, "a", 0), (2, "b", 3), (3, "a", 0), (4, "b", 0)] {
        sqlx::query(
            "INSERT INTO job_queue (id, queue_name, payload, attempts, max_attempts, available_at)
             VALUES (?1, ?2, '{}', ?3, 3, 0)",
        )
        .bind(id)
        .bind(queue)
        .bind(attempts)
        .execute(storage.pool())
        .await
        .expect("job");
    }
    let applied = migrate(storage.pool(), storage.path())
        .await
        .expect("migrate");
    assert_eq!(applied, vec![8]);
    let ids = |filter: JobFilter| {
        let storage = storage.clone();
        async move {
            let page = storage.list_jobs(&filter).await.expect("list");
            page.jobs.iter().map(|job| job.id.get()).collect::<Vec<_>>()
        }
    };
    let queue = |name| Some(QueueName::new(name).expect("valid"));
    let exhausted = Some(JobState::Exhausted);
    assert_eq!(
        ids(JobFilter {
            queue: queue("a"),
            ..JobFilter::default()
        })
        .await,
        [3, 1]
    );
    assert_eq!(
        ids(JobFilter {
            state: exhausted,
            ..JobFilter::default()
        })
        .await,
        [2]
    );
    assert_eq!(
        ids(JobFilter {
            queue: queue("b"),
            state: exhausted,
            ..JobFilter::default()
        })
        .await,
        [2]
    );
    let stats = storage.stats().await.expect("stats");
    let counts: Vec<_> = stats
        .iter()
        .map(|s| (s.queue.as_str().to_owned(), s.pending, s.exhausted))
        .collect();
    assert_eq!(counts, [("a".to_owned(), 2, 0), ("b".to_owned(), 1, 1)]);
}

#[tokio::test]
async fn an_upgrade_to_group_weights_keeps_the_turns_of_fair_queues() {
    use queue_core::{DequeueRequest, GroupKey, NewJob, QueueLimits, QueueName, Storage, WorkerId};
    let storage = SqliteStorage::connect("sqlite::memory:")
        .await
        .expect("connect");
    let queue = QueueName::new("q").expect("valid");
    let fair = QueueLimits {
        fair_groups: true,
        ..QueueLimits::default()
    };
    storage
        .configure_queue(&queue, &fair)
        .await
        .expect("configure");
    // Back to the schema before migration 11, with a turn written as it
    // was then ("a" served at 5, "b" never), then the upgrade.
    sqlx::raw_sql(
        "DROP TABLE queue_group_weight;
         ALTER TABLE job_group_turn DROP COLUMN taken;
         INSERT INTO job_group_turn (queue_name, group_key, turn) VALUES ('q', 'a', 5);
         UPDATE queue_config SET claim_count = 5 WHERE queue_name = 'q';
         DELETE FROM queue_schema_migrations WHERE version = 11;",
    )
    .execute(storage.pool())
    .await
    .expect("downgrade");
    for group in ["a", "a", "a", "b"] {
        storage
            .enqueue(NewJob::new("q", serde_json::json!(group)).group_key(group))
            .await
            .expect("enqueue");
    }
    let applied = migrate(storage.pool(), storage.path())
        .await
        .expect("migrate");
    assert_eq!(applied, vec![11]);
    let claim = |limit| {
        let storage = storage.clone();
        async move {
            let request = DequeueRequest::new(
                vec![QueueName::new("q").expect("valid")],
                limit,
                std::time::Duration::from_secs(30),
                WorkerId::new("w").expect("valid"),
            )
            .expect("valid request");
            let jobs = storage.dequeue(&request).await.expect("dequeue");
            jobs.iter()
                .map(|job| {
                    job.group_key
                        .as_ref()
                        .map(GroupKey::as_str)
                        .unwrap_or("-")
                        .to_owned()
                })
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        claim(1).await,
        ["b"],
        "a's turn, kept by the upgrade, is later"
    );
    let a = GroupKey::new("a").expect("valid");
    storage
        .set_group_weight(&queue, &a, Some(2))
        .await
        .expect("set_group_weight");
    assert_eq!(claim(1).await, ["a"]);
    let taken: i64 = sqlx::query_scalar("SELECT taken FROM job_group_turn WHERE group_key = 'a'")
        .fetch_one(storage.pool())
        .await
        .expect("taken");
    assert_eq!(taken, 1, "one job of a's weight of 2 taken");
}
