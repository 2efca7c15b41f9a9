//! The producer: jobs at a steady rate, each with its own unique key,
//! retried through errors under the same key until the enqueue is
//! acknowledged.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use queue::{AnyStorage, NewJob, Storage};
use serde_json::json;
use tokio::time::MissedTickBehavior;

use crate::Failure;
use crate::target::QUEUE;

/// How long one job's enqueue may keep failing before the run gives up.
const RETRY_LIMIT: Duration = Duration::from_secs(90);

/// What the producer saw.
#[derive(Debug, Default)]
pub(crate) struct Produced {
    /// Every acknowledged enqueue: its unique key and the id it returned.
    pub(crate) ids: HashMap<String, i64>,
    /// Keys whose enqueue failed at least once before it was acknowledged:
    /// a failed call may have committed, so a second job under the same
    /// key is the producer's doing, not the queue's.
    pub(crate) ambiguous: HashSet<String>,
    /// Failed enqueue calls.
    pub(crate) errors: u64,
}

/// Enqueues `rate` jobs a second for `duration`.
pub(crate) async fn produce(
    storage: AnyStorage,
    rate: u32,
    duration: Duration,
) -> Result<Produced, Failure> {
    let mut produced = Produced::default();
    let mut tick = tokio::time::interval(Duration::from_secs(1) / rate.max(1));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let end = Instant::now() + duration;
    let mut n: u64 = 0;
    while Instant::now() < end {
        tick.tick().await;
        let key = format!("k{n}");
        let since = Instant::now();
        loop {
            let job = NewJob::new(QUEUE, json!({ "n": n }))
                .unique_key(key.clone())
                .max_attempts(100);
            match storage.enqueue(job).await {
                Ok(outcome) => {
                    produced.ids.insert(key.clone(), outcome.id.get());
                    break;
                }
                Err(error) => {
                    produced.errors += 1;
                    produced.ambiguous.insert(key.clone());
                    if since.elapsed() > RETRY_LIMIT {
                        return Err(Failure(format!(
                            "enqueue of {key} kept failing for {RETRY_LIMIT:?}: {error}"
                        )));
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        n += 1;
    }
    Ok(produced)
}
