//! Reclaim: recovering jobs whose holder died, and exhausted jobs, in one
//! transaction.

use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use queue_core::{FinalStatus, MAX_BATCH, ReclaimOutcome, Result, validate_limit};

use crate::MySqlStorage;
use crate::bind::{Param, query};
use crate::complete::finish_live;
use crate::error::Failure;
use crate::lease::HeldRow;
use crate::sql::{self, RECLAIM_STALLED_EXHAUSTED, RECLAIM_STALLED_EXPIRED};

impl MySqlStorage {
    pub(crate) async fn reclaim_stalled_pooled(&self, limit: u32) -> Result<ReclaimOutcome> {
        validate_limit("limit", limit, MAX_BATCH)?;
        self.retrying(true, || async {
            let mut conn = self.connection().await?;
            let guard = self.guard(&mut conn).await?;
            let outcome = conn
                .transaction(async |conn| {
                    guard.open(conn).await?;
                    let reclaimed = self.reclaim_on(conn, limit).await?;
                    guard.close(conn).await?;
                    Ok(reclaimed)
                })
                .await;
            guard.finish(conn, outcome).await
        })
        .await
    }

    async fn reclaim_on(
        &self,
        conn: &mut AsyncMysqlConnection,
        limit: u32,
    ) -> Result<ReclaimOutcome, Failure> {
        let now = self.resolve_now(conn).await?;
        let mut chosen = query(
            RECLAIM_STALLED_EXPIRED,
            vec![Param::Time(now), Param::Int(i64::from(limit))],
        )
        .load::<HeldRow>(conn)
        .await?;
        let room = limit as usize - chosen.len();
        if room > 0 {
            let exhausted = query(RECLAIM_STALLED_EXHAUSTED, vec![Param::Int(room as i64)])
                .load::<HeldRow>(conn)
                .await?;
            chosen.extend(exhausted);
        }
        let (dead, requeue): (Vec<&HeldRow>, Vec<&HeldRow>) = chosen
            .iter()
            .partition(|row| row.attempts >= row.max_attempts);
        if !requeue.is_empty() {
            let sql = sql::reclaim_requeue(requeue.len());
            let mut params = vec![Param::Time(now), Param::Time(now)];
            params.extend(requeue.iter().map(|row| Param::Int(row.id)));
            query(&sql, params).execute(conn).await?;
        }
        if !dead.is_empty() {
            let ids: Vec<i64> = dead.iter().map(|row| row.id).collect();
            let sql = sql::reclaim_dead_letter(ids.len());
            let mut params = vec![Param::Time(now)];
            params.extend(ids.iter().map(|id| Param::Int(*id)));
            query(&sql, params).execute(conn).await?;
            let linked: Vec<i64> = dead
                .iter()
                .filter(|row| row.has_dependants())
                .map(|row| row.id)
                .collect();
            finish_live(conn, &ids, &linked, FinalStatus::DeadLetter, now).await?;
        }
        Ok(ReclaimOutcome {
            requeued: requeue.len() as u64,
            dead_lettered: dead.len() as u64,
        })
    }
}
