//! The conformance suite and the model test on a three-node MariaDB Galera
//! cluster (scripts/galera.sh; `QUEUE_TEST_GALERA_URLS`, the nodes' URLs
//! separated by commas, first node first): each case's storage on the
//! first node and its second handle on the second, so every promise the
//! suite checks across handles (limits, unique keys, periodic fires,
//! claims) is checked across two writers of the cluster. Without the
//! variable every case fails naming it.

use async_trait::async_trait;
use queue_core::Clock;
use queue_mysql::MySqlStorage;
use queue_testkit::harness::mysql::TestDatabase;
use queue_testkit::model::{ModelConfig, check_against_model};
use queue_testkit::suite::{Fixture, StorageFactory};

/// The first two nodes' server URLs.
fn nodes() -> (String, String) {
    let urls = std::env::var("QUEUE_TEST_GALERA_URLS").unwrap_or_else(|_| {
        panic!(
            "QUEUE_TEST_GALERA_URLS is not set: the URLs of a Galera cluster's nodes, \
             comma-separated (scripts/galera.sh start; scripts/test.sh sets it)"
        )
    });
    let mut nodes = urls.split(',').map(str::to_owned);
    match (nodes.next(), nodes.next()) {
        (Some(first), Some(second)) => (first, second),
        _ => panic!("QUEUE_TEST_GALERA_URLS names fewer than two nodes: {urls}"),
    }
}

/// A new database on the cluster: the storage on node 1, the second
/// handle on node 2.
struct GaleraFactory;

#[async_trait]
impl StorageFactory for GaleraFactory {
    type Storage = MySqlStorage;

    async fn create(&self, clock: Clock) -> Fixture<MySqlStorage> {
        let (first, second) = nodes();
        let db = TestDatabase::create_on(first).await;
        let storage = MySqlStorage::connect_with_size(&db.url(), 4).expect("pool on node 1");
        storage.migrate().await.expect("migrate on node 1");
        let other = queue_core::with_database(&second, db.name());
        let second_clock = clock.clone();
        Fixture::new(storage.with_clock(clock))
            .with_teardown(db.drop_database())
            .with_second_handle(async move {
                MySqlStorage::connect_with_size(&other, 4)
                    .expect("a second pool, on node 2")
                    .with_clock(second_clock)
            })
    }
}

queue_testkit::conformance_tests!(galera: GaleraFactory);

/// Ignored until the bug it found is fixed: racing periodic fires through
/// two nodes sometimes enqueue one fire's job twice (seed 1592590337,
/// step 5; docs/high-availability.md, "MariaDB Galera"). It passed once
/// and failed once in two full runs. Run it with `--ignored`.
#[test]
#[ignore = "finds a double periodic fire across Galera nodes (issue 37): run with --ignored"]
fn galera_agrees_with_the_model_across_two_nodes() {
    check_against_model(&GaleraFactory, ModelConfig::default());
}

/// Racing enqueues of one unique key, two through each of two nodes,
/// round after round: every racer answers the same job, and exactly one
/// of them created it. Ignored with the model test: it reproduces that
/// finding in seconds (here it failed at rounds 386, 562 and 792 of
/// 1,000). The losing racer's transaction on the other node reports its
/// INSERT and its COMMIT done (no error reaches `insert_all`; the
/// server's general log shows BEGIN, INSERT, `SELECT LAST_INSERT_ID()`,
/// COMMIT on each node), yet its row is not there when read through the
/// same node right after, nor on any node later; the server's own client
/// gets 1213 for a COMMIT after a brute-force abort. Issue 37.
#[tokio::test]
#[ignore = "finds an enqueue reported created but lost across Galera nodes (issue 37): run with --ignored"]
async fn racing_enqueues_of_one_key_through_two_nodes_give_one_job() {
    use queue_core::{NewJob, Storage};
    let clock = queue_core::ManualClock::new(chrono::Utc::now());
    let mut fixture = GaleraFactory.create(Clock::Manual(clock)).await;
    let second = fixture.take_second_handle().expect("a second handle").await;
    let (first, teardown) = fixture.into_parts();
    for round in 0..1000 {
        let key = format!("k{round}");
        let racers = [&first, &second, &first, &second].map(|storage| {
            let storage = storage.clone();
            let key = key.clone();
            tokio::spawn(async move {
                storage
                    .enqueue(
                        NewJob::new("q", serde_json::json!(1))
                            .unique_key(key)
                            .priority(-1)
                            .delay(std::time::Duration::from_secs(26)),
                    )
                    .await
            })
        });
        let mut outcomes = Vec::new();
        for racer in racers {
            outcomes.push(racer.await.expect("racer").expect("enqueue"));
        }
        let created = outcomes.iter().filter(|o| !o.existed).count();
        assert!(
            created == 1 && outcomes.iter().all(|o| o.id == outcomes[0].id),
            "round {round}: {outcomes:?}"
        );
    }
    if let Some(teardown) = teardown {
        teardown.await;
    }
}
