//! The worker registry: one `queue_worker` row per running worker.

use std::time::Duration;

use chrono::NaiveDateTime;
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Datetime, Text};
use diesel_async::RunQueryDsl;
use queue_core::{Result, WorkerAges, WorkerId, WorkerInfo, WorkerRecord};

use crate::MySqlStorage;
use crate::bind::{Param, naive, query};
use crate::error::Failure;
use crate::rows::{NowRow, utc};
use crate::sql::{DEREGISTER_WORKER, LIST_WORKERS, LIST_WORKERS_FORGET, NOW, REGISTER_WORKER};

#[derive(QueryableByName)]
struct WorkerRow {
    #[diesel(sql_type = Text)]
    worker_id: String,
    #[diesel(sql_type = Text)]
    host: String,
    #[diesel(sql_type = BigInt)]
    pid: i64,
    #[diesel(sql_type = Text)]
    version: String,
    #[diesel(sql_type = Text)]
    queues: String,
    #[diesel(sql_type = Datetime)]
    started_at: NaiveDateTime,
    #[diesel(sql_type = Datetime)]
    last_seen: NaiveDateTime,
}

impl MySqlStorage {
    /// `REGISTER_WORKER`: insert or replace, `last_seen` now.
    pub(crate) async fn register_worker_pooled(&self, worker: &WorkerInfo) -> Result<()> {
        let worker = worker.validate()?;
        let queues = worker.queues_json();
        self.retrying(true, || async {
            let mut conn = self.connection().await?;
            let params = vec![
                Param::Text(worker.id.as_str().to_owned()),
                Param::Text(worker.host.clone()),
                Param::Int(i64::from(worker.pid)),
                Param::Text(worker.version.clone()),
                Param::Text(queues.clone()),
                Param::Time(naive(worker.started_at)),
                Param::OptTime(self.now_override()),
            ];
            query(REGISTER_WORKER, params).execute(&mut conn).await?;
            Ok(())
        })
        .await
    }

    /// `DEREGISTER_WORKER`.
    pub(crate) async fn deregister_worker_pooled(&self, id: &WorkerId) -> Result<bool> {
        self.retrying(true, || async {
            let mut conn = self.connection().await?;
            let params = vec![Param::Text(id.as_str().to_owned())];
            let deleted = query(DEREGISTER_WORKER, params).execute(&mut conn).await?;
            Ok(deleted > 0)
        })
        .await
    }

    /// [`NOW`], then `LIST_WORKERS_FORGET` and `LIST_WORKERS` on one
    /// connection, judged at that now.
    pub(crate) async fn list_workers_pooled(
        &self,
        silent_after: Duration,
        forget_after: Duration,
    ) -> Result<Vec<WorkerRecord>> {
        WorkerAges::validate(silent_after, forget_after)?;
        let (ages, rows) = self
            .retrying(true, || async {
                let mut conn = self.connection().await?;
                let now = query(NOW, vec![Param::OptTime(self.now_override())])
                    .get_result::<NowRow>(&mut conn)
                    .await?;
                let ages = WorkerAges::at(utc(now.now_ts), silent_after, forget_after)
                    .map_err(|_| Failure::Invariant("worker ages were validated"))?;
                let forget = vec![Param::Time(naive(ages.forget_before))];
                query(LIST_WORKERS_FORGET, forget)
                    .execute(&mut conn)
                    .await?;
                let rows = query(LIST_WORKERS, Vec::new())
                    .load::<WorkerRow>(&mut conn)
                    .await?;
                Ok((ages, rows))
            })
            .await?;
        rows.into_iter()
            .map(|row| {
                let info = WorkerInfo::from_columns(
                    row.worker_id,
                    row.host,
                    row.pid,
                    row.version,
                    &row.queues,
                    utc(row.started_at),
                )?;
                Ok(ages.record(info, utc(row.last_seen)))
            })
            .collect()
    }
}
