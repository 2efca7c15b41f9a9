//! Heartbeat: extending live leases, one script per queue.

use std::time::Duration;

use futures_util::future::try_join_all;
use queue_core::time::duration_micros;
use queue_core::{Lease, QueueError, Result, validate_lease};

use crate::complete::{lease_args, scatter};
use crate::{RedisStorage, scripts};

impl RedisStorage {
    pub(crate) async fn heartbeat_scripted(
        &self,
        leases: &[Lease],
        extend_by: Duration,
    ) -> Result<Vec<bool>> {
        validate_lease("extend_by", extend_by)?;
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let groups = self.by_queue(leases.iter()).await?;
        let now = self.now_arg();
        let extend = duration_micros(extend_by).to_string();
        let calls = groups.iter().map(|(queue, members)| {
            let mut args = Vec::with_capacity(2 + members.len() * 3);
            args.extend([now.clone(), extend.clone()]);
            for &i in members {
                args.extend(lease_args(&leases[i]));
            }
            async move {
                let answer: Vec<i64> = self
                    .invoke(&scripts::HEARTBEAT, &self.keys.queue(queue.as_str()), &args)
                    .await?;
                Ok::<_, QueueError>((members, answer))
            }
        });
        scatter(leases.len(), try_join_all(calls).await?)
    }
}
