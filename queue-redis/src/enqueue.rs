//! Enqueue: validates every job, registers their queues and reserves ids
//! in one global call, then adds each queue's jobs in one script (a batch
//! with dependencies: all its jobs in one script, `workflow.rs`).

use std::collections::HashMap;

use futures_util::future::try_join_all;
use queue_core::time::duration_micros;
use queue_core::{
    EnqueueOutcome, JobId, NewJob, QueueError, QueueName, Result, Schedule, ValidJob,
};

use crate::command::script_cmd;
use crate::keys;
use queue_core::backend::json_text;

use crate::rows;
use crate::{RedisStorage, scripts};
use redis::Cmd;

impl RedisStorage {
    pub(crate) async fn enqueue_batch_scripted(
        &self,
        jobs: Vec<NewJob>,
    ) -> Result<Vec<EnqueueOutcome>> {
        let valid: Vec<ValidJob> = queue_core::backend::validate_batch(&jobs)?;
        let linked = valid
            .iter()
            .any(|job| !job.dependencies.is_empty() || job.joins.is_some());
        if linked && self.is_cluster() {
            // Workflows span queues, which a cluster's scripts cannot
            // (design.md).
            queue_core::backend::refuse_joins(&valid, "enqueue_batch")?;
            queue_core::backend::refuse_dependencies(&valid, "enqueue_batch")?;
        }
        if valid.is_empty() {
            return Ok(Vec::new());
        }
        let payloads = valid
            .iter()
            .map(|job| self.payload_text(job))
            .collect::<Result<Vec<_>>>()?;
        let owners = if linked {
            self.dependency_queues(&valid).await?
        } else {
            Default::default()
        };
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
        if linked {
            let mut ids = Vec::with_capacity(valid.len());
            for (i, job) in valid.iter().enumerate() {
                let slot = seen[&job.queue];
                let offset = i64::try_from(i).unwrap_or(i64::MAX);
                ids.push(keys::job_id(first.saturating_add(offset), indexes[slot])?);
            }
            return self.enqueue_linked(&valid, &payloads, &ids, &owners).await;
        }
        let now = self.now_arg();
        let channel = self.keys.channel();
        let mut calls = Vec::with_capacity(queues.len());
        for ((queue, index), members) in queues.iter().zip(&indexes).zip(&positions) {
            let mut cmd = script_cmd(&scripts::ENQUEUE, &self.keys.queue(queue.as_str()));
            cmd.arg(&now).arg(&channel).arg(queue.as_str());
            let mut ids = Vec::with_capacity(members.len());
            for &i in members {
                let offset = i64::try_from(i).unwrap_or(i64::MAX);
                let id = keys::job_id(first.saturating_add(offset), *index)?;
                push_job(&mut cmd, &valid[i], id, &payloads[i]);
                ids.push(id);
            }
            calls.push(async move {
                let answer: Vec<String> = self.run_script(&scripts::ENQUEUE, &cmd).await?;
                Ok::<_, QueueError>((members, outcomes(&ids, &answer)?))
            });
        }
        let mut all = vec![None; valid.len()];
        for (members, outcomes) in try_join_all(calls).await? {
            for (&i, outcome) in members.iter().zip(outcomes) {
                all[i] = Some(outcome);
            }
        }
        all.into_iter()
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

/// Adds the enqueue script's nine arguments for one job (see
/// `scripts/enqueue.lua`) to `cmd`: numbers are written in place, nothing
/// is allocated per field.
pub(crate) fn push_job(cmd: &mut Cmd, job: &ValidJob, id: JobId, payload: &str) {
    let mut token = [0u8; 19];
    keys::write_token(id, &mut token);
    cmd.arg(&token[..]).arg(job.priority);
    match &job.unique_key {
        Some(key) => cmd.arg(key.as_str()),
        None => cmd.arg(""),
    };
    cmd.arg(job.max_attempts);
    match job.schedule {
        Schedule::Now => cmd.arg("now").arg(""),
        Schedule::After(delay) => cmd.arg("after").arg(duration_micros(delay)),
        Schedule::At(at) => cmd.arg("at").arg(at.timestamp_micros()),
    };
    cmd.arg(payload);
    match &job.trace_context {
        Some(ctx) => cmd.arg(ctx.to_stored()),
        None => cmd.arg(""),
    };
    match &job.group_key {
        Some(group) => cmd.arg(group.as_str()),
        None => cmd.arg(""),
    };
}

/// The outcomes of one enqueue script's jobs, sent with `ids` in this
/// order: each job added under its id unless the script's `answer` (pairs
/// of a 1-based position and the live job's id) says its key was live.
pub(crate) fn outcomes(ids: &[JobId], answer: &[String]) -> Result<Vec<EnqueueOutcome>> {
    let mut outcomes: Vec<EnqueueOutcome> = ids
        .iter()
        .map(|&id| EnqueueOutcome { id, existed: false })
        .collect();
    if !answer.len().is_multiple_of(2) {
        return Err(QueueError::backend(format!(
            "the enqueue script answered an odd number of values ({})",
            answer.len()
        )));
    }
    for pair in answer.chunks_exact(2) {
        let outcome = pair[0]
            .parse::<usize>()
            .ok()
            .and_then(|position| outcomes.get_mut(position.wrapping_sub(1)))
            .ok_or_else(|| {
                QueueError::backend(format!(
                    "the enqueue script answered position {:?} for {} jobs",
                    pair[0],
                    ids.len()
                ))
            })?;
        *outcome = EnqueueOutcome {
            id: rows::job_id(&pair[1])?,
            existed: true,
        };
    }
    Ok(outcomes)
}
