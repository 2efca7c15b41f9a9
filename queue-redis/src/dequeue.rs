//! Dequeue: one script claims from one queue atomically. Over several
//! queues (each on its own slot) a peek script per queue finds the best
//! candidates, and the claim script then takes the chosen count from each,
//! none worse than the worst one chosen there; when a racing dequeuer took
//! some first, the dequeue peeks again for the rest (a few rounds at most).
//! Also `next_due`.

use std::cmp::Reverse;
use std::time::Duration;

use futures_util::future::try_join_all;
use queue_core::backend::merge_by_next;
use queue_core::time::duration_micros;
use queue_core::{DequeueRequest, Job, QueueError, QueueName, Result};

use crate::rows::{self, integer};
use crate::{RedisStorage, scripts};

/// A peeked candidate: effective priority (its priority but on an aging
/// queue), available_at, id, index of its queue, and its raw ready-set
/// score and member (the bound of a claim).
type Candidate = (i64, i64, i64, usize, String, String);

/// How often a dequeue over several queues peeks again when racing
/// dequeuers took the jobs it chose, before it returns what it has.
const MAX_ROUNDS: usize = 8;

/// One queue's share of a dequeue: how many jobs, and the worst one chosen
/// in the claim order (on a fair queue not always the last).
#[derive(Debug, Clone, Default)]
struct Share {
    count: u32,
    bound: Option<(String, String)>,
}

impl RedisStorage {
    pub(crate) async fn dequeue_scripted(&self, request: &DequeueRequest) -> Result<Vec<Job>> {
        let queues = request.queues();
        let now = self.now_arg();
        let mut caps: Vec<u32> = queues
            .iter()
            .map(|q| request.queue_limit(q).min(request.limit()))
            .collect();
        let mut left = request.limit();
        // Each claim's jobs, in its queue's order.
        let mut lists: Vec<Vec<(i64, Job)>> = Vec::new();
        if queues.len() == 1 {
            let share = Share {
                count: caps[0],
                bound: None,
            };
            lists.push(self.claim(&queues[0], &share, request, &now).await?);
        } else {
            for _ in 0..MAX_ROUNDS {
                let shares = self.choose(queues, &caps, left, &now).await?;
                if shares.iter().all(|share| share.count == 0) {
                    break;
                }
                let claims = queues
                    .iter()
                    .zip(&shares)
                    .map(|(queue, share)| self.claim(queue, share, request, &now));
                let mut short = false;
                for ((claimed, share), cap) in try_join_all(claims)
                    .await?
                    .into_iter()
                    .zip(&shares)
                    .zip(caps.iter_mut())
                {
                    let got = u32::try_from(claimed.len()).unwrap_or(u32::MAX);
                    short |= got < share.count;
                    *cap = cap.saturating_sub(got);
                    left = left.saturating_sub(got);
                    lists.push(claimed);
                }
                if !short || left == 0 {
                    break;
                }
            }
        }
        // By effective priority (on an aging queue, not the stored one),
        // each list's next job at a time: a fair queue's come in its order.
        let jobs = merge_by_next(lists, usize::MAX, |(effective, job)| {
            (Reverse(*effective), job.available_at, job.id)
        });
        Ok(jobs.into_iter().map(|(_, job)| job).collect())
    }

    /// Claims `share.count` jobs of `queue`, none worse than `share.bound`,
    /// each with its effective priority.
    async fn claim(
        &self,
        queue: &QueueName,
        share: &Share,
        request: &DequeueRequest,
        now: &str,
    ) -> Result<Vec<(i64, Job)>> {
        if share.count == 0 {
            return Ok(Vec::new());
        }
        let (score, member) = share.bound.clone().unwrap_or_default();
        let args = [
            now.to_owned(),
            share.count.to_string(),
            duration_micros(request.lease()).to_string(),
            request.worker_id().as_str().to_owned(),
            score,
            member,
        ];
        let answer: Vec<Vec<String>> = self
            .invoke(&scripts::DEQUEUE, &self.keys.queue(queue.as_str()), &args)
            .await?;
        rows::claimed(queue, request.worker_id(), &answer)
    }

    /// Each queue's share of the best `limit` peeked candidates, at most
    /// `caps[i]` from queue `i`.
    async fn choose(
        &self,
        queues: &[QueueName],
        caps: &[u32],
        limit: u32,
        now: &str,
    ) -> Result<Vec<Share>> {
        let peeks = queues.iter().zip(caps).map(|(queue, cap)| {
            let args = [now.to_owned(), cap.min(&limit).to_string()];
            async move {
                if args[1] == "0" {
                    return Ok(Vec::new());
                }
                self.invoke::<Vec<String>>(
                    &scripts::DEQUEUE_PEEK,
                    &self.keys.queue(queue.as_str()),
                    &args,
                )
                .await
            }
        });
        let mut lists: Vec<Vec<Candidate>> = Vec::new();
        for (slot, answer) in try_join_all(peeks).await?.into_iter().enumerate() {
            let list = (answer.chunks_exact(3))
                .map(|triple| candidate(triple, slot))
                .collect::<Result<_>>()?;
            lists.push(list);
        }
        // Each queue's candidates come in its order (a fair queue's is not
        // the claim order): merged by each one's next.
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let candidates = merge_by_next(lists, limit, |c| (Reverse(c.0), c.1, c.2));
        let mut shares = vec![Share::default(); queues.len()];
        let mut worst: Vec<Option<(Reverse<i64>, i64, i64)>> = vec![None; queues.len()];
        for (effective, available_at, id, slot, score, member) in candidates {
            shares[slot].count += 1;
            let order = (Reverse(effective), available_at, id);
            if worst[slot].is_none_or(|w| order > w) {
                worst[slot] = Some(order);
                shares[slot].bound = Some((score, member));
            }
        }
        Ok(shares)
    }

    pub(crate) async fn next_due_scripted(&self, queues: &[QueueName]) -> Result<Option<Duration>> {
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

/// A peeked ready-set entry `[member, score, effective priority]`: member
/// `pad19(available_at):pad19(id)`, score `-priority`.
fn candidate(entry: &[String], slot: usize) -> Result<Candidate> {
    let bad = || QueueError::backend(format!("ready-set entry {entry:?} is malformed"));
    let [member, score, effective] = entry else {
        return Err(bad());
    };
    let (at, id) = member.split_once(':').ok_or_else(bad)?;
    Ok((
        integer("effective priority", effective)?,
        integer("available_at", at)?,
        integer("id", id)?,
        slot,
        score.to_owned(),
        member.to_owned(),
    ))
}
