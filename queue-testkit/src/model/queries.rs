//! The model test's newer operations: capped claims, `next_due` and
//! history listings, compared between the backend and the model.

use std::time::Duration;

use proptest::test_runner::TestCaseError;
use queue_core::{DequeueRequest, HistoryFilter, Job, QueueName, Storage, WorkerId};

use super::ops::QUEUES;
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
        let backend = kind(self.backend.dequeue(request).await);
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
        let backend = kind(self.backend.next_due(&names).await);
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
        let backend = kind(self.backend.list_history(&backend_filter).await);
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
}
