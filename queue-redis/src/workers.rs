//! The worker registry: two keys of the namespace's global slot,
//! `{ns}:workers` (id -> registration as JSON) and `{ns}:worker_seen`
//! (id by last_seen), kept together by one script per operation.

use std::time::Duration;

use queue_core::backend::{corrupt, stored_instant};
use queue_core::time::duration_micros;
use queue_core::{Result, WorkerAges, WorkerId, WorkerInfo, WorkerRecord};

use crate::{RedisStorage, scripts};

impl RedisStorage {
    pub(crate) async fn register_worker_scripted(&self, worker: &WorkerInfo) -> Result<()> {
        let worker = worker.validate()?;
        let info = serde_json::to_string(&worker)?;
        let args = [self.now_arg(), worker.id.as_str().to_owned(), info];
        let _: i64 = self
            .invoke(&scripts::REGISTER_WORKER, &self.keys.global(), &args)
            .await?;
        Ok(())
    }

    pub(crate) async fn deregister_worker_scripted(&self, id: &WorkerId) -> Result<bool> {
        let args = [id.as_str().to_owned()];
        let removed: i64 = self
            .invoke(&scripts::DEREGISTER_WORKER, &self.keys.global(), &args)
            .await?;
        Ok(removed > 0)
    }

    pub(crate) async fn list_workers_scripted(
        &self,
        silent_after: Duration,
        forget_after: Duration,
    ) -> Result<Vec<WorkerRecord>> {
        WorkerAges::validate(silent_after, forget_after)?;
        let args = [self.now_arg(), duration_micros(forget_after).to_string()];
        let answer: Vec<String> = self
            .invoke(&scripts::LIST_WORKERS, &self.keys.global(), &args)
            .await?;
        let (now, entries) = answer
            .split_first()
            .ok_or_else(|| corrupt("list_workers", "an empty answer"))?;
        let now = stored_instant("now", micros(now)?)?;
        let ages = WorkerAges::at(now, silent_after, forget_after)?;
        let mut records = entries
            .chunks_exact(3)
            .map(|entry| {
                let info: WorkerInfo = serde_json::from_str(&entry[1])
                    .map_err(|_| corrupt("workers", format!("{:?}", entry[1])))?;
                if info.id.as_str() != entry[0] {
                    return Err(corrupt("workers", format!("{:?}", entry[0])));
                }
                let last_seen = stored_instant("worker_seen", micros(&entry[2])?)?;
                Ok(ages.record(info, last_seen))
            })
            .collect::<Result<Vec<_>>>()?;
        records.sort_by(|a, b| a.info.id.cmp(&b.info.id));
        Ok(records)
    }
}

fn micros(text: &str) -> Result<i64> {
    text.parse()
        .map_err(|_| corrupt("worker_seen", format!("{text:?}")))
}
