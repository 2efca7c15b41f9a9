//! The model test's newer operations: capped and concurrent claims,
//! `next_due`, history and job listings, bulk actions, compared between the
//! backend and the model.

use std::collections::HashSet;
use std::time::Duration;

use proptest::test_runner::TestCaseError;
use queue_core::{
    DequeueRequest, HistoryFilter, Job, JobFilter, JobId, JobState, QueueName, Storage, UniqueKey,
    WorkerId,
};

use super::fail;
use super::ops::{QUEUES, Selection};
use super::pair::{Pair, kind, same};

fn queue_name(index: usize) -> QueueName {
    QueueName::new(QUEUES[index]).expect("model queue names are valid")
}

impl<S: Storage> Pair<S> {
    pub(super) async fn dequeue_capped(
        &mut self,
        caps: [u32; 2],
        worker: u8,
    ) -> Result<(), TestCaseError> {
        let request = DequeueRequest::with_queue_limits(
            vec![(queue_name(0), caps[0]), (queue_name(1), caps[1])],
            Duration::from_secs(30),
            WorkerId::new(format!("w{worker}")).expect("valid worker id"),
        )
        .expect("model requests are valid");
        self.claim(&request).await
    }

    pub(super) async fn claim(&mut self, request: &DequeueRequest) -> Result<(), TestCaseError> {
        let model = kind(self.model.dequeue(request).await);
        let backend = kind(self.backend().dequeue(request).await);
        match (model, backend) {
            (Ok(m), Ok(b)) => {
                let b = b
                    .into_iter()
                    .map(|job| self.normalise_job(job))
                    .collect::<Result<Vec<_>, _>>()?;
                same("claimed jobs", &m, &b)?;
                self.leases.extend(m.iter().filter_map(Job::lease));
                Ok(())
            }
            (m, b) => same("dequeue", m.map(|_| ()), b.map(|_| ())),
        }
    }

    pub(super) async fn next_due(&self, queues: u8) -> Result<(), TestCaseError> {
        let names: Vec<QueueName> = (0..QUEUES.len())
            .filter(|i| queues & (1 << i) != 0)
            .map(queue_name)
            .collect();
        let model = kind(self.model.next_due(&names).await);
        let backend = kind(self.backend().next_due(&names).await);
        same("next_due", model, backend)
    }

    pub(super) async fn list_history(
        &self,
        queue: Option<usize>,
        status: Option<queue_core::FinalStatus>,
        before: Option<usize>,
        limit: u32,
    ) -> Result<(), TestCaseError> {
        let before = before.and_then(|pick| self.job(pick));
        let model_filter = HistoryFilter {
            queue: queue.map(queue_name),
            status,
            before: before.map(|(m, _)| m),
            limit,
        };
        let backend_filter = HistoryFilter {
            before: before.map(|(_, b)| b),
            ..model_filter.clone()
        };
        let model = kind(self.model.list_history(&model_filter).await);
        let backend = kind(self.backend().list_history(&backend_filter).await);
        match (model, backend) {
            (Ok(m), Ok(b)) => {
                let records = b
                    .records
                    .into_iter()
                    .map(|r| self.normalise_record(r))
                    .collect::<Result<Vec<_>, _>>()?;
                same("history page", &m.records, &records)?;
                let next = b.next.map(|id| self.to_model(id)).transpose()?;
                same("next page", m.next, next)
            }
            (m, b) => same("list_history", m.map(|_| ()), b.map(|_| ())),
        }
    }

