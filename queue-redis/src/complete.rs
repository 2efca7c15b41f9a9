//! Ack, nack and release: finishing an attempt. A lease is current while
//! the job's hash still holds its worker, its attempt and a lease end;
//! each script checks that and changes the job in the same step.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use futures_util::future::try_join_all;
use queue_core::backend::stored_instant;
use queue_core::time::{duration_micros, validate_duration};
use queue_core::{Ack, Lease, NackOutcome, QueueError, QueueName, Result, Retry};
use serde_json::Value;

use crate::keys::token;
use queue_core::backend::json_text;

use crate::rows::integer;
use crate::{RedisStorage, scripts};

impl RedisStorage {
    pub(crate) async fn ack_scripted(&self, acks: &[Ack]) -> Result<Vec<bool>> {
        let results = acks
            .iter()
            .map(|ack| ack.result.as_ref().map(json_text).transpose())
            .collect::<Result<Vec<_>>>()?;
        let groups = self.by_queue(acks.iter().map(|a| &a.lease)).await?;
        let now = self.now_arg();
        let calls = groups.iter().map(|(queue, members)| {
            let mut args = Vec::with_capacity(1 + members.len() * 5);
            args.push(now.clone());
            for &i in members {
                let lease = &acks[i].lease;
                args.extend(lease_args(lease));
                match &results[i] {
                    Some(result) => args.extend(["1".to_owned(), result.clone()]),
                    None => args.extend(["0".to_owned(), String::new()]),
                }
            }
            async move {
                let answer: Vec<i64> = self
                    .invoke(&scripts::ACK, &self.keys.queue(queue.as_str()), &args)
                    .await?;
                Ok::<_, QueueError>((members, answer))
            }
        });
        scatter(acks.len(), try_join_all(calls).await?)
    }

    pub(crate) async fn nack_scripted(
        &self,
        lease: &Lease,
        error: &Value,
        retry: Retry,
    ) -> Result<NackOutcome> {
        retry.validate()?;
        let error = json_text(error)?;
        let lost = || QueueError::LeaseLost {
            lease: lease.clone(),
        };
        let Some(queue) = self.queue_of(lease.job_id).await? else {
            return Err(lost());
        };
        let (wanted, delay) = match retry {
            Retry::After(delay) => ("1", duration_micros(delay)),
            Retry::Never => ("0", 0),
        };
        let mut args = vec![self.now_arg()];
        args.extend(lease_args(lease));
        args.extend([error, wanted.to_owned(), delay.to_string()]);
        let answer: Vec<String> = self
            .invoke(&scripts::NACK, &self.keys.queue(queue.as_str()), &args)
            .await?;
        match answer.as_slice() {
            [code] if code == "0" => Err(lost()),
            [code, at] if code == "1" => Ok(NackOutcome::Retrying {
                at: stored_instant("available_at", integer("available_at", at)?)?,
            }),
            [code] if code == "2" => Ok(NackOutcome::DeadLettered),
            other => Err(QueueError::backend(format!(
                "the nack script answered {other:?}"
            ))),
        }
    }

    pub(crate) async fn release_scripted(&self, lease: &Lease) -> Result<bool> {
        let Some(queue) = self.queue_of(lease.job_id).await? else {
            return Ok(false);
        };
        let mut args = vec![self.now_arg()];
        args.extend(lease_args(lease));
        let released: i64 = self
            .invoke(&scripts::RELEASE, &self.keys.queue(queue.as_str()), &args)
            .await?;
        Ok(released == 1)
    }

    pub(crate) async fn snooze_scripted(
        &self,
        lease: &Lease,
        delay: Duration,
    ) -> Result<DateTime<Utc>> {
        validate_duration("delay", delay, true)?;
        let lost = || QueueError::LeaseLost {
            lease: lease.clone(),
        };
        let Some(queue) = self.queue_of(lease.job_id).await? else {
            return Err(lost());
        };
        let mut args = vec![self.now_arg()];
        args.extend(lease_args(lease));
        args.push(duration_micros(delay).to_string());
        let at: String = self
            .invoke(&scripts::SNOOZE, &self.keys.queue(queue.as_str()), &args)
            .await?;
        if at.is_empty() {
            return Err(lost());
        }
        stored_instant("available_at", integer("available_at", &at)?)
    }

    /// The positions of `leases`, grouped by the queue their job belongs
    /// to; leases of unknown queues are left out (they are lost).
    pub(crate) async fn by_queue<'a>(
        &self,
        leases: impl Iterator<Item = &'a Lease>,
    ) -> Result<Vec<(QueueName, Vec<usize>)>> {
        let mut groups: Vec<(QueueName, Vec<usize>)> = Vec::new();
        let mut slots: HashMap<QueueName, usize> = HashMap::new();
        for (i, lease) in leases.enumerate() {
            let Some(queue) = self.queue_of(lease.job_id).await? else {
                continue;
            };
            let slot = *slots.entry(queue.clone()).or_insert_with(|| {
                groups.push((queue, Vec::new()));
                groups.len() - 1
            });
            groups[slot].1.push(i);
        }
        Ok(groups)
    }
}

/// The script arguments naming a lease: id, worker, attempt.
pub(crate) fn lease_args(lease: &Lease) -> [String; 3] {
    [
        token(lease.job_id),
        lease.worker_id.as_str().to_owned(),
        lease.attempt.to_string(),
    ]
}

/// Puts per-queue answers (1 = done) back in input order; inputs of no
/// queue stay false.
pub(crate) fn scatter(len: usize, answers: Vec<(&Vec<usize>, Vec<i64>)>) -> Result<Vec<bool>> {
    let mut done = vec![false; len];
    for (members, answer) in answers {
        if answer.len() != members.len() {
            return Err(QueueError::backend(format!(
                "a script answered {} values for {} leases",
                answer.len(),
                members.len()
            )));
        }
        for (&i, value) in members.iter().zip(answer) {
            done[i] = value == 1;
        }
    }
    Ok(done)
}
