//! The worker registry: one `queue_worker` row per running worker.

use std::time::Duration;

use chrono::{DateTime, Utc};
use queue_core::time::duration_micros;
use queue_core::{Result, WorkerAges, WorkerId, WorkerInfo, WorkerRecord};
use sqlx::Row;

use crate::error::retrying;
use crate::{PgStorage, interpret_error};

impl PgStorage {
    /// `REGISTER_WORKER`: insert or replace, `last_seen` now.
    pub(crate) async fn register_worker_pooled(&self, worker: &WorkerInfo) -> Result<()> {
        let worker = worker.validate()?;
        let queues = worker.queues_json();
        retrying(true, || {
            self.db().execute(
                sqlx::query(self.sql.register_worker.clone())
                    .bind(self.now_override())
                    .bind(worker.id.as_str())
                    .bind(&worker.host)
                    .bind(i64::from(worker.pid))
                    .bind(&worker.version)
                    .bind(&queues)
                    .bind(worker.started_at),
            )
        })
        .await?;
        Ok(())
    }

    /// `DEREGISTER_WORKER`.
    pub(crate) async fn deregister_worker_pooled(&self, id: &WorkerId) -> Result<bool> {
        let done = retrying(true, || {
            self.db()
                .execute(sqlx::query(self.sql.deregister_worker.clone()).bind(id.as_str()))
        })
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// `LIST_WORKERS`: forget, then list judged at the statement's now.
    pub(crate) async fn list_workers_pooled(
        &self,
        silent_after: Duration,
        forget_after: Duration,
    ) -> Result<Vec<WorkerRecord>> {
        WorkerAges::validate(silent_after, forget_after)?;
        // On the primary even with a read pool: it forgets as it lists.
        let rows = retrying(true, || {
            self.db().fetch_all(
                sqlx::query(self.sql.list_workers.clone())
                    .bind(self.now_override())
                    .bind(duration_micros(forget_after)),
            )
        })
        .await?;
        rows.iter()
            .map(|row| {
                let now: DateTime<Utc> = row.try_get("now").map_err(interpret_error)?;
                let ages = WorkerAges::at(now, silent_after, forget_after)?;
                let info = WorkerInfo::from_columns(
                    row.try_get("worker_id").map_err(interpret_error)?,
                    row.try_get("host").map_err(interpret_error)?,
                    row.try_get("pid").map_err(interpret_error)?,
                    row.try_get("version").map_err(interpret_error)?,
                    row.try_get::<&str, _>("queues").map_err(interpret_error)?,
                    row.try_get("started_at").map_err(interpret_error)?,
                )?;
                let last_seen = row.try_get("last_seen").map_err(interpret_error)?;
                Ok(ages.record(info, last_seen))
            })
            .collect()
    }
}
