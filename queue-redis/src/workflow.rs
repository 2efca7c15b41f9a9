//! Workflows ([`queue_core::Capability::Dependencies`] and
//! [`queue_core::Capability::Batches`], standalone Redis only): the
//! enqueue of a batch with dependencies or joins, in one script over
//! every queue it touches, and `job_links`. What a finish does to the jobs
//! waiting for it is `scripts/workflow.lua`, run by each finishing script.

use std::collections::{BTreeMap, BTreeSet};

use futures_util::future::try_join_all;
use queue_core::backend::stored_instant;
use queue_core::{
    Dependency, DependencyFailure, EnqueueOutcome, FinalStatus, JobId, JobLink, JobLinks,
    LinkStatus, QueueError, QueueName, Result, ValidJob, batch_closed, failed_dependency, state_of,
    unknown_dependency,
};
use redis::Value;

use crate::enqueue::{outcomes, push_job};
use crate::keys::token;
use crate::rows::{self, integer};
use crate::{RedisStorage, scripts};

/// What an id of no queue is refused as.
type Refusal = fn(JobId) -> QueueError;

/// The queues one linked enqueue touches, in the order of its `KEYS`.
#[derive(Default)]
struct Queues<'a> {
    names: Vec<&'a QueueName>,
}

impl<'a> Queues<'a> {
    /// The position (from 1, as the script reads it) of `queue`, added
    /// when new.
    fn position(&mut self, queue: &'a QueueName) -> usize {
        match self.names.iter().position(|name| *name == queue) {
            Some(i) => i + 1,
            None => {
                self.names.push(queue);
                self.names.len()
            }
        }
    }
}

impl RedisStorage {
    /// The queue of every dependency of `valid` on a job enqueued before,
    /// and of every callback a job joins, read before anything is written:
    /// a dependency of no queue is unknown ([`unknown_dependency`]), a
    /// callback of none a closed batch ([`batch_closed`]).
    pub(crate) async fn dependency_queues(
        &self,
        valid: &[ValidJob],
    ) -> Result<BTreeMap<JobId, QueueName>> {
        let mut owners: BTreeMap<JobId, QueueName> = BTreeMap::new();
        // Each id with the refusal of an id of no queue: a callback's
        // batch is closed, a dependency unknown.
        let mut linked: Vec<(JobId, Refusal)> = Vec::new();
        for job in valid {
            if let Some(callback) = job.joins {
                linked.push((callback, batch_closed));
            }
            for dependency in &job.dependencies {
                if let Dependency::Job(id) = *dependency {
                    linked.push((id, unknown_dependency));
                }
            }
        }
        for (id, refusal) in linked {
            if let std::collections::btree_map::Entry::Vacant(entry) = owners.entry(id) {
                entry.insert(self.queue_of(id).await?.ok_or_else(|| refusal(id))?);
            }
        }
        Ok(owners)
    }

    /// Enqueues `valid` (with `payloads` as stored, under `ids`), a batch
    /// in which some job names dependencies (of the queues `owners`, from
    /// [`RedisStorage::dependency_queues`]), in one script
    /// (`scripts/enqueue_linked.lua`).
    pub(crate) async fn enqueue_linked(
        &self,
        valid: &[ValidJob],
        payloads: &[String],
        ids: &[JobId],
        owners: &BTreeMap<JobId, QueueName>,
    ) -> Result<Vec<EnqueueOutcome>> {
        // Every queue first (the script's KEYS), then the jobs.
        let mut queues = Queues::default();
        for job in valid {
            queues.position(&job.queue);
        }
        for queue in owners.values() {
            queues.position(queue);
        }
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(scripts::ENQUEUE_LINKED.get_hash())
            .arg(queues.names.len());
        for queue in &queues.names {
            cmd.arg(self.keys.queue(queue.as_str()));
        }
        cmd.arg(self.now_arg())
            .arg(self.keys.channel())
            .arg(queues.names.len());
        for queue in &queues.names {
            cmd.arg(queue.as_str());
        }
        for (i, job) in valid.iter().enumerate() {
            cmd.arg(queues.position(&job.queue));
            push_job(&mut cmd, job, ids[i], &payloads[i]);
            cmd.arg(match job.on_dependency_failure {
                DependencyFailure::Run => "run",
                DependencyFailure::Cancel => "cancel",
            });
            match job.joins {
                Some(callback) => cmd
                    .arg(queues.position(&owners[&callback]))
                    .arg(token(callback)),
                None => cmd.arg(0).arg(""),
            };
            cmd.arg(job.dependencies.len());
            for dependency in &job.dependencies {
                match *dependency {
                    Dependency::Job(id) => {
                        cmd.arg(queues.position(&owners[&id]))
                            .arg("j")
                            .arg(token(id));
                    }
                    Dependency::InBatch(index) => {
                        cmd.arg(queues.position(&valid[index].queue))
                            .arg("b")
                            .arg(index + 1);
                    }
                }
            }
        }
        let answer: Vec<String> = self.run_script(&scripts::ENQUEUE_LINKED, &cmd).await?;
        match answer.split_first() {
            Some((code, rest)) if code == "ok" => outcomes(ids, rest),
            Some((code, [id])) if code == "unknown" => Err(unknown_dependency(rows::job_id(id)?)),
            Some((code, [id])) if code == "closed" => Err(batch_closed(rows::job_id(id)?)),
            Some((code, [id, status])) if code == "failed" => Err(failed_dependency(
                rows::job_id(id)?,
                status.parse::<FinalStatus>()?,
            )),
            _ => Err(QueueError::backend(format!(
                "the linked enqueue script answered {answer:?}"
            ))),
        }
    }

