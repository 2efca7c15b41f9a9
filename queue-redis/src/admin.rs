//! Operator actions: discard, retry a dead letter, prune, pause and resume.

use futures_util::future::try_join_all;
use queue_core::time::duration_micros;
use queue_core::{FinalStatus, JobId, PruneRequest, QueueError, QueueName, Result};

use crate::keys::token;
use crate::{RedisStorage, scripts};

impl RedisStorage {
    /// Discard or cancel (`status`): the live job moves to history, and
    /// its id is published to the subscribers' cancel channel.
    pub(crate) async fn discard_scripted(&self, id: JobId, status: FinalStatus) -> Result<()> {
        let not_found = || QueueError::not_found(format!("live job {id}"));
        let Some(queue) = self.queue_of(id).await? else {
            return Err(not_found());
        };
        let done = self.discard_all(&[(queue, id)], status).await?;
        if done == 1 { Ok(()) } else { Err(not_found()) }
    }

    /// Discards or cancels (`status`) the live jobs `jobs` of their queues
    /// in one script (they may sit in several queues only on standalone
    /// Redis): each moves to history and its id is published to the
    /// cancel channel, then their dependants learn of it, in ascending id
    /// order. Returns how many were live.
    pub(crate) async fn discard_all(
        &self,
        jobs: &[(QueueName, JobId)],
        status: FinalStatus,
    ) -> Result<u64> {
        let mut keys: Vec<String> = Vec::new();
        let mut args = vec![
            self.now_arg(),
            status.as_str().to_owned(),
            self.keys.cancels(),
        ];
        for (queue, id) in jobs {
            let key = self.keys.queue(queue.as_str());
            let position = match keys.iter().position(|k| *k == key) {
                Some(position) => position,
                None => {
                    keys.push(key);
                    keys.len() - 1
                }
            };
            args.extend([(position + 1).to_string(), token(*id)]);
        }
        if keys.is_empty() {
            return Ok(0);
        }
        self.invoke_keys(&scripts::DISCARD, &keys, &args).await
    }

    pub(crate) async fn retry_dead_letter_scripted(&self, id: JobId) -> Result<()> {
        let not_found = || QueueError::not_found(format!("dead letter {id}"));
        let Some(queue) = self.queue_of(id).await? else {
            return Err(not_found());
        };
        let args = [
            self.now_arg(),
            token(id),
            self.keys.channel(),
            queue.as_str().to_owned(),
        ];
        let answer: Vec<String> = self
            .invoke(
                &scripts::RETRY_DEAD_LETTER,
                &self.keys.queue(queue.as_str()),
                &args,
            )
            .await?;
        match answer.as_slice() {
            [code] if code == "1" => Ok(()),
            [code] if code == "0" => Err(not_found()),
            [code, key] if code == "-1" => Err(QueueError::Conflict {
                reason: format!(
                    "dead letter {id}: unique key {key:?} is live again in queue {queue}"
                ),
            }),
            other => Err(QueueError::backend(format!(
                "the retry script answered {other:?}"
            ))),
        }
    }

    pub(crate) async fn prune_history_scripted(&self, request: &PruneRequest) -> Result<u64> {
        request.validate()?;
        let queues = self.all_queues().await?;
        let status = request.status.map(FinalStatus::as_str).unwrap_or_default();
        let older = duration_micros(request.older_than).to_string();
        let now = self.now_arg();
        let peek_args = [
            now.clone(),
            older.clone(),
            status.to_owned(),
            request.limit.to_string(),
        ];
        let counts = self
            .oldest_first(
                &queues,
                &scripts::PRUNE_HISTORY_PEEK,
                &peek_args,
                request.limit,
            )
            .await?;
        let calls = queues
            .iter()
            .zip(counts)
            .filter(|(_, n)| *n > 0)
            .map(|(queue, n)| {
                let args = [now.clone(), older.clone(), status.to_owned(), n.to_string()];
                async move {
                    self.invoke::<u64>(
                        &scripts::PRUNE_HISTORY,
                        &self.keys.queue(queue.as_str()),
                        &args,
                    )
                    .await
                }
            });
        Ok(try_join_all(calls).await?.into_iter().sum())
    }

    pub(crate) async fn set_paused(&self, queue: &QueueName, paused: bool) -> Result<()> {
        // A paused queue is listed by stats even without jobs: register it.
        self.register(&[queue], 0).await?;
        let args = [
            self.now_arg(),
            if paused { "1" } else { "0" }.to_owned(),
            self.keys.channel(),
            queue.as_str().to_owned(),
        ];
        let _: i64 = self
            .invoke(
                &scripts::PAUSE_QUEUE,
                &self.keys.queue(queue.as_str()),
                &args,
            )
            .await?;
        Ok(())
    }
}
