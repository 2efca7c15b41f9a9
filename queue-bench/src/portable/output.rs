//! The JSONL records on standard output: one descriptor at startup, then
//! one record per metric per tick. Nothing else is written to standard
//! output; logs go to standard error.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// The name the harness knows this adapter by (`adapter.json`'s `system`).
pub(crate) const SYSTEM: &str = "queue-rs";

/// Writes one record as one line and flushes it, so the harness's tailer
/// sees it at once and a SIGKILL loses nothing already written.
pub(crate) fn emit(record: &Value) {
    let mut out = std::io::stdout().lock();
    // A closed pipe (the harness gone) is not worth a panic.
    let _ = writeln!(out, "{record}");
    let _ = out.flush();
}

/// `2026-04-17T09:00:10.000Z` for a time since the Unix epoch.
pub(crate) fn iso_millis(since_epoch: Duration) -> String {
    let secs = i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX);
    chrono::DateTime::<chrono::Utc>::from_timestamp(secs, since_epoch.subsec_millis() * 1_000_000)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

/// This machine's wall clock as a time since the Unix epoch.
pub(crate) fn wall_clock() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// The startup descriptor.
pub(crate) struct Descriptor<'a> {
    pub(crate) instance_id: u32,
    pub(crate) db_name: &'a str,
    pub(crate) event_tables: &'a [String],
    pub(crate) event_indexes: &'a [String],
    pub(crate) schema_version: u32,
    pub(crate) started_at: Duration,
}

impl Descriptor<'_> {
    pub(crate) fn record(&self) -> Value {
        json!({
            "kind": "descriptor",
            "system": SYSTEM,
            "instance_id": self.instance_id,
            "event_tables": self.event_tables,
            "event_indexes": self.event_indexes,
            "extensions": [],
            "version": env!("CARGO_PKG_VERSION"),
            "schema_version": self.schema_version.to_string(),
            "db_name": self.db_name,
            "started_at": iso_millis(self.started_at),
        })
    }
}

/// One metric of one tick.
pub(crate) fn sample(t: &str, instance_id: u32, metric: &str, value: f64, window_s: f64) -> Value {
    json!({
        "t": t,
        "system": SYSTEM,
        "instance_id": instance_id,
        "kind": "adapter",
        "subject_kind": "adapter",
        "subject": "",
        "metric": metric,
        "value": value,
        "window_s": window_s,
    })
}

/// The tables the harness watches (dead tuples, sizes, pgstattuple), hot
/// table first: the active-readers phase scans the first one. The
/// partitioned parent `job_ready` is left out: it holds no rows of its own
/// and `pgstattuple` refuses a partitioned table; its four partitions are
/// listed instead.
pub(crate) fn event_tables(schema: &str) -> Vec<String> {
    let mut tables = vec![format!("{schema}.job_queue")];
    tables.extend((0..4).map(|slot| format!("{schema}.job_ready_{slot}")));
    tables.push(format!("{schema}.job_history"));
    tables
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso_8601_utc_with_milliseconds() {
        let t = Duration::from_secs(1_776_416_410) + Duration::from_millis(7);
        assert_eq!(iso_millis(t), "2026-04-17T09:00:10.007Z");
    }

    #[test]
    fn a_sample_has_the_contract_fields() {
        let s = sample("2026-04-17T09:00:10.000Z", 2, "claim_p99_ms", 4.2, 30.0);
        assert_eq!(s["kind"], "adapter");
        assert_eq!(s["subject_kind"], "adapter");
        assert_eq!(s["system"], SYSTEM);
        assert_eq!(s["metric"], "claim_p99_ms");
        assert_eq!(s["value"], 4.2);
        assert_eq!(s["window_s"], 30.0);
        assert_eq!(s["instance_id"], 2);
    }
}
