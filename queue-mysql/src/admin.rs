//! Operator actions: discard, retry a dead letter, prune, pause and resume.

use diesel_async::{AsyncConnection, RunQueryDsl};
use queue_core::time::duration_micros;
use queue_core::{JobId, PruneRequest, QueueError, QueueName, Result};

use crate::MySqlStorage;
use crate::bind::{Param, query};
use crate::complete::delete_live;
use crate::error::retrying;
use crate::rows::IdRow;
use crate::sql::{
    self, DISCARD_LOCK, PAUSE, PRUNE, RESUME, RETRY_DEAD_LETTER_DELETE, RETRY_DEAD_LETTER_LOCK,
    RETRY_DEAD_LETTER_REQUEUE,
};

impl MySqlStorage {
    pub(crate) async fn discard_pooled(&self, id: JobId) -> Result<()> {
        let found = retrying(false, || async {
            let mut conn = self.connection().await?;
            conn.transaction(async |conn| {
                let now = self.resolve_now(conn).await?;
                let locked = query(DISCARD_LOCK, vec![Param::Int(id.get())])
                    .load::<IdRow>(conn)
                    .await?;
                if locked.is_empty() {
                    return Ok(false);
                }
                query(
                    &sql::discard_archive(),
                    vec![Param::Time(now), Param::Int(id.get())],
                )
                .execute(conn)
                .await?;
                delete_live(conn, &[id.get()]).await?;
                Ok(true)
            })
            .await
        })
        .await?;
        if found {
            Ok(())
        } else {
            Err(QueueError::not_found(format!("live job {id}")))
        }
    }

    pub(crate) async fn retry_dead_letter_pooled(&self, id: JobId) -> Result<()> {
        let found = retrying(false, || async {
            let mut conn = self.connection().await?;
            conn.transaction(async |conn| {
                let now = self.resolve_now(conn).await?;
                let locked = query(RETRY_DEAD_LETTER_LOCK, vec![Param::Int(id.get())])
                    .load::<IdRow>(conn)
                    .await?;
                if locked.is_empty() {
                    return Ok(false);
                }
                query(
                    RETRY_DEAD_LETTER_REQUEUE,
                    vec![Param::Time(now), Param::Time(now), Param::Int(id.get())],
                )
                .execute(conn)
                .await?;
                query(RETRY_DEAD_LETTER_DELETE, vec![Param::Int(id.get())])
                    .execute(conn)
                    .await?;
                Ok(true)
            })
            .await
        })
        .await
        .map_err(|error| match error {
            QueueError::Conflict { reason } => QueueError::Conflict {
                reason: format!("dead letter {id}: its unique key is live again ({reason})"),
            },
            other => other,
        })?;
        if found {
            Ok(())
        } else {
            Err(QueueError::not_found(format!("dead letter {id}")))
        }
    }

    pub(crate) async fn prune_pooled(&self, request: &PruneRequest) -> Result<u64> {
        request.validate()?;
        let status = request.status.map(|s| s.as_str().to_owned());
        retrying(true, || async {
            let mut conn = self.connection().await?;
            let params = vec![
                Param::OptTime(self.now_override()),
                Param::Int(duration_micros(request.older_than)),
                Param::OptText(status.clone()),
                Param::OptText(status.clone()),
                Param::Int(i64::from(request.limit)),
            ];
            Ok(query(PRUNE, params).execute(&mut conn).await? as u64)
        })
        .await
    }

    pub(crate) async fn set_paused(&self, queue: &QueueName, paused: bool) -> Result<()> {
        let now = self.now_override();
        let name = queue.as_str().to_owned();
        retrying(true, || async {
            let mut conn = self.connection().await?;
            let (sql, params) = if paused {
                (
                    PAUSE,
                    vec![
                        Param::Text(name.clone()),
                        Param::OptTime(now),
                        Param::OptTime(now),
                    ],
                )
            } else {
                (RESUME, vec![Param::OptTime(now), Param::Text(name.clone())])
            };
            query(sql, params).execute(&mut conn).await?;
            Ok(())
        })
        .await
    }
}
