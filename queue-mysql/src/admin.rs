//! Operator actions: discard and cancel, retry a dead letter, prune, pause and
//! resume; run now, discard and retry in bulk by filter.

use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use queue_core::time::duration_micros;
use queue_core::{
    FinalStatus, HistoryFilter, JobFilter, JobId, PruneRequest, QueueError, QueueName, Result,
};

use crate::bind::{Param, job_filter, query};
use crate::complete::finish_live;
use crate::error::Failure;
use crate::rows::IdRow;
use crate::sql::{
    self, DISCARD_LOCK, PAUSE_QUEUE, PRUNE_COUNTERS, PRUNE_HISTORY, RESUME_QUEUE,
    RETRY_DEAD_LETTER_LOCK, RETRY_DEAD_LETTERS_LOCK,
};
use crate::{MySqlStorage, workflow};

/// A dead letter `retry_dead_letters` may move: its id, queue and key.
#[derive(diesel::QueryableByName)]
struct DeadLetterRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    id: i64,
    #[diesel(sql_type = diesel::sql_types::Text)]
    queue_name: String,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    unique_key: Option<String>,
}

impl MySqlStorage {
    /// Discard or cancel (`status`): the live job goes to history as
    /// `status`; its holder's later ack, nack or heartbeat finds no lease.
    pub(crate) async fn discard_pooled(&self, id: JobId, status: FinalStatus) -> Result<()> {
        let found = self
            .retrying(false, || async {
                let mut conn = self.connection().await?;
                let guard = self.guard(&mut conn).await?;
                let outcome = conn
                    .transaction(async |conn| {
                        guard.open(conn).await?;
                        let now = self.resolve_now(conn).await?;
                        let locked = query(DISCARD_LOCK, vec![Param::Int(id.get())])
                            .load::<IdRow>(conn)
                            .await?;
                        if locked.is_empty() {
                            guard.close(conn).await?;
                            return Ok(false);
                        }
                        let linked = workflow::linked(conn, &[id.get()]).await?;
                        query(
                            &sql::discard_jobs(1),
                            vec![
                                Param::Text(status.as_str().to_owned()),
                                Param::Time(now),
                                Param::Int(id.get()),
                            ],
                        )
                        .execute(conn)
                        .await?;
                        finish_live(conn, &[id.get()], &linked, status, now).await?;
                        guard.close(conn).await?;
                        Ok(true)
                    })
                    .await;
                guard.finish(conn, outcome).await
            })
            .await?;
        if found {
            Ok(())
        } else {
            Err(QueueError::not_found(format!("live job {id}")))
        }
    }

