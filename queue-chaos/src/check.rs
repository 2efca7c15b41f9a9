//! The verdict: the recorded history against what was acknowledged.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use queue::{
    AnyStorage, FinalStatus, HistoryFilter, HistoryRecord, JobId, MAX_PAGE_SIZE, QueueName, Storage,
};

use crate::Failure;
use crate::args::Mode;
use crate::producer::Produced;
use crate::target::{Effect, QUEUE};

/// The counts the run prints, violations first.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    /// Acknowledged enqueues with no completed history row.
    pub(crate) lost: usize,
    /// Completed jobs whose effect happened twice where it must not have
    /// (transactional: ever; plain: twice for one attempt, on any attempt,
    /// or more often than the job had attempts).
    pub(crate) double_effects: usize,
    /// Completed jobs whose archived lease is not the one that recorded
    /// the effect (transactional) or the last one that ran (plain).
    pub(crate) stale_acks: usize,
    /// Jobs of the queue left live, or archived other than completed.
    pub(crate) unfinished: usize,
    /// Second jobs under one key, not explained by a failed enqueue call.
    pub(crate) duplicate_jobs: usize,
    /// Second jobs under one key after a failed (but committed) enqueue.
    pub(crate) producer_duplicates: usize,
    /// Attempts beyond the first, over all jobs.
    pub(crate) retries: u64,
    /// The most attempts any job took.
    pub(crate) max_attempts: u32,
}

impl Verdict {
    /// Whether anything broke a guarantee.
    pub(crate) fn violated(&self) -> bool {
        self.lost + self.double_effects + self.stale_acks + self.unfinished + self.duplicate_jobs
            > 0
    }
}

/// Every history row of the run's queue.
pub(crate) async fn history(storage: &AnyStorage) -> Result<Vec<HistoryRecord>, Failure> {
    let queue = QueueName::new(QUEUE)?;
    let mut all = Vec::new();
    let mut before: Option<JobId> = None;
    loop {
        let filter = HistoryFilter {
            queue: Some(queue.clone()),
            status: None,
            before,
            limit: MAX_PAGE_SIZE,
        };
        let page = storage.list_history(&filter).await?;
        all.extend(page.records);
        match page.next {
            Some(next) => before = Some(next),
            None => return Ok(all),
        }
    }
}

/// How long the restart (or failover) kept jobs from starting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outage {
    /// From the stop command's return (the server down) to the first job
    /// started after it.
    pub(crate) from_stop_ms: i64,
    /// From the start command's return (the promotion) to that first job.
    pub(crate) from_start_ms: i64,
}

impl std::fmt::Display for Outage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            " outage_ms={} claim_after_start_ms={}",
            self.from_stop_ms, self.from_start_ms
        )
    }
}

/// The first start after `stopped` among the history's last attempts: a job
/// whose last attempt began after the stop was claimed then, so the
/// earliest of them is the first claim the restarted (or promoted) server
/// answered. Without one (nothing started afterwards) the figures are -1.
pub(crate) fn outage(
    records: &[HistoryRecord],
    stopped: DateTime<Utc>,
    started: DateTime<Utc>,
) -> Outage {
    let first = records
        .iter()
        .filter_map(|record| record.started_at)
        .filter(|at| *at > stopped)
        .min();
    match first {
        Some(first) => Outage {
            from_stop_ms: (first - stopped).num_milliseconds(),
            from_start_ms: (first - started).num_milliseconds(),
        },
        None => Outage {
            from_stop_ms: -1,
            from_start_ms: -1,
        },
    }
}

