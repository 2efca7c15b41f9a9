//! Periodic jobs: cron schedules declared on the worker, fired without a
//! leader. Every worker that declares a schedule computes its fire times
//! and offers each one to [`Storage::enqueue_periodic`]; the storage keeps
//! the schedule's latest fire, so each fire time yields exactly one job
//! however many workers (and hosts) offer it.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;
use queue_core::{NewJob, PeriodicFire, QueueError, Result, ScheduleName, Storage};
use tracing::{debug, info, warn};

use crate::shared::Shared;

/// A fire found later than this after its time counts as missed: see
/// [`Missed`].
pub const LATE_AFTER: Duration = Duration::from_secs(60);

/// What happens to fire times that passed while no worker ran the
/// schedule (or while the database could not be reached).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Missed {
    /// Fire only the latest passed fire time, and only if it is at most
    /// [`LATE_AFTER`] old; skip the rest. The default.
    #[default]
    Skip,
    /// Fire up to this many of the latest passed fire times, oldest first,
    /// however late.
    CatchUp(u32),
}

/// Builds the job of one fire from its fire time.
type MakeJob = dyn Fn(DateTime<Utc>) -> NewJob + Send + Sync;

/// A cron schedule and the job each of its fires enqueues.
#[derive(Clone)]
pub struct Periodic {
    name: ScheduleName,
    expression: String,
    cron: Cron,
    time_zone: Tz,
    missed: Missed,
    job: Arc<MakeJob>,
}

impl fmt::Debug for Periodic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Periodic")
            .field("name", &self.name)
            .field("expression", &self.expression)
            .field("time_zone", &self.time_zone)
            .field("missed", &self.missed)
            .finish_non_exhaustive()
    }
}

impl Periodic {
    /// A schedule named `name` (the key its fires are recorded under: keep
    /// it stable across deploys) firing on the cron `expression` (five
    /// fields, or six with seconds first), in UTC until
    /// [`Periodic::time_zone`] says otherwise. `job` builds each fire's job
    /// from its fire time.
    ///
    /// # Errors
    /// [`QueueError::InvalidInput`]: `schedule` (an invalid name) or `cron`
    /// (an expression that does not parse).
    pub fn new(
        name: &str,
        expression: &str,
        job: impl Fn(DateTime<Utc>) -> NewJob + Send + Sync + 'static,
    ) -> Result<Self> {
        let name = ScheduleName::new(name)?;
        let cron = Cron::from_str(expression)
            .map_err(|e| QueueError::invalid("cron", format!("{expression:?}: {e}")))?;
        Ok(Self {
            name,
            expression: expression.to_owned(),
            cron,
            time_zone: Tz::UTC,
            missed: Missed::default(),
            job: Arc::new(job),
        })
    }

    /// Reads the expression in the IANA time zone `name` (e.g.
    /// `Europe/Paris`), daylight-saving changes included.
    ///
    /// # Errors
    /// [`QueueError::InvalidInput`] (`time_zone`) for an unknown zone.
    pub fn time_zone(mut self, name: &str) -> Result<Self> {
        self.time_zone = Tz::from_str(name).map_err(|_| {
            QueueError::invalid("time_zone", format!("{name:?} is not an IANA time zone"))
        })?;
        Ok(self)
    }

    /// What to do with missed fires (default [`Missed::Skip`]).
    pub fn missed(mut self, missed: Missed) -> Self {
        self.missed = missed;
        self
    }

    /// The schedule's name.
    pub fn name(&self) -> &ScheduleName {
        &self.name
    }

