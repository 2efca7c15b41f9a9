//! Dequeue: one script claims from one queue atomically. Over several
//! queues (each on its own slot) a peek script per queue finds the best
//! candidates, and the claim script then takes the chosen count from
//! each: never a job twice, though a racing dequeuer may take some of the
//! best ones first. Also `next_due`.

use std::cmp::Reverse;
use std::time::Duration;

use futures_util::future::try_join_all;
use queue_core::time::duration_micros;
use queue_core::{DequeueRequest, Job, QueueError, QueueName, Result};

use crate::rows::{self, integer};
use crate::{RedisStorage, scripts};

/// A peeked candidate: priority, available_at, id, index of its queue.
type Candidate = (i64, i64, i64, usize);

impl RedisStorage {
    pub(crate) async fn dequeue_jobs(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        let queues = request.queues();
        let now = self.now_arg();
        let caps: Vec<u32> = queues
            .iter()
            .map(|q| request.queue_limit(q).min(request.limit()))
            .collect();
        let counts = if queues.len() == 1 {
            caps
        } else {
            self.choose(queues, &caps, request.limit(), &now).await?
        };
        let lease = duration_micros(request.lease()).to_string();
        let worker = request.worker_id().as_str().to_owned();
        let claims = queues
            .iter()
            .zip(counts)
            .filter(|(_, n)| *n > 0)
            .map(|(queue, n)| {
                let args = [now.clone(), n.to_string(), lease.clone(), worker.clone()];
                async move {
                    let rows: Vec<Vec<String>> = self
                        .invoke(&scripts::DEQUEUE, &self.keys.queue(queue.as_str()), &args)
                        .await?;
                    rows.iter()
                        .map(|row| rows::job(queue, row))
                        .collect::<Result<Vec<_>>>()
                }
            });
        let mut jobs: Vec<Job> = try_join_all(claims).await?.into_iter().flatten().collect();
        jobs.sort_by_key(|job| (Reverse(job.priority), job.available_at, job.id));
        Ok(jobs)
    }

    /// How many jobs to claim from each queue: the best `limit` of the
    /// peeked candidates, at most `caps[i]` from queue `i`.
    async fn choose(
        &self,
        queues: &[QueueName],
        caps: &[u32],
        limit: u32,
        now: &str,
    ) -> Result<Vec<u32>> {
        let peeks = queues.iter().zip(caps).map(|(queue, cap)| {
            let args = [now.to_owned(), cap.to_string()];
            async move {
                self.invoke::<Vec<String>>(&scripts::PEEK, &self.keys.queue(queue.as_str()), &args)
                    .await
            }
        });
        let mut candidates: Vec<Candidate> = Vec::new();
        for (slot, answer) in try_join_all(peeks).await?.into_iter().enumerate() {
            for pair in answer.chunks_exact(2) {
                candidates.push(candidate(&pair[0], &pair[1], slot)?);
            }
        }
        candidates.sort_by_key(|(priority, at, id, _)| (Reverse(*priority), *at, *id));
        candidates.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        let mut counts = vec![0_u32; queues.len()];
        for (_, _, _, slot) in candidates {
            counts[slot] += 1;
        }
        Ok(counts)
    }

    pub(crate) async fn next_due_of(&self, queues: &[QueueName]) -> Result<Option<Duration>> {
        let now = [self.now_arg()];
        let probes = queues.iter().map(|queue| {
            let now = &now;
            async move {
                self.invoke::<Vec<String>>(
                    &scripts::NEXT_DUE,
                    &self.keys.queue(queue.as_str()),
                    now,
                )
                .await
            }
        });
        let mut earliest: Option<i64> = None;
        for answer in try_join_all(probes).await? {
            let [now, at] = answer.as_slice() else {
                return Err(QueueError::backend("the next_due script answered badly"));
            };
            if at.is_empty() {
                continue;
            }
            let wait = integer("available_at", at)?.saturating_sub(integer("now", now)?);
            earliest = Some(earliest.map_or(wait, |e| e.min(wait)));
        }
        Ok(earliest.map(|micros| Duration::from_micros(u64::try_from(micros).unwrap_or(0))))
    }
}

/// A ready-set entry: member `pad19(available_at):pad19(id)`, score `-priority`.
fn candidate(member: &str, score: &str, slot: usize) -> Result<Candidate> {
    let bad = || QueueError::backend(format!("ready-set entry {member:?} {score:?} is malformed"));
    let (at, id) = member.split_once(':').ok_or_else(bad)?;
    let priority = score.parse::<f64>().map_err(|_| bad())?;
    Ok((
        -(priority as i64),
        integer("available_at", at)?,
        integer("id", id)?,
        slot,
    ))
}
