//! `config`, `queues`, `groups` and `schedules`: a queue's limits, its
//! groups' own settings and the periodic schedules, as the command line
//! sets and shows them.

use std::collections::BTreeMap;
use std::time::Duration;

use queue::{
    Backoff, GroupKey, GroupLimit, GroupWeight, QueueConfig, QueueLimits, QueueName, RateLimit,
    ScheduleRecord,
};
use serde::Serialize;
use serde_json::{Value, json};

use crate::CliError;

/// The limits `config` sets from its flags (a flag not given: no limit).
pub(crate) fn limits(
    concurrency: Option<u32>,
    rate: Option<f64>,
    burst: Option<u32>,
    lease: Option<Duration>,
    backoff_base: Option<Duration>,
    backoff_max: Option<Duration>,
    backoff_jitter: Option<f64>,
) -> Result<QueueLimits, CliError> {
    let rate = rate.map(|per_second| RateLimit {
        per_second,
        burst: burst.unwrap_or_else(|| per_second.ceil().clamp(1.0, f64::from(u32::MAX)) as u32),
    });
    let backoff = backoff_base
        .map(|base| {
            Backoff::new(
                base,
                Duration::ZERO,
                backoff_max.unwrap_or(Backoff::DEFAULT_MAX),
                backoff_jitter.unwrap_or(Backoff::DEFAULT_JITTER),
            )
        })
        .transpose()?;
    let limits = QueueLimits {
        concurrency,
        // Set by `config --group-concurrency`, `--priority-aging` and
        // `--fair-groups` after this (see commands.rs).
        group_concurrency: None,
        priority_aging: None,
        fair_groups: false,
        rate,
        lease,
        backoff,
    };
    limits.validate()?;
    Ok(limits)
}

/// One queue's settings as JSON.
pub(crate) fn config_json(config: &QueueConfig) -> Value {
    let limits = &config.limits;
    json!({
        "queue": config.queue,
        "paused": config.paused,
        "concurrency": limits.concurrency,
        "group_concurrency": limits.group_concurrency,
        "priority_aging_ms": limits.priority_aging.map(|p| p.as_millis() as u64),
        "fair_groups": limits.fair_groups,
        "rate_per_second": limits.rate.map(|r| r.per_second),
        "burst": limits.rate.map(|r| r.burst),
        "lease_ms": limits.lease.map(|l| l.as_millis() as u64),
        "backoff": limits.backoff.map(|b| json!({
            "base_ms": b.base().as_millis() as u64,
            "min_ms": b.min().as_millis() as u64,
            "max_ms": b.max().as_millis() as u64,
            "jitter": b.jitter(),
        })),
    })
}

/// One group's own settings, as `groups` lists them.
#[derive(Debug, Serialize)]
pub(crate) struct GroupSettings {
    queue: QueueName,
    group: GroupKey,
    #[serde(skip_serializing_if = "Option::is_none")]
    limit: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    weight: Option<u32>,
}

/// Every group's own limit and weight together, by queue, then group.
pub(crate) fn group_settings(limits: &[GroupLimit], weights: &[GroupWeight]) -> Vec<GroupSettings> {
    // Each group's limit and weight.
    type Settings = (Option<u32>, Option<u32>);
    let mut groups: BTreeMap<(&QueueName, &GroupKey), Settings> = BTreeMap::new();
    for limit in limits {
        groups.entry((&limit.queue, &limit.group)).or_default().0 = Some(limit.limit);
    }
    for weight in weights {
        groups.entry((&weight.queue, &weight.group)).or_default().1 = Some(weight.weight);
    }
    groups
        .into_iter()
        .map(|((queue, group), (limit, weight))| GroupSettings {
            queue: queue.clone(),
            group: group.clone(),
            limit,
            weight,
        })
        .collect()
}

/// Every group's own settings, one line each: `queue/group: limit N,
/// weight W`.
pub(crate) fn print_group_settings(groups: &[GroupSettings]) {
    if groups.is_empty() {
        println!("no group has its own limit or weight");
        return;
    }
    for settings in groups {
        let mut parts = Vec::new();
        if let Some(limit) = settings.limit {
            parts.push(format!("limit {limit}"));
        }
        if let Some(weight) = settings.weight {
            parts.push(format!("weight {weight}"));
        }
        println!(
            "{}/{}: {}",
            settings.queue,
            settings.group,
            parts.join(", ")
        );
    }
}

/// The settings of every configured queue, one line each.
pub(crate) fn print_configs(configs: &[QueueConfig]) {
    if configs.is_empty() {
        println!("no queue is paused or limited");
        return;
    }
    for config in configs {
        println!("{}", describe(config));
    }
}

/// `name: paused, concurrency 5, 50/s (burst 10), ...`.
pub(crate) fn describe(config: &QueueConfig) -> String {
    if config.paused {
        format!("{}: paused, {}", config.queue, config.limits)
    } else {
        format!("{}: {}", config.queue, config.limits)
    }
}

/// Every recorded schedule, one line each.
pub(crate) fn print_schedules(schedules: &[ScheduleRecord]) {
    if schedules.is_empty() {
        println!("no periodic schedule has fired");
        return;
    }
    for schedule in schedules {
        let next = schedule
            .next_fire_at
            .map_or_else(|| "none".to_owned(), |next| next.to_rfc3339());
        println!(
            "{}: last fired {}, next {next}",
            schedule.schedule,
            schedule.last_fire_at.to_rfc3339()
        );
    }
}