    /// The cron expression as given.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The first fire time strictly after `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron
            .find_next_occurrence(&after.with_timezone(&self.time_zone), false)
            .ok()
            .map(|at| at.with_timezone(&Utc))
    }

    /// The latest fire time at or before `at`.
    fn latest_at_or_before(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron
            .find_previous_occurrence(&at.with_timezone(&self.time_zone), true)
            .ok()
            .map(|at| at.with_timezone(&Utc))
    }

    /// The fire times in `(after, now]` that the policy fires, oldest first.
    pub fn due(&self, after: DateTime<Utc>, now: DateTime<Utc>) -> Vec<DateTime<Utc>> {
        let keep = match self.missed {
            Missed::Skip => 1,
            Missed::CatchUp(n) => n as usize,
        };
        let mut due = Vec::new();
        let mut cursor = now;
        while due.len() < keep {
            match self.latest_at_or_before(cursor) {
                Some(at) if at > after => {
                    due.push(at);
                    cursor = at - chrono::TimeDelta::microseconds(1);
                }
                _ => break,
            }
        }
        if self.missed == Missed::Skip {
            let late = chrono::TimeDelta::from_std(LATE_AFTER).unwrap_or_default();
            due.retain(|at| now - *at <= late);
        }
        due.reverse();
        due
    }

    fn fire(&self, at: DateTime<Utc>) -> PeriodicFire {
        PeriodicFire {
            schedule: self.name.clone(),
            fire_at: at,
            next_fire_at: self.next_after(at),
            job: (self.job)(at),
        }
    }
}

/// A schedule a worker runs, with its next fire time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleInfo {
    /// The schedule's name.
    pub name: ScheduleName,
    /// Its cron expression.
    pub expression: String,
    /// Its time zone's IANA name.
    pub time_zone: String,
    /// Its next fire time after now (the worker's clock).
    pub next_fire_at: Option<DateTime<Utc>>,
}

impl ScheduleInfo {
    pub(crate) fn of(periodic: &Periodic, now: DateTime<Utc>) -> Self {
        Self {
            name: periodic.name.clone(),
            expression: periodic.expression.clone(),
            time_zone: periodic.time_zone.name().to_owned(),
            next_fire_at: periodic.next_after(now),
        }
    }
}

/// Offers every due fire of `schedules` to the storage, on the storage's
/// clock, until `stop_fetching` fires.
pub(crate) async fn run<S: Storage>(shared: Arc<Shared<S>>, schedules: Vec<Periodic>) {
    if schedules.is_empty() {
        return;
    }
    let Some(mut cursors) = start(&shared, &schedules).await else {
        return;
    };
    loop {
        let now = match shared.storage.now().await {
            Ok(now) => now,
            Err(error) => {
                warn!(%error, "reading the clock for periodic jobs failed; retrying");
                if sleep_or_stop(&shared, Duration::from_secs(1)).await {
                    return;
                }
                continue;
            }
        };
        for periodic in &schedules {
            let cursor = cursors.get(&periodic.name).copied().unwrap_or(now);
            for at in periodic.due(cursor, now) {
                offer(&shared, periodic, at).await;
            }
            cursors.insert(periodic.name.clone(), now);
        }
        let next = schedules.iter().filter_map(|p| p.next_after(now)).min();
        let wait = next
            .and_then(|next| (next - now).to_std().ok())
            .map_or(LATE_AFTER, |wait| wait + Duration::from_millis(1));
        if sleep_or_stop(&shared, wait.min(LATE_AFTER)).await {
            return;
        }
    }
}

/// Where each schedule's search starts: its latest recorded fire, or now
/// for a schedule never fired. `None` once the worker stops.
async fn start<S: Storage>(
    shared: &Shared<S>,
    schedules: &[Periodic],
) -> Option<HashMap<ScheduleName, DateTime<Utc>>> {
    loop {
        match (shared.storage.schedules().await, shared.storage.now().await) {
            (Ok(records), Ok(now)) => {
                let cursors = schedules
                    .iter()
                    .map(|p| {
                        let last = records.iter().find(|r| r.schedule == p.name);
                        (p.name.clone(), last.map_or(now, |r| r.last_fire_at))
                    })
                    .collect();
                return Some(cursors);
            }
            (Err(error), _) | (_, Err(error)) => {
                warn!(%error, "reading periodic schedules failed; retrying");
                if sleep_or_stop(shared, Duration::from_secs(1)).await {
                    return None;
                }
            }
        }
    }
}

