//! Reclaim: recovering jobs whose holder died, and exhausted jobs, in one
//! statement.

use queue_core::{MAX_BATCH, ReclaimOutcome, Result, validate_limit};
use sqlx::Row;

use crate::PgStorage;
use crate::error::retrying;

fn count(value: i64) -> u64 {
    u64::try_from(value).unwrap_or_default()
}

impl PgStorage {
    pub(crate) async fn reclaim_stalled_pooled(&self, limit: u32) -> Result<ReclaimOutcome> {
        validate_limit("limit", limit, MAX_BATCH)?;
        let row = retrying(true, || {
            self.db().fetch_one(
                sqlx::query(self.sql.reclaim_stalled.clone())
                    .bind(self.now_override())
                    .bind(i64::from(limit)),
            )
        })
        .await?;
        let requeued: i64 = row.try_get("requeued").map_err(crate::interpret_error)?;
        let dead: i64 = row
            .try_get("dead_lettered")
            .map_err(crate::interpret_error)?;
        Ok(ReclaimOutcome {
            requeued: count(requeued),
            dead_lettered: count(dead),
        })
    }
}
