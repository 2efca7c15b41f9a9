//! Enqueue: validates every job, registers their queues and reserves ids
//! in one global call, then adds each queue's jobs in one script.

use std::collections::HashMap;

use futures_util::future::try_join_all;
use queue_core::time::duration_micros;
use queue_core::{
    EnqueueOutcome, JobId, NewJob, QueueError, QueueName, Result, Schedule, ValidJob,
};

use crate::keys::{self, token};
use crate::rows::{self, json_text};
use crate::{RedisStorage, scripts};

/// The script fields of one job after the clock: see `scripts/enqueue.lua`.
const FIELDS_PER_JOB: usize = 7;

impl RedisStorage {
    pub(crate) async fn enqueue_jobs(&self, jobs: Vec<NewJob>) -> Result<Vec<EnqueueOutcome>> {
        let valid = jobs
            .iter()
            .map(NewJob::validate)
            .collect::<Result<Vec<ValidJob>>>()?;
        if valid.is_empty() {
            return Ok(Vec::new());
        }
        let payloads = valid
            .iter()
            .map(|job| self.payload_text(job))
            .collect::<Result<Vec<_>>>()?;
        // Each queue once, in order of first appearance, with its jobs' positions.
        let mut queues: Vec<&QueueName> = Vec::new();
        let mut positions: Vec<Vec<usize>> = Vec::new();
        let mut seen: HashMap<&QueueName, usize> = HashMap::new();
        for (i, job) in valid.iter().enumerate() {
            let slot = *seen.entry(&job.queue).or_insert_with(|| {
                queues.push(&job.queue);
                positions.push(Vec::new());
                queues.len() - 1
            });
            positions[slot].push(i);
        }
        let count = i64::try_from(valid.len())
            .map_err(|_| QueueError::invalid("jobs", "too many jobs in one batch"))?;
        let (last, indexes) = self.register(&queues, valid.len()).await?;
        let first = last - count + 1;
        let now = self.now_arg();
        let channel = self.keys.channel();
        let calls = queues
            .iter()
            .zip(&indexes)
            .zip(&positions)
            .map(|((queue, index), members)| {
                let mut args = Vec::with_capacity(3 + members.len() * FIELDS_PER_JOB);
                args.extend([now.clone(), channel.clone(), queue.as_str().to_owned()]);
                for &i in members {
                    let job = &valid[i];
                    let offset = i64::try_from(i).unwrap_or(i64::MAX);
                    let id = keys::job_id(first.saturating_add(offset), *index)?;
                    args.extend(job_args(job, id, payloads[i].clone()));
                }
                let prefix = self.keys.queue(queue.as_str());
                Ok(async move {
                    let answer: Vec<String> =
                        self.invoke(&scripts::ENQUEUE, &prefix, &args).await?;
                    Ok::<_, QueueError>((members, answer))
                })
            });
        let calls = calls.collect::<Result<Vec<_>>>()?;
        let answers = try_join_all(calls).await?;
        let mut outcomes = vec![None; valid.len()];
        for (members, answer) in answers {
            if answer.len() != members.len() * 2 {
                return Err(QueueError::backend(format!(
                    "the enqueue script answered {} values for {} jobs",
                    answer.len(),
                    members.len()
                )));
            }
            for (&i, pair) in members.iter().zip(answer.chunks_exact(2)) {
                outcomes[i] = Some(EnqueueOutcome {
                    id: rows::job_id(&pair[0])?,
                    existed: pair[1] == "1",
                });
            }
        }
        outcomes
            .into_iter()
            .map(|o| o.ok_or_else(|| QueueError::backend("a job got no enqueue outcome")))
            .collect()
    }

    /// The payload as stored, refused when over the size limit.
    pub(crate) fn payload_text(&self, job: &ValidJob) -> Result<String> {
        let text = json_text(&job.payload)?;
        if text.len() > self.max_payload_bytes {
            return Err(QueueError::invalid(
                "payload",
                format!(
                    "is {} bytes of JSON, over this storage's limit of {} bytes",
                    text.len(),
                    self.max_payload_bytes
                ),
            ));
        }
        Ok(text)
    }
}

/// The enqueue script's arguments for one job (`FIELDS_PER_JOB`).
pub(crate) fn job_args(job: &ValidJob, id: JobId, payload: String) -> [String; FIELDS_PER_JOB] {
    let (kind, value) = match job.schedule {
        Schedule::Now => ("now", String::new()),
        Schedule::After(delay) => ("after", duration_micros(delay).to_string()),
        Schedule::At(at) => ("at", at.timestamp_micros().to_string()),
    };
    [
        token(id),
        job.priority.to_string(),
        job.unique_key
            .as_ref()
            .map(|k| k.as_str().to_owned())
            .unwrap_or_default(),
        job.max_attempts.to_string(),
        kind.to_owned(),
        value,
        payload,
    ]
}