    /// Lists, runs now or discards what a job filter selects, on both
    /// sides, and compares the page or the count.
    pub(super) async fn select(
        &self,
        action: Selection,
        (queue, state, key, before, limit): (
            Option<usize>,
            Option<JobState>,
            Option<u8>,
            Option<usize>,
            u32,
        ),
    ) -> Result<(), TestCaseError> {
        let before = before.and_then(|pick| self.job(pick));
        let model_filter = JobFilter {
            queue: queue.map(queue_name),
            state,
            unique_key: key.map(|k| UniqueKey::new(format!("k{k}")).expect("model keys are valid")),
            before: before.map(|(m, _)| m),
            limit,
            ..JobFilter::default()
        };
        let backend_filter = JobFilter {
            before: before.map(|(_, b)| b),
            ..model_filter.clone()
        };
        match action {
            Selection::List => {
                let model = kind(self.model.list_jobs(&model_filter).await);
                let backend = kind(self.backend().list_jobs(&backend_filter).await);
                match (model, backend) {
                    (Ok(m), Ok(b)) => {
                        let jobs = (b.jobs.into_iter())
                            .map(|job| self.normalise_job(job))
                            .collect::<Result<Vec<_>, _>>()?;
                        same("job page", &m.jobs, &jobs)?;
                        let next = b.next.map(|id| self.to_model(id)).transpose()?;
                        same("next job page", m.next, next)
                    }
                    (m, b) => same("list_jobs", m.map(|_| ()), b.map(|_| ())),
                }
            }
            Selection::RunNow => {
                let model = kind(self.model.run_now(&model_filter).await);
                let backend = kind(self.backend().run_now(&backend_filter).await);
                same("run_now", model, backend)
            }
            Selection::Discard => {
                let model = kind(self.model.discard_jobs(&model_filter).await);
                let backend = kind(self.backend().discard_jobs(&backend_filter).await);
                same("discard_jobs", model, backend)
            }
        }
    }

    pub(super) async fn concurrent_claims(
        &mut self,
        workers: u8,
        limit: u32,
    ) -> Result<(), TestCaseError> {
        let both = || (0..QUEUES.len()).map(queue_name).collect::<Vec<_>>();
        let request = |worker: u8| {
            DequeueRequest::new(
                both(),
                limit,
                Duration::from_secs(30),
                WorkerId::new(format!("c{worker}")).expect("valid worker id"),
            )
            .expect("model requests are valid")
        };
        // Polled together on this task, not spawned: each racer runs up to
        // its first await before the next one starts, so a storage that
        // checks, awaits and then acts meets the other racers inside that
        // window on every run, however busy the machine (spawned on two
        // threads, the first often finished before the second began). A
        // database still receives the claims at once.
        let backend = self.backend();
        let racers = (0..workers).map(|worker| {
            let request = request(worker);
            async move { (worker, backend.dequeue(&request).await) }
        });
        let mut claims = Vec::new();
        for (worker, claimed) in futures_util::future::join_all(racers).await {
            let claimed = claimed.map_err(|e| fail(format!("concurrent claim: {e}")))?;
            let jobs = claimed
                .into_iter()
                .map(|job| self.normalise_job(job))
                .collect::<Result<Vec<_>, _>>()?;
            claims.push((worker, jobs));
        }
        claims.sort_by_key(|(worker, _)| *worker);
        self.check_racing_claims(&claims, workers, limit)?;
        let now = self.model.current_time();
        // Racing claims of a fair queue run one at a time under its config
        // row's lock, in an order this test cannot see, and the turns they
        // leave depend on it: the model applies them in the order in which
        // claims one after the other would take what each racer got (at
        // each step, the first racer left whose jobs the model's claim
        // would take now), else in worker order.
        while !claims.is_empty() {
            let next = {
                let state = self.model.lock();
                (claims.iter())
                    .position(|(worker, jobs)| {
                        let mut got: Vec<JobId> = jobs.iter().map(|job| job.id).collect();
                        let mut would = (state.within_limits(&request(*worker), now))
                            .map(|narrowed| state.claimable(&narrowed, now))
                            .unwrap_or_default();
                        got.sort();
                        would.sort();
                        got == would
                    })
                    .unwrap_or(0)
            };
            let (worker, jobs) = claims.remove(next);
            let ids: Vec<_> = jobs.iter().map(|job| job.id).collect();
            let mut state = self.model.lock();
            let model = state.claim(&ids, &request(worker), now);
            state.take_tokens(&model, now);
            drop(state);
            same(&format!("jobs claimed by c{worker}"), &model, &jobs)?;
            self.leases.extend(model.iter().filter_map(Job::lease));
        }
        Ok(())
    }

