//! Wake-ups over pub/sub: the enqueue, resume, retry and configure
//! scripts publish the queue's name on `<namespace>:wakeups` when they
//! commit (a script either runs whole or not at all), and discard and
//! cancel publish the job's id on `<namespace>:cancels`;
//! `Storage::subscribe` listens to both on a connection of its own. In a cluster, PUBLISH reaches every node, so
//! one node's subscription hears every queue.

use std::time::Duration;

use futures_util::StreamExt;
use queue_core::{JobId, QueueName, Result, Wakeup, Wakeups};
use redis::aio::PubSubStream;

use crate::{RedisStorage, interpret_error};

/// How long a lost subscription waits before connecting again.
const RECONNECT_DELAY: Duration = Duration::from_millis(500);

/// What the wake-up stream carries between items.
struct Listener {
    client: redis::Client,
    channel: String,
    cancels: String,
    node: String,
    messages: Option<PubSubStream>,
}

impl Listener {
    async fn open(&self) -> Result<PubSubStream> {
        let mut pubsub = self
            .client
            .get_async_pubsub()
            .await
            .map_err(|e| interpret_error(&self.node, e))?;
        pubsub
            .subscribe(&[&self.channel, &self.cancels])
            .await
            .map_err(|e| interpret_error(&self.node, e))?;
        Ok(pubsub.into_on_message())
    }

    /// The next wake-up: a queue's name, or [`Wakeup::All`] once a lost
    /// subscription is back (signals may have been missed meanwhile).
    async fn next(&mut self) -> Result<Wakeup> {
        loop {
            match self.messages.as_mut() {
                Some(messages) => match messages.next().await {
                    Some(message) => {
                        // Only our scripts publish here; anything else is ignored.
                        let Ok(payload) = message.get_payload::<String>() else {
                            continue;
                        };
                        if message.get_channel_name() == self.cancels {
                            if let Ok(id) = payload.parse::<i64>() {
                                return Ok(Wakeup::Cancelled(JobId(id)));
                            }
                        } else if let Ok(queue) = QueueName::new(payload) {
                            return Ok(Wakeup::Queue(queue));
                        }
                    }
                    None => self.messages = None,
                },
                None => match self.open().await {
                    Ok(messages) => {
                        self.messages = Some(messages);
                        return Ok(Wakeup::All);
                    }
                    Err(error) => {
                        tokio::time::sleep(RECONNECT_DELAY).await;
                        return Err(error);
                    }
                },
            }
        }
    }
}

impl RedisStorage {
    /// A stream of wake-ups on a connection of its own, reconnecting by
    /// itself (yielding an error per failed attempt, then
    /// [`Wakeup::All`] once back).
    pub(crate) async fn wakeups(&self) -> Result<Wakeups> {
        let mut listener = Listener {
            client: self.pubsub_client().clone(),
            channel: self.keys.channel(),
            cancels: self.keys.cancels(),
            node: self.node().to_owned(),
            messages: None,
        };
        listener.messages = Some(listener.open().await?);
        Ok(Box::pin(futures_util::stream::unfold(
            listener,
            |mut listener| async move {
                let next = listener.next().await;
                Some((next, listener))
            },
        )))
    }
}
