//! The worker registry: one `queue_worker` row per running worker.

use std::time::Duration;

use queue_core::backend::stored_instant;
use queue_core::time::duration_micros;
use queue_core::{Result, WorkerAges, WorkerId, WorkerInfo, WorkerRecord};
use sqlx::Row;

use crate::{SqliteStorage, interpret_error, sql};

impl SqliteStorage {
    /// `REGISTER_WORKER`: insert or replace, `last_seen` now.
    pub(crate) async fn register_worker_pooled(&self, worker: &WorkerInfo) -> Result<()> {
        let worker = worker.validate()?;
        let queues = worker.queues_json();
        write_statement!(self, |conn, now| async {
            sqlx::query(sql::REGISTER_WORKER)
                .bind(worker.id.as_str())
                .bind(&worker.host)
                .bind(i64::from(worker.pid))
                .bind(&worker.version)
                .bind(&queues)
                .bind(worker.started_at.timestamp_micros())
                .bind(now)
                .execute(&mut *conn)
                .await?;
            Ok::<_, sqlx::Error>(())
        })
    }

    /// `DEREGISTER_WORKER`.
    pub(crate) async fn deregister_worker_pooled(&self, id: &WorkerId) -> Result<bool> {
        write_statement!(self, |conn, _now| async {
            let done = sqlx::query(sql::DEREGISTER_WORKER)
                .bind(id.as_str())
                .execute(&mut *conn)
                .await?;
            Ok::<_, sqlx::Error>(done.rows_affected() > 0)
        })
    }

    /// `LIST_WORKERS_FORGET` then `LIST_WORKERS`, in one write transaction
    /// judged at its now.
    pub(crate) async fn list_workers_pooled(
        &self,
        silent_after: Duration,
        forget_after: Duration,
    ) -> Result<Vec<WorkerRecord>> {
        WorkerAges::validate(silent_after, forget_after)?;
        let (now, rows) = write_tx!(self, |conn, now| async {
            sqlx::query(sql::LIST_WORKERS_FORGET)
                .bind(now)
                .bind(duration_micros(forget_after))
                .execute(&mut *conn)
                .await?;
            let rows = sqlx::query(sql::LIST_WORKERS).fetch_all(&mut *conn).await?;
            Ok::<_, sqlx::Error>((now, rows))
        })?;
        let now = stored_instant("now", now)?;
        let ages = WorkerAges::at(now, silent_after, forget_after)?;
        rows.iter()
            .map(|row| {
                let started: i64 = row.try_get("started_at").map_err(interpret_error)?;
                let seen: i64 = row.try_get("last_seen").map_err(interpret_error)?;
                let info = WorkerInfo::from_columns(
                    row.try_get("worker_id").map_err(interpret_error)?,
                    row.try_get("host").map_err(interpret_error)?,
                    row.try_get("pid").map_err(interpret_error)?,
                    row.try_get("version").map_err(interpret_error)?,
                    row.try_get::<&str, _>("queues").map_err(interpret_error)?,
                    stored_instant("started_at", started)?,
                )?;
                Ok(ages.record(info, stored_instant("last_seen", seen)?))
            })
            .collect()
    }
}
