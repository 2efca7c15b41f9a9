//! Periodic fires: each fire time of a schedule enqueues one job, however
//! many workers try, through the `queue_schedule` row of the schedule.

use chrono::NaiveDateTime;
use diesel::QueryableByName;
use diesel::result::{DatabaseErrorKind, Error};
use diesel::sql_types::{Datetime, Nullable, Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use queue_core::backend::stored;
use queue_core::{EnqueueOutcome, PeriodicFire, Result, ScheduleName, ScheduleRecord, ValidFire};

use crate::MySqlStorage;
use crate::bind::{Param, naive, query};
use crate::error::Failure;
use crate::galera::Guard;
use crate::rows::utc;
use crate::sql::{
    ENQUEUE_PERIODIC_INSERT, ENQUEUE_PERIODIC_LOCK, ENQUEUE_PERIODIC_UPDATE, SCHEDULES,
};

#[derive(QueryableByName)]
struct LastFire {
    #[diesel(sql_type = Datetime)]
    last_fire_at: NaiveDateTime,
}

#[derive(QueryableByName)]
struct ScheduleRow {
    #[diesel(sql_type = Text)]
    schedule_name: String,
    #[diesel(sql_type = Datetime)]
    last_fire_at: NaiveDateTime,
    #[diesel(sql_type = Nullable<Datetime>)]
    next_fire_at: Option<NaiveDateTime>,
}

/// Tries of a fire whose schedule's first row another caller inserted at
/// the same time (the retry then finds that row).
const FIRST_FIRE_TRIES: usize = 3;

impl MySqlStorage {
    /// One transaction (guarded on Galera: `galera.rs`): lock the
    /// schedule's row, record the fire only if no fire at or after its
    /// time is recorded, and enqueue its job only then. Two first fires of a new schedule race on its primary key: the
    /// loser's INSERT waits for the winner and fails as a duplicate, and
    /// its retry finds the winner's row.
    pub(crate) async fn enqueue_periodic_pooled(
        &self,
        fire: &PeriodicFire,
    ) -> Result<Option<EnqueueOutcome>> {
        let valid = fire.validate()?;
        self.retrying(false, || async {
            let mut conn = self.connection().await?;
            let guard = self.guard(&mut conn).await?;
            let mut tries = 0;
            let outcome = loop {
                let result = conn
                    .transaction(async |conn| {
                        guard.open(conn).await?;
                        let outcome = self.fire_on(conn, &valid).await?;
                        guard.close(conn).await?;
                        Ok(outcome)
                    })
                    .await;
                match result {
                    Err(Failure::Query(Error::DatabaseError(
                        DatabaseErrorKind::UniqueViolation,
                        _,
                    ))) if tries + 1 < FIRST_FIRE_TRIES => tries += 1,
                    other => break other,
                }
            };
            guard.finish(conn, outcome).await
        })
        .await
    }

    async fn fire_on(
        &self,
        conn: &mut AsyncMysqlConnection,
        fire: &ValidFire,
    ) -> Result<Option<EnqueueOutcome>, Failure> {
        let name = || Param::Text(fire.schedule.as_str().to_owned());
        let at = Param::Time(naive(fire.fire_at));
        let next = Param::OptTime(fire.next_fire_at.map(naive));
        let now = Param::OptTime(self.now_override());
        let last = query(ENQUEUE_PERIODIC_LOCK, vec![name()])
            .load::<LastFire>(conn)
            .await?;
        match <[LastFire]>::first(&last) {
            Some(last) if utc(last.last_fire_at) >= fire.fire_at => return Ok(None),
            Some(_) => {
                query(ENQUEUE_PERIODIC_UPDATE, vec![at, next, now, name()])
                    .execute(conn)
                    .await?;
            }
            None => {
                query(ENQUEUE_PERIODIC_INSERT, vec![name(), at, next, now])
                    .execute(conn)
                    .await?;
            }
        }
        let outcome = self
            .insert_all(conn, std::slice::from_ref(&fire.job), Guard::NONE)
            .await?
            .pop()
            .ok_or(Failure::Invariant("enqueue returned no outcome"))?;
        Ok(Some(outcome))
    }

    pub(crate) async fn schedules_pooled(&self) -> Result<Vec<ScheduleRecord>> {
        let rows = self
            .retrying(true, || async {
                let mut conn = self.connection().await?;
                Ok(query(SCHEDULES, Vec::new())
                    .load::<ScheduleRow>(&mut conn)
                    .await?)
            })
            .await?;
        let mut records = rows
            .into_iter()
            .map(|row| {
                Ok(ScheduleRecord {
                    schedule: stored("schedule_name", row.schedule_name, ScheduleName::new)?,
                    last_fire_at: utc(row.last_fire_at),
                    next_fire_at: row.next_fire_at.map(utc),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        records.sort_by(|a, b| a.schedule.cmp(&b.schedule));
        Ok(records)
    }
}