    pub(crate) async fn retry_dead_letter_pooled(&self, id: JobId) -> Result<()> {
        let found = self
            .retrying(false, || async {
                let mut conn = self.connection().await?;
                let guard = self.guard(&mut conn).await?;
                let outcome = conn
                    .transaction(async |conn| {
                        guard.open(conn).await?;
                        let now = self.resolve_now(conn).await?;
                        let locked = query(RETRY_DEAD_LETTER_LOCK, vec![Param::Int(id.get())])
                            .load::<IdRow>(conn)
                            .await?;
                        if locked.is_empty() {
                            guard.close(conn).await?;
                            return Ok(false);
                        }
                        query(
                            &sql::retry_dead_letters_requeue(1),
                            vec![Param::Time(now), Param::Time(now), Param::Int(id.get())],
                        )
                        .execute(conn)
                        .await?;
                        query(
                            &sql::retry_dead_letters_delete(1),
                            vec![Param::Int(id.get())],
                        )
                        .execute(conn)
                        .await?;
                        guard.close(conn).await?;
                        Ok(true)
                    })
                    .await;
                guard.finish(conn, outcome).await
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

    pub(crate) async fn prune_history_pooled(&self, request: &PruneRequest) -> Result<u64> {
        request.validate()?;
        let status = request.status.map(|s| s.as_str().to_owned());
        self.retrying(true, || async {
            let mut conn = self.connection().await?;
            let params = vec![
                Param::OptTime(self.now_override()),
                Param::Int(duration_micros(request.older_than)),
                Param::OptText(status.clone()),
                Param::OptText(status.clone()),
                Param::Int(i64::from(request.limit)),
            ];
            let pruned = query(PRUNE_HISTORY, params).execute(&mut conn).await? as u64;
            if pruned > 0 {
                // After the prune committed: then the older minutes'
                // counters sum to zero (see `PRUNE_COUNTERS`).
                query(PRUNE_COUNTERS, vec![]).execute(&mut conn).await?;
            }
            Ok(pruned)
        })
        .await
    }

    pub(crate) async fn set_paused(&self, queue: &QueueName, paused: bool) -> Result<()> {
        let now = self.now_override();
        let name = queue.as_str().to_owned();
        self.retrying(true, || async {
            let mut conn = self.connection().await?;
            let (sql, params) = if paused {
                (
                    PAUSE_QUEUE,
                    vec![
                        Param::Text(name.clone()),
                        Param::OptTime(now),
                        Param::OptTime(now),
                    ],
                )
            } else {
                (
                    RESUME_QUEUE,
                    vec![Param::OptTime(now), Param::Text(name.clone())],
                )
            };
            query(sql, params).execute(&mut conn).await?;
            Ok(())
        })
        .await
    }

    pub(crate) async fn run_now_pooled(&self, filter: &JobFilter) -> Result<u64> {
        filter.validate()?;
        let Some(scheduled) = filter.scheduled_only() else {
            return Ok(0);
        };
        self.retrying(false, || async {
            let mut conn = self.connection().await?;
            let guard = self.guard(&mut conn).await?;
            let outcome = conn
                .transaction(async |conn| {
                    guard.open(conn).await?;
                    let (now, ids) = self.lock_selected(conn, &scheduled).await?;
                    if !ids.is_empty() {
                        let mut params = vec![Param::Time(now), Param::Time(now)];
                        params.extend(ids.iter().map(|id| Param::Int(*id)));
                        query(&sql::run_now(ids.len()), params)
                            .execute(conn)
                            .await?;
                    }
                    guard.close(conn).await?;
                    Ok(ids.len() as u64)
                })
                .await;
            guard.finish(conn, outcome).await
        })
        .await
    }

    pub(crate) async fn discard_jobs_pooled(&self, filter: &JobFilter) -> Result<u64> {
        filter.validate()?;
        self.retrying(false, || async {
            let mut conn = self.connection().await?;
            let guard = self.guard(&mut conn).await?;
            let outcome = conn
                .transaction(async |conn| {
                    guard.open(conn).await?;
                    let (now, ids) = self.lock_selected(conn, filter).await?;
                    if !ids.is_empty() {
                        let linked = workflow::linked(conn, &ids).await?;
                        let mut params = vec![
                            Param::Text(FinalStatus::Discarded.as_str().to_owned()),
                            Param::Time(now),
                        ];
                        params.extend(ids.iter().map(|id| Param::Int(*id)));
                        query(&sql::discard_jobs(ids.len()), params)
                            .execute(conn)
                            .await?;
                        finish_live(conn, &ids, &linked, FinalStatus::Discarded, now).await?;
                    }
                    guard.close(conn).await?;
                    Ok(ids.len() as u64)
                })
                .await;
            guard.finish(conn, outcome).await
        })
        .await
    }

    pub(crate) async fn retry_dead_letters_pooled(&self, filter: &HistoryFilter) -> Result<u64> {
        filter.validate()?;
        let queue = filter.queue.as_ref().map(|q| q.as_str().to_owned());
        let before = filter.before.map(JobId::get);
        self.retrying(false, || async {
            let mut conn = self.connection().await?;
            let guard = self.guard(&mut conn).await?;
            let outcome = conn
                .transaction(async |conn| {
                    guard.open(conn).await?;
                    let now = self.resolve_now(conn).await?;
                    let ids = self
                        .movable_dead_letters(conn, queue.as_deref(), before, filter.limit)
                        .await?;
                    if !ids.is_empty() {
                        let mut params = vec![Param::Time(now), Param::Time(now)];
                        params.extend(ids.iter().map(|id| Param::Int(*id)));
                        query(&sql::retry_dead_letters_requeue(ids.len()), params)
                            .execute(conn)
                            .await?;
                        let params = ids.iter().map(|id| Param::Int(*id)).collect();
                        query(&sql::retry_dead_letters_delete(ids.len()), params)
                            .execute(conn)
                            .await?;
                    }
                    guard.close(conn).await?;
                    Ok(ids.len() as u64)
                })
                .await;
            guard.finish(conn, outcome).await
        })
        .await
    }

    /// Up to `limit` dead letters of `queue` (any when `None`) below
    /// `before`, newest first, locked, that can move back: their unique
    /// key is not live, and not that of a newer one moving in the same
    /// call (which stays behind, as a key live again does). Reads past
    /// such duplicates until `limit` can move or none are left.
    async fn movable_dead_letters(
        &self,
        conn: &mut AsyncMysqlConnection,
        queue: Option<&str>,
        mut before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<i64>, Failure> {
        let mut ids = Vec::new();
        let mut keys = std::collections::HashSet::new();
        while ids.len() < limit as usize {
            let wanted = limit as usize - ids.len();
            let params = vec![
                Param::OptText(queue.map(str::to_owned)),
                Param::OptText(queue.map(str::to_owned)),
                Param::OptInt(before),
                Param::OptInt(before),
                Param::Int(i64::try_from(wanted).unwrap_or(i64::MAX)),
            ];
            let rows = query(RETRY_DEAD_LETTERS_LOCK, params)
                .load::<DeadLetterRow>(conn)
                .await?;
            for row in &rows {
                let fresh = match &row.unique_key {
                    Some(key) => keys.insert((row.queue_name.clone(), key.clone())),
                    None => true,
                };
                if fresh {
                    ids.push(row.id);
                }
            }
            match rows.last() {
                Some(last) if rows.len() == wanted => before = Some(last.id),
                _ => break,
            }
        }
        Ok(ids)
    }

    /// The database's now, and the ids `filter` selects at it, locked.
    async fn lock_selected(
        &self,
        conn: &mut AsyncMysqlConnection,
        filter: &JobFilter,
    ) -> Result<(chrono::NaiveDateTime, Vec<i64>), Failure> {
        let now = self.resolve_now(conn).await?;
        let mut params = job_filter(filter, now);
        params.push(Param::Int(i64::from(filter.limit)));
        let ids = query(&sql::lock_selected(filter), params)
            .load::<IdRow>(conn)
            .await?
            .iter()
            .map(|row| row.id)
            .collect();
        Ok((now, ids))
    }
}
