//! Periodic fires: the fire is recorded in the hash of schedules kept
//! with its job's queue (`P:schedules`) and the job enqueued in one
//! script, only when no fire at or after it was recorded; and the listing
//! of schedules, merged over the queues.

use std::collections::BTreeMap;

use futures_util::future::try_join_all;
use queue_core::backend::corrupt;
use queue_core::backend::stored_instant;
use queue_core::{EnqueueOutcome, PeriodicFire, QueueError, Result, ScheduleName, ScheduleRecord};

use crate::command::script_cmd;
use crate::enqueue::{outcomes, push_job};
use crate::rows::integer;
use crate::{RedisStorage, keys, scripts};

impl RedisStorage {
    pub(crate) async fn enqueue_periodic_scripted(
        &self,
        fire: &PeriodicFire,
    ) -> Result<Option<EnqueueOutcome>> {
        let fire = fire.validate()?;
        let payload = self.payload_text(&fire.job)?;
        let queue = &fire.job.queue;
        let (last, indexes) = self.register(&[queue], 1).await?;
        let index = indexes
            .first()
            .copied()
            .ok_or_else(|| QueueError::backend("the register script returned no index"))?;
        let id = keys::job_id(last, index)?;
        let mut cmd = script_cmd(&scripts::ENQUEUE_PERIODIC, &self.keys.queue(queue.as_str()));
        cmd.arg(self.now_arg())
            .arg(self.keys.channel())
            .arg(queue.as_str())
            .arg(fire.schedule.as_str())
            .arg(fire.fire_at.timestamp_micros());
        match fire.next_fire_at {
            Some(at) => cmd.arg(at.timestamp_micros()),
            None => cmd.arg(""),
        };
        push_job(&mut cmd, &fire.job, id, &payload);
        let answer: Option<Vec<String>> = self.run_script(&scripts::ENQUEUE_PERIODIC, &cmd).await?;
        match answer {
            None => Ok(None),
            Some(answer) => Ok(outcomes(&[id], &answer)?.pop()),
        }
    }

    /// Every schedule recorded with any queue; a schedule whose job moved
    /// to another queue is listed once, with its latest fire.
    pub(crate) async fn schedules_scripted(&self) -> Result<Vec<ScheduleRecord>> {
        let queues = self.all_queues().await?;
        let calls = queues.iter().map(|queue| async move {
            self.invoke::<Vec<String>>(&scripts::SCHEDULES, &self.keys.queue(queue.as_str()), &[])
                .await
        });
        let mut latest: BTreeMap<ScheduleName, ScheduleRecord> = BTreeMap::new();
        for answer in try_join_all(calls).await? {
            for pair in answer.chunks_exact(2) {
                let record = record(&pair[0], &pair[1])?;
                if latest
                    .get(&record.schedule)
                    .is_none_or(|known| known.last_fire_at < record.last_fire_at)
                {
                    latest.insert(record.schedule.clone(), record);
                }
            }
        }
        Ok(latest.into_values().collect())
    }
}

/// A `P:schedules` entry: name -> `last:next` (next may be empty).
fn record(name: &str, fires: &str) -> Result<ScheduleRecord> {
    let (last, next) = fires
        .split_once(':')
        .ok_or_else(|| corrupt("schedules", format!("{fires:?}")))?;
    Ok(ScheduleRecord {
        schedule: queue_core::backend::stored("schedule", name.to_owned(), ScheduleName::new)?,
        last_fire_at: stored_instant("last_fire_at", integer("last_fire_at", last)?)?,
        next_fire_at: if next.is_empty() {
            None
        } else {
            Some(stored_instant(
                "next_fire_at",
                integer("next_fire_at", next)?,
            )?)
        },
    })
}