    /// The promise of [`Storage::dequeue`] to racing claims, checked
    /// against the state before the round: no job twice, at most `limit`
    /// each, only jobs a claim could take under the queues' limits; within
    /// a queue, no racer takes a job while a better one of that queue is
    /// left free; across queues, a racer takes a worse job of one queue
    /// while a better one of queue `q` is left only when the round took at
    /// least `q`'s cap (`limit`, or its allowance when smaller) of `q`'s
    /// jobs: the better jobs a claim looks at were all being taken.
    fn check_racing_claims(
        &self,
        claims: &[(u8, Vec<Job>)],
        workers: u8,
        limit: u32,
    ) -> Result<(), TestCaseError> {
        let now = self.model.current_time();
        let deep = limit * u32::from(workers);
        let every_queue = DequeueRequest::with_queue_limits(
            (0..QUEUES.len()).map(|q| (queue_name(q), deep)).collect(),
            Duration::from_secs(30),
            WorkerId::new("c").expect("valid worker id"),
        )
        .expect("model requests are valid");
        let state = self.model.lock();
        let Some(allowed) = state.within_limits(&every_queue, now) else {
            return match claims.iter().find(|(_, jobs)| !jobs.is_empty()) {
                Some((worker, jobs)) => Err(fail(format!(
                    "c{worker} claimed job {} while no queue's limits allowed one",
                    jobs[0].id
                ))),
                None => Ok(()),
            };
        };
        let eligible = state.claimable(&allowed, now);
        let order = |id: &JobId| {
            let job = &state.jobs[id];
            (state.claim_key(job, now), job.queue.clone())
        };
        // Within a fair queue, better is sooner in its fair order (the
        // order `eligible` lists its jobs in), not the plain order.
        let place = |id: &JobId| eligible.iter().position(|e| e == id);
        let fair = |queue: &QueueName| state.limits.get(queue).is_some_and(|l| l.fair_groups);
        let taken: HashSet<JobId> = claims
            .iter()
            .flat_map(|(_, jobs)| jobs.iter().map(|j| j.id))
            .collect();
        let mut seen = HashSet::new();
        for (worker, jobs) in claims {
            same(
                &format!("at most {limit} jobs for c{worker}"),
                true,
                jobs.len() <= limit as usize,
            )?;
            for job in jobs {
                if !seen.insert(job.id) {
                    return Err(fail(format!(
                        "job {} claimed by two racing workers",
                        job.id
                    )));
                }
                if !eligible.contains(&job.id) {
                    return Err(fail(format!(
                        "c{worker} claimed job {}, outside each queue's best {deep} within its limits {eligible:?}",
                        job.id
                    )));
                }
                let (mine, queue) = order(&job.id);
                for left in eligible.iter().filter(|id| !taken.contains(id)) {
                    let (theirs, left_queue) = order(left);
                    let worse = if left_queue == queue && fair(&queue) {
                        place(left) > place(&job.id)
                    } else {
                        theirs > mine
                    };
                    if worse {
                        continue;
                    }
                    if left_queue == queue {
                        return Err(fail(format!(
                            "c{worker} claimed job {} of {queue} while its better job {left} was left free",
                            job.id
                        )));
                    }
                    let cap = limit.min(allowed.queue_limit(&left_queue));
                    let took = claims
                        .iter()
                        .flat_map(|(_, jobs)| jobs)
                        .filter(|j| j.queue == left_queue)
                        .count();
                    if took < cap as usize {
                        return Err(fail(format!(
                            "c{worker} claimed job {} of {queue} while job {left} of {left_queue} was better and left free, \
                             and the round took {took} of {left_queue}'s jobs, fewer than its cap {cap}",
                            job.id
                        )));
                    }
                }
            }
        }
        Ok(())
    }
}