/// Checks the history and the effects against what the producer saw.
pub(crate) fn check(
    mode: Mode,
    produced: &Produced,
    records: &[HistoryRecord],
    live: u64,
    effects: &[Effect],
) -> Verdict {
    let mut verdict = Verdict {
        unfinished: usize::try_from(live).unwrap_or(usize::MAX),
        ..Verdict::default()
    };
    let mut by_job: HashMap<i64, Vec<&Effect>> = HashMap::new();
    for effect in effects {
        by_job.entry(effect.0).or_default().push(effect);
    }
    let archived: HashMap<i64, &HistoryRecord> = records.iter().map(|r| (r.id.get(), r)).collect();
    for id in produced.ids.values() {
        match archived.get(id) {
            Some(record) if record.status == FinalStatus::Completed => {}
            Some(_) => verdict.unfinished += 1,
            None => verdict.lost += 1,
        }
    }
    for record in records {
        let id = record.id.get();
        let key = record.unique_key.as_ref().map(|k| k.as_str().to_owned());
        let acknowledged = key.as_ref().and_then(|k| produced.ids.get(k)) == Some(&id);
        if !acknowledged {
            match key {
                Some(key) if produced.ambiguous.contains(&key) => verdict.producer_duplicates += 1,
                _ => verdict.duplicate_jobs += 1,
            }
        }
        if record.status != FinalStatus::Completed {
            continue;
        }
        verdict.retries += u64::from(record.attempts.saturating_sub(1));
        verdict.max_attempts = verdict.max_attempts.max(record.attempts);
        let ran = by_job.get(&id).map_or(&[][..], Vec::as_slice);
        let holder = record.processed_by.as_ref().map(|w| w.as_str());
        let attempt = i32::try_from(record.attempts).unwrap_or(i32::MAX);
        match mode {
            Mode::Transactional => {
                if ran.len() != 1 {
                    verdict.double_effects += usize::from(ran.len() > 1);
                    verdict.lost += usize::from(ran.is_empty());
                }
                if ran.len() == 1 && (ran[0].1 != attempt || Some(ran[0].2.as_str()) != holder) {
                    verdict.stale_acks += 1;
                }
            }
            Mode::Plain => {
                // A lost attempt may leave its effect behind and be run
                // again, but each attempt runs the handler once.
                let mut attempts_seen = HashSet::new();
                let repeated = ran.iter().any(|effect| !attempts_seen.insert(effect.1));
                if repeated || ran.len() > record.attempts as usize {
                    verdict.double_effects += 1;
                }
                match ran.iter().max_by_key(|e| e.1) {
                    None => verdict.lost += 1,
                    Some(last) if last.1 != attempt || Some(last.2.as_str()) != holder => {
                        verdict.stale_acks += 1;
                    }
                    Some(_) => {}
                }
            }
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use queue::{FinalStatus, HistoryRecord, JobId, QueueName, UniqueKey, WorkerId};

    use super::{Mode, Outage, Produced, check, outage};

    fn record(id: i64, key: &str, attempts: u32, worker: &str) -> HistoryRecord {
        HistoryRecord {
            id: JobId(id),
            queue: QueueName::new("chaos").expect("name"),
            priority: 0,
            unique_key: Some(UniqueKey::new(key).expect("key")),
            group_key: None,
            payload: serde_json::json!({}),
            status: FinalStatus::Completed,
            result: None,
            last_error: None,
            attempts,
            max_attempts: 100,
            snoozes: 0,
            processed_by: Some(WorkerId::new(worker).expect("worker")),
            created_at: Utc::now(),
            started_at: None,
            finished_at: Utc::now(),
            trace_context: None,
        }
    }

    fn produced(pairs: &[(&str, i64)], ambiguous: &[&str]) -> Produced {
        Produced {
            ids: pairs.iter().map(|(k, id)| ((*k).to_owned(), *id)).collect(),
            ambiguous: ambiguous.iter().map(|k| (*k).to_owned()).collect(),
            errors: 0,
        }
    }

    #[test]
    fn a_clean_history_passes() {
        let records = [record(1, "k0", 1, "a"), record(2, "k1", 2, "b")];
        let effects = [(1, 1, "a".to_owned()), (2, 2, "b".to_owned())];
        let verdict = check(
            Mode::Transactional,
            &produced(&[("k0", 1), ("k1", 2)], &[]),
            &records,
            0,
            &effects,
        );
        assert!(!verdict.violated(), "{verdict:?}");
        assert_eq!((verdict.retries, verdict.max_attempts), (1, 2));
    }

    #[test]
    fn every_kind_of_violation_is_counted() {
        let produced = produced(
            &[("k0", 1), ("k1", 2), ("k2", 3), ("k3", 4), ("k4", 5)],
            &["k4"],
        );
        let records = [
            // k0 lost: no history row. k1: two effects in transactional mode.
            record(2, "k1", 1, "a"),
            // k2: archived with attempt 3 by c, but the effect was attempt 2 by b.
            record(3, "k2", 3, "c"),
            record(4, "k3", 1, "a"),
            // A second job under k3 that no failed call explains, and one
            // under k4 that a failed call does.
            record(9, "k3", 1, "a"),
            record(5, "k4", 1, "a"),
            record(10, "k4", 1, "a"),
        ];
        let effects = [
            (2, 1, "a".to_owned()),
            (2, 1, "a".to_owned()),
            (3, 2, "b".to_owned()),
            (4, 1, "a".to_owned()),
            (9, 1, "a".to_owned()),
            (5, 1, "a".to_owned()),
            (10, 1, "a".to_owned()),
        ];
        let verdict = check(Mode::Transactional, &produced, &records, 1, &effects);
        assert_eq!(verdict.lost, 1, "{verdict:?}");
        assert_eq!(verdict.double_effects, 1, "{verdict:?}");
        assert_eq!(verdict.stale_acks, 1, "{verdict:?}");
        assert_eq!(verdict.unfinished, 1, "one live job: {verdict:?}");
        assert_eq!(verdict.duplicate_jobs, 1, "{verdict:?}");
        assert_eq!(verdict.producer_duplicates, 1, "{verdict:?}");
        assert!(verdict.violated());
    }

    #[test]
    fn plain_mode_allows_a_repeat_only_after_a_lost_attempt() {
        let produced = produced(&[("k0", 1), ("k1", 2)], &[]);
        let records = [record(1, "k0", 2, "b"), record(2, "k1", 1, "a")];
        let effects = [
            (1, 1, "a".to_owned()),
            (1, 2, "b".to_owned()),
            (2, 1, "a".to_owned()),
            (2, 1, "a".to_owned()),
        ];
        let verdict = check(Mode::Plain, &produced, &records, 0, &effects);
        assert_eq!(
            verdict.double_effects, 1,
            "k1 ran twice on one attempt: {verdict:?}"
        );
        assert_eq!(verdict.stale_acks, 0, "{verdict:?}");
    }

    #[test]
    fn plain_mode_flags_a_repeated_effect_on_a_later_attempt() {
        let produced = produced(&[("k0", 1), ("k1", 2)], &[]);
        let records = [record(1, "k0", 2, "b"), record(2, "k1", 3, "c")];
        let effects = [
            // k0: its second attempt's effect twice.
            (1, 1, "a".to_owned()),
            (1, 2, "b".to_owned()),
            (1, 2, "b".to_owned()),
            // k1: three attempts, each effect once.
            (2, 1, "a".to_owned()),
            (2, 2, "b".to_owned()),
            (2, 3, "c".to_owned()),
        ];
        let verdict = check(Mode::Plain, &produced, &records, 0, &effects);
        assert_eq!(
            verdict.double_effects, 1,
            "k0 ran twice on attempt 2: {verdict:?}"
        );
        assert_eq!(verdict.stale_acks, 0, "{verdict:?}");
        assert!(verdict.violated());
    }

    #[test]
    fn the_outage_ends_at_the_first_start_after_the_stop() {
        let stopped = Utc::now();
        let started = stopped + chrono::Duration::milliseconds(2_300);
        let at = |ms: i64| Some(stopped + chrono::Duration::milliseconds(ms));
        let mut records: Vec<_> = [(1, at(-50)), (2, at(4_100)), (3, at(2_900)), (4, None)]
            .into_iter()
            .map(|(id, started_at)| HistoryRecord {
                started_at,
                ..record(id, &format!("k{id}"), 1, "w")
            })
            .collect();
        assert_eq!(
            outage(&records, stopped, started),
            Outage {
                from_stop_ms: 2_900,
                from_start_ms: 600
            }
        );
        records.retain(|record| record.id.0 == 1);
        assert_eq!(outage(&records, stopped, started).from_stop_ms, -1);
    }
}