async fn offer<S: Storage>(shared: &Shared<S>, periodic: &Periodic, at: DateTime<Utc>) {
    match shared.storage.enqueue_periodic(&periodic.fire(at)).await {
        Ok(Some(outcome)) => {
            info!(schedule = %periodic.name, %at, job_id = %outcome.id, "periodic job enqueued");
            metrics::counter!("queue_periodic_fires_total", "schedule" => periodic.name.to_string())
                .increment(1);
            shared.wake.notify_one();
        }
        Ok(None) => debug!(schedule = %periodic.name, %at, "fire already taken by another worker"),
        Err(error) => warn!(%error, schedule = %periodic.name, %at, "periodic fire failed"),
    }
}

async fn sleep_or_stop<S>(shared: &Shared<S>, wait: Duration) -> bool {
    tokio::select! {
        () = tokio::time::sleep(wait) => false,
        () = shared.stop_fetching.cancelled() => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn every_minute(missed: Missed) -> Periodic {
        Periodic::new("m", "* * * * *", |_| NewJob::new("q", ()))
            .unwrap()
            .missed(missed)
    }

    #[test]
    fn skip_fires_only_the_latest_fire_and_only_when_it_is_recent() {
        let p = every_minute(Missed::Skip);
        let now = at("2030-01-01T10:00:30Z");
        assert_eq!(
            p.due(at("2030-01-01T09:00:00Z"), now),
            vec![at("2030-01-01T10:00:00Z")]
        );
        assert!(
            p.due(at("2030-01-01T10:00:00Z"), now).is_empty(),
            "already done"
        );
        let hourly = Periodic::new("h", "0 * * * *", |_| NewJob::new("q", ())).unwrap();
        assert!(
            hourly
                .due(at("2030-01-01T08:00:00Z"), at("2030-01-01T10:05:00Z"))
                .is_empty(),
            "10:00 is five minutes late: missed, and 09:00 too"
        );
        assert_eq!(
            hourly.due(at("2030-01-01T08:00:00Z"), at("2030-01-01T10:00:59Z")),
            vec![at("2030-01-01T10:00:00Z")]
        );
    }

    #[test]
    fn catch_up_fires_the_latest_n_oldest_first() {
        let p = every_minute(Missed::CatchUp(3));
        let fires = p.due(at("2030-01-01T09:00:00Z"), at("2030-01-01T10:00:30Z"));
        assert_eq!(
            fires,
            vec![
                at("2030-01-01T09:58:00Z"),
                at("2030-01-01T09:59:00Z"),
                at("2030-01-01T10:00:00Z")
            ]
        );
    }

    #[test]
    fn seconds_and_time_zones_are_honoured() {
        let p = Periodic::new("s", "*/10 * * * * *", |_| NewJob::new("q", ())).unwrap();
        assert_eq!(
            p.next_after(at("2030-01-01T10:00:01Z")),
            Some(at("2030-01-01T10:00:10Z"))
        );
        let paris = Periodic::new("p", "0 9 * * *", |_| NewJob::new("q", ()))
            .unwrap()
            .time_zone("Europe/Paris")
            .unwrap();
        assert_eq!(
            paris.next_after(at("2030-07-01T00:00:00Z")),
            Some(at("2030-07-01T07:00:00Z")),
            "09:00 in Paris in summer is 07:00 UTC"
        );
    }

    #[test]
    fn bad_expressions_and_zones_name_their_field() {
        let field = |r: Result<Periodic>| match r {
            Err(QueueError::InvalidInput { field, .. }) => field,
            other => panic!("expected invalid input, got {other:?}"),
        };
        assert_eq!(
            field(Periodic::new("x", "61 * * * *", |_| NewJob::new("q", ()))),
            "cron"
        );
        let p = Periodic::new("x", "* * * * *", |_| NewJob::new("q", ())).unwrap();
        assert_eq!(field(p.time_zone("Mars/Olympus")), "time_zone");
        assert_eq!(
            field(Periodic::new("", "* * * * *", |_| NewJob::new("q", ()))),
            "schedule"
        );
    }
}
