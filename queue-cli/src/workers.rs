//! `workers`: the storage's worker registry, live and silent workers.

use std::fmt::Write as _;
use std::time::Duration;

use queue::{Capability, Storage, WorkerRecord};

use crate::{CliError, output};

/// Lists the registered workers, as a table or as JSON; a storage without
/// the registry is one line naming the capability.
pub(crate) async fn run<S: Storage>(
    storage: &S,
    silent_after: Duration,
    forget_after: Duration,
    json: bool,
) -> Result<(), CliError> {
    storage
        .capabilities()
        .require(Capability::Workers, "list_workers")?;
    let workers = storage.list_workers(silent_after, forget_after).await?;
    if json {
        output::json(&workers)
    } else {
        print!("{}", table(&workers));
        Ok(())
    }
}

/// One line per worker under a header, or a sentence when there is none.
pub(crate) fn table(workers: &[WorkerRecord]) -> String {
    if workers.is_empty() {
        return "no worker is registered\n".to_owned();
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<30} {:<7} {:<20} {:>8} {:<10} {:<27} {:<27} queues",
        "worker", "status", "host", "pid", "version", "started at", "last seen"
    );
    for worker in workers {
        let queues: Vec<String> = (worker.info.queues.iter())
            .map(|q| format!("{}:{}", q.queue, q.concurrency))
            .collect();
        let _ = writeln!(
            out,
            "{:<30} {:<7} {:<20} {:>8} {:<10} {:<27} {:<27} {}",
            worker.info.id,
            worker.status.name(),
            worker.info.host,
            worker.info.pid,
            worker.info.version,
            worker.info.started_at.to_rfc3339(),
            worker.last_seen.to_rfc3339(),
            queues.join(",")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chrono::DateTime;
    use queue::{
        Capabilities, QueueName, Storage, WorkerId, WorkerInfo, WorkerQueue, WorkerStatus,
    };
    use queue_testkit::MemoryStorage;
    use queue_testkit::restricted::Restricted;

    use super::{run, table};

    fn info() -> WorkerInfo {
        WorkerInfo {
            id: WorkerId::new("web-1-4242-ab12").unwrap(),
            host: "web-1".into(),
            pid: 4242,
            version: "0.1.0".into(),
            queues: vec![
                WorkerQueue {
                    queue: QueueName::new("emails").unwrap(),
                    concurrency: 4,
                },
                WorkerQueue {
                    queue: QueueName::new("reports").unwrap(),
                    concurrency: 1,
                },
            ],
            started_at: DateTime::UNIX_EPOCH,
        }
    }

    /// The table has a header and one line per worker with its status,
    /// host, pid, version and queues with their concurrency.
    #[tokio::test]
    async fn the_table_shows_each_worker_on_one_line() {
        let storage = MemoryStorage::new();
        assert_eq!(table(&[]), "no worker is registered\n");
        storage.register_worker(&info()).await.expect("register");
        let listed = (storage.list_workers(Duration::from_secs(60), Duration::from_secs(600)))
            .await
            .expect("list");
        assert_eq!(listed[0].status, WorkerStatus::Live);
        let text = table(&listed);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        let fields: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(
            (fields[0], fields[1], fields[2], fields[3], fields[4]),
            ("web-1-4242-ab12", "live", "web-1", "4242", "0.1.0")
        );
        assert_eq!(fields.last(), Some(&"emails:4,reports:1"));
    }

    /// On a storage without the registry: one line naming the capability.
    #[tokio::test]
    async fn a_storage_without_the_registry_is_one_line_naming_it() {
        let storage = Restricted::new(MemoryStorage::new(), Capabilities::CORE);
        let error = run(
            &storage,
            Duration::from_secs(60),
            Duration::from_secs(600),
            false,
        )
        .await
        .expect_err("refused");
        assert_eq!(error.code, 1);
        assert!(!error.message.contains('\n'), "{}", error.message);
        assert!(error.message.contains("workers"), "{}", error.message);
    }
}