    pub(crate) async fn job_links_scripted(&self, id: JobId) -> Result<JobLinks> {
        let not_found = || QueueError::not_found(format!("job {id}"));
        let Some(queue) = self.queue_of(id).await? else {
            return Err(not_found());
        };
        let args = [self.now_arg(), token(id)];
        let answer: Vec<String> = self
            .invoke(&scripts::JOB_LINKS, &self.keys.queue(queue.as_str()), &args)
            .await?;
        let Some((depends_on, dependants)) = answer.split_first() else {
            return Err(not_found());
        };
        let dependencies = depends_on
            .split(',')
            .filter(|id| !id.is_empty())
            .map(rows::job_id)
            .collect::<Result<BTreeSet<_>>>()?;
        let dependants = dependants
            .iter()
            .map(|id| rows::job_id(id))
            .collect::<Result<BTreeSet<_>>>()?;
        let all: BTreeSet<JobId> = dependencies.union(&dependants).copied().collect();
        let links = self.links(&all).await?;
        let pick = |ids: &BTreeSet<JobId>| ids.iter().map(|id| links[id].clone()).collect();
        Ok(JobLinks {
            dependencies: pick(&dependencies),
            dependants: pick(&dependants),
        })
    }

    /// Where each of `ids` stands: one script per queue.
    async fn links(&self, ids: &BTreeSet<JobId>) -> Result<BTreeMap<JobId, JobLink>> {
        let mut by_queue: BTreeMap<QueueName, Vec<JobId>> = BTreeMap::new();
        let mut links = BTreeMap::new();
        for &id in ids {
            match self.queue_of(id).await? {
                Some(queue) => by_queue.entry(queue).or_default().push(id),
                None => {
                    links.insert(id, gone(id));
                }
            }
        }
        let calls = by_queue.iter().map(|(queue, ids)| async move {
            let mut args = vec![self.now_arg()];
            args.extend(ids.iter().map(|&id| token(id)));
            let answer: Vec<Value> = self
                .invoke(
                    &scripts::LINK_STATUS,
                    &self.keys.queue(queue.as_str()),
                    &args,
                )
                .await?;
            link_rows(queue, ids, answer)
        });
        for found in try_join_all(calls).await? {
            links.extend(found);
        }
        Ok(links)
    }
}

/// A link to a job neither live nor in history.
fn gone(id: JobId) -> JobLink {
    JobLink {
        id,
        queue: None,
        status: LinkStatus::Gone,
        result: None,
    }
}

/// The links of `ids` of `queue` from the link status script's answer.
fn link_rows(
    queue: &QueueName,
    ids: &[JobId],
    answer: Vec<Value>,
) -> Result<Vec<(JobId, JobLink)>> {
    let bad = || QueueError::backend("the link status script answered badly");
    let mut answer = answer.into_iter();
    let now = answer.next().ok_or_else(bad)?;
    let rows: Vec<Value> = answer.collect();
    if rows.len() != ids.len() {
        return Err(bad());
    }
    let now: String = redis::from_redis_value(now).map_err(|_| bad())?;
    let now = stored_instant("now", integer("now", &now)?)?;
    let mut links = Vec::with_capacity(ids.len());
    for (&id, row) in ids.iter().zip(rows) {
        let row: Vec<String> = redis::from_redis_value(row).map_err(|_| bad())?;
        let link = match row.as_slice() {
            [kind, available_at, lease_until, attempts, max_attempts] if kind == "live" => {
                let lease_until = match lease_until.as_str() {
                    "" => None,
                    at => Some(stored_instant("lease_until", integer("lease_until", at)?)?),
                };
                let state = state_of(
                    stored_instant("available_at", integer("available_at", available_at)?)?,
                    lease_until,
                    integer("attempts", attempts)?,
                    integer("max_attempts", max_attempts)?,
                    now,
                );
                JobLink {
                    id,
                    queue: Some(queue.clone()),
                    status: LinkStatus::Live(state),
                    result: None,
                }
            }
            [kind, status, result] if kind == "finished" => JobLink {
                id,
                queue: Some(queue.clone()),
                status: LinkStatus::Finished(status.parse()?),
                result: match result.as_str() {
                    "" => None,
                    text => Some(serde_json::from_str(text).map_err(QueueError::Serialization)?),
                },
            },
            [kind] if kind == "gone" => gone(id),
            _ => return Err(bad()),
        };
        links.push((id, link));
    }
    Ok(links)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_scripts_wait_at_queue_cores_waiting_instant() {
        let micros = queue_core::waiting_at().timestamp_micros().to_string();
        let common = include_str!("scripts/common.lua");
        assert!(
            common.contains(&format!("local WAITING_AT = '{micros}'")),
            "common.lua's WAITING_AT is not {micros}"
        );
    }
}
