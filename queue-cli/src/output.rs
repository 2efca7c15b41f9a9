//! How reads are printed: text for people, `--json` for programs.

use std::io::Write;

use chrono::{DateTime, Utc};
use queue::{HistoryPage, HistoryRecord, Job, JobId, JobPage, JobState, PayloadMatch, QueueStats};
use serde::Serialize;

use crate::CliError;

/// Prints `value` as one line of JSON.
pub(crate) fn json<T: Serialize>(value: &T) -> Result<(), CliError> {
    let text = serde_json::to_string(value).map_err(|e| CliError::failed(e.to_string()))?;
    println!("{text}");
    Ok(())
}

/// The stats table; a count that reached the cap shows as "10,000+".
pub(crate) fn stats(stats: &[QueueStats]) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{:<24} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  oldest pending",
        "queue", "paused", "pending", "scheduled", "running", "stalled", "exhausted", "waiting"
    );
    for s in stats {
        let oldest = s.oldest_pending_age.map_or_else(
            || "-".to_owned(),
            |age| format!("{:.1}s", age.as_secs_f64()),
        );
        let _ = writeln!(
            out,
            "{:<24} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  {oldest}",
            s.queue.as_str(),
            if s.paused { "yes" } else { "no" },
            s.shown(JobState::Pending),
            s.shown(JobState::Scheduled),
            s.shown(JobState::Running),
            s.shown(JobState::Stalled),
            s.shown(JobState::Exhausted),
            s.shown(JobState::Waiting)
        );
    }
}

/// A job's dependencies and dependants (`queue show`), one line each:
/// id, queue and where it stands.
pub(crate) fn links(links: Option<&queue::JobLinks>) {
    let Some(links) = links else {
        return;
    };
    let mut out = std::io::stdout().lock();
    for (title, side) in [
        ("depends on", &links.dependencies),
        ("dependants", &links.dependants),
    ] {
        if side.is_empty() {
            continue;
        }
        if title == "depends on" {
            let _ = writeln!(out, "{title}: {}", queue::BatchCounts::of(links));
        } else {
            let _ = writeln!(out, "{title}:");
        }
        for link in side {
            let queue = link.queue.as_ref().map_or("-", |q| q.as_str());
            let _ = writeln!(out, "  {:>10} {:<20} {}", link.id, queue, link.status);
        }
    }
}

/// A page of live jobs, one line each.
pub(crate) fn jobs(page: &JobPage, now: DateTime<Utc>) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{:>10} {:<20} {:<9} {:>8} {:>8}  {:<25} unique key",
        "id", "queue", "state", "priority", "attempts", "available at"
    );
    for job in &page.jobs {
        let _ = writeln!(
            out,
            "{:>10} {:<20} {:<9} {:>8} {:>8}  {:<25} {}",
            job.id,
            job.queue.as_str(),
            job.state(now),
            job.priority,
            format!("{}/{}", job.attempts, job.max_attempts),
            job.available_at.to_rfc3339(),
            job.unique_key.as_ref().map_or("-", |k| k.as_str())
        );
    }
    if let Some(next) = page.next {
        let _ = writeln!(out, "more: --before {next}");
    }
}

/// A live job, field by field.
pub(crate) fn job(job: &Job, now: DateTime<Utc>) {
    println!("id:            {}", job.id);
    println!("state:         {} (live)", job.state(now));
    println!("queue:         {}", job.queue.as_str());
    println!("priority:      {}", job.priority);
    optional(
        "unique key:",
        job.unique_key.as_ref().map(|k| k.as_str().to_owned()),
    );
    optional(
        "group key:",
        job.group_key.as_ref().map(|k| k.as_str().to_owned()),
    );
    println!("attempts:      {} of {}", job.attempts, job.max_attempts);
    if job.state(now) == JobState::Waiting {
        println!("available at:  once its dependencies have finished");
    } else {
        println!("available at:  {}", job.available_at.to_rfc3339());
    }
    optional("lease until:", job.lease_until.map(|t| t.to_rfc3339()));
    optional(
        "locked by:",
        job.locked_by.as_ref().map(|w| w.as_str().to_owned()),
    );
    optional("first locked:", job.first_locked_at.map(|t| t.to_rfc3339()));
    println!("created at:    {}", job.created_at.to_rfc3339());
    optional(
        "traceparent:",
        job.trace_context
            .as_ref()
            .map(|t| t.traceparent().to_owned()),
    );
    value("payload:", Some(&job.payload));
    value("last error:", job.last_error.as_ref());
}

/// A finished job, field by field.
pub(crate) fn record(record: &HistoryRecord) {
    println!("id:            {}", record.id);
    println!("status:        {} (history)", record.status.as_str());
    println!("queue:         {}", record.queue.as_str());
    println!("priority:      {}", record.priority);
    optional(
        "unique key:",
        record.unique_key.as_ref().map(|k| k.as_str().to_owned()),
    );
    optional(
        "group key:",
        record.group_key.as_ref().map(|k| k.as_str().to_owned()),
    );
    println!(
        "attempts:      {} of {}",
        record.attempts, record.max_attempts
    );
    optional(
        "processed by:",
        record.processed_by.as_ref().map(|w| w.as_str().to_owned()),
    );
    println!("created at:    {}", record.created_at.to_rfc3339());
    optional("started at:", record.started_at.map(|t| t.to_rfc3339()));
    println!("finished at:   {}", record.finished_at.to_rfc3339());
    optional(
        "traceparent:",
        record
            .trace_context
            .as_ref()
            .map(|t| t.traceparent().to_owned()),
    );
    value("payload:", Some(&record.payload));
    value("result:", record.result.as_ref());
    value("last error:", record.last_error.as_ref());
}

/// A page of history, one line a job.
pub(crate) fn history(page: &HistoryPage) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{:>10}  {:<20} {:<12} {:>8}  finished at",
        "id", "queue", "status", "attempts"
    );
    for r in &page.records {
        let _ = writeln!(
            out,
            "{:>10}  {:<20} {:<12} {:>8}  {}",
            r.id,
            r.queue.as_str(),
            r.status.as_str(),
            r.attempts,
            r.finished_at.to_rfc3339()
        );
    }
    if let Some(next) = page.next {
        let _ = writeln!(out, "more: --before {next}");
    }
}

fn optional(label: &str, value: Option<String>) {
    if let Some(value) = value {
        println!("{label:<14} {value}");
    }
}

fn value(label: &str, value: Option<&serde_json::Value>) {
    if let Some(value) = value {
        let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
        println!("{label}");
        for line in text.lines() {
            println!("  {line}");
        }
    }
}

/// Under a listing searched with `--where`: how many rows it read, and how
/// to go on when it stopped at `--scan` (on stderr: stdout is the table).
pub(crate) fn searched(
    payload: Option<&PayloadMatch>,
    scanned: u32,
    budget_spent: bool,
    next: Option<JobId>,
) {
    if payload.is_none() {
        return;
    }
    let rows = if scanned == 1 { "row" } else { "rows" };
    match (budget_spent, next) {
        (true, Some(next)) => {
            eprintln!("searched {scanned} {rows} and stopped at --scan: go on with --before {next}")
        }
        _ => eprintln!("searched {scanned} {rows}"),
    }
}
