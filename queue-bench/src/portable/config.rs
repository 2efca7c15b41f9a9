//! The adapter's settings, read from the environment the harness sets
//! (`CONTRIBUTING_ADAPTERS.md`, "Env in") and checked before anything
//! connects: a bad value is one line naming the variable.

use std::time::Duration;

/// The only lifecycle the harness launches adapters with.
pub(crate) const SCENARIO_LONG_HORIZON: &str = "long_horizon";

/// Where new jobs' count comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ProducerMode {
    /// A fixed offered rate in jobs/s (`PRODUCER_MODE=fixed`).
    Fixed,
    /// Keep this many jobs waiting (`PRODUCER_MODE=depth-target`).
    DepthTarget,
}

/// Who decides when to enqueue in fixed mode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Pacing {
    /// This process credits the rate on elapsed wall-clock time.
    Adapter,
    /// The harness writes `ENQUEUE <n>` lines on standard input.
    Harness,
}

/// Everything the adapter reads from its environment.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Config {
    pub(crate) database_url: String,
    /// The database's name, from the URL's path.
    pub(crate) db_name: String,
    /// The PostgreSQL schema holding the queue's tables (`QUEUE_RS_SCHEMA`).
    pub(crate) schema: String,
    pub(crate) producer_mode: ProducerMode,
    pub(crate) pacing: Pacing,
    /// Jobs/s offered in fixed mode (may be fractional; 0 produces nothing).
    pub(crate) producer_rate: f64,
    /// The most jobs one `enqueue_batch` call carries.
    pub(crate) batch_max: usize,
    /// The producer's tick in fixed mode with adapter pacing.
    pub(crate) batch_period: Duration,
    /// Jobs kept waiting in depth-target mode.
    pub(crate) target_depth: u64,
    pub(crate) worker_count: usize,
    pub(crate) payload_bytes: usize,
    pub(crate) work: Duration,
    pub(crate) sample_every_s: u64,
    pub(crate) instance_id: u32,
    /// A file holding the current fixed rate, re-read while running.
    pub(crate) rate_control_file: Option<String>,
    /// Connections in the storage's pool (`QUEUE_RS_POOL`).
    pub(crate) pool: u32,
}

/// The default schema: the one `adapter.json` names.
pub(crate) const DEFAULT_SCHEMA: &str = "queue_rs";

impl Config {
    /// Reads and checks every variable through `var` (the process
    /// environment in the binary, a map in tests). An empty value counts as
    /// unset. The error is one line naming the variable.
    pub(crate) fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let get = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        match get("SCENARIO").as_deref().map(str::trim) {
            None | Some(SCENARIO_LONG_HORIZON) => {}
            Some(other) => {
                return Err(format!(
                    "SCENARIO={other}: unknown scenario; this adapter runs only \
                     {SCENARIO_LONG_HORIZON}"
                ));
            }
        }
        let database_url = get("DATABASE_URL").ok_or("DATABASE_URL is not set")?;
        let db_name = database_name(&database_url)?;
        let schema = get("QUEUE_RS_SCHEMA").unwrap_or_else(|| DEFAULT_SCHEMA.to_owned());
        if !valid_identifier(&schema) {
            return Err(format!(
                "QUEUE_RS_SCHEMA={schema}: not a schema name (a letter or underscore, \
                 then up to 62 letters, digits or underscores)"
            ));
        }
        let producer_mode = match get("PRODUCER_MODE").as_deref().map(str::trim) {
            None | Some("fixed") => ProducerMode::Fixed,
            Some("depth-target") => ProducerMode::DepthTarget,
            Some(other) => {
                return Err(format!(
                    "PRODUCER_MODE={other}: unknown mode; expected fixed or depth-target"
                ));
            }
        };
        let pacing = match get("PRODUCER_PACING").as_deref().map(str::trim) {
            None | Some("adapter") => Pacing::Adapter,
            Some("harness") => Pacing::Harness,
            Some(other) => {
                return Err(format!(
                    "PRODUCER_PACING={other}: unknown pacing; expected adapter or harness"
                ));
            }
        };
        let producer_rate = match get("PRODUCER_RATE") {
            None => 800.0,
            Some(raw) => parse_rate(raw.trim())
                .ok_or_else(|| format!("PRODUCER_RATE={raw}: not a number of jobs/s >= 0"))?,
        };
        let batch_max = int(&get, "PRODUCER_BATCH_MAX", 128, 1, 100_000)?;
        let batch_ms = int(&get, "PRODUCER_BATCH_MS", 25, 1, 60_000)?;
        let target_depth = int(&get, "TARGET_DEPTH", 1_000, 0, 100_000_000)?;
        if producer_mode == ProducerMode::DepthTarget && target_depth == 0 {
            return Err("TARGET_DEPTH=0: depth-target mode needs a depth of at least 1".into());
        }
        let worker_count = int(&get, "WORKER_COUNT", 32, 1, 100_000)?;
        let payload_bytes = int(&get, "JOB_PAYLOAD_BYTES", 256, 0, 16 * 1024 * 1024)?;
        let work_ms = int(&get, "JOB_WORK_MS", 1, 0, 3_600_000)?;
        let sample_every_s = int(&get, "SAMPLE_EVERY_S", 5, 1, 3_600)?;
        let instance_id = int(&get, "BENCH_INSTANCE_ID", 0, 0, u64::from(u32::MAX))?;
        let pool = int(&get, "QUEUE_RS_POOL", 20, 2, 10_000)?;
        Ok(Self {
            database_url,
            db_name,
            schema,
            producer_mode,
            pacing,
            producer_rate,
            batch_max: usize::try_from(batch_max).map_err(|e| e.to_string())?,
            batch_period: Duration::from_millis(batch_ms),
            target_depth,
            worker_count: usize::try_from(worker_count).map_err(|e| e.to_string())?,
            payload_bytes: usize::try_from(payload_bytes).map_err(|e| e.to_string())?,
            work: Duration::from_millis(work_ms),
            sample_every_s,
            instance_id: u32::try_from(instance_id).map_err(|e| e.to_string())?,
            rate_control_file: get("PRODUCER_RATE_CONTROL_FILE"),
            pool: u32::try_from(pool).map_err(|e| e.to_string())?,
        })
    }
}

/// A rate: a finite number >= 0 (the harness writes `1200.0` into the
/// control file, `800` into the environment).
pub(crate) fn parse_rate(raw: &str) -> Option<f64> {
    raw.parse::<f64>()
        .ok()
        .filter(|r| r.is_finite() && *r >= 0.0)
}

/// An integer variable within `min..=max`, or `default` when unset.
fn int(
    get: &impl Fn(&str) -> Option<String>,
    name: &str,
    default: u64,
    min: u64,
    max: u64,
) -> Result<u64, String> {
    let Some(raw) = get(name) else {
        return Ok(default);
    };
    match raw.trim().parse::<u64>() {
        Ok(value) if value < min => Err(format!("{name}={raw}: must be at least {min}")),
        Ok(value) if value > max => Err(format!("{name}={raw}: must be at most {max}")),
        Ok(value) => Ok(value),
        Err(_) => Err(format!("{name}={raw}: not a whole number")),
    }
}

/// The database a `postgres://` URL names (its path), for the descriptor.
fn database_name(url: &str) -> Result<String, String> {
    let redacted = queue_core::redact_url(url);
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
        .ok_or_else(|| format!("DATABASE_URL={redacted}: not a postgres:// URL"))?;
    let path = rest.split_once('/').map(|(_, path)| path).unwrap_or("");
    let name = path.split(['?', '#']).next().unwrap_or("");
    if name.is_empty() {
        return Err(format!("DATABASE_URL={redacted}: names no database"));
    }
    Ok(name.to_owned())
}

fn valid_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && name.len() <= 63
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Result<Config, String> {
        let mut env: HashMap<String, String> = HashMap::from([(
            "DATABASE_URL".to_owned(),
            "postgres://bench:secret@localhost:15555/queue_rs_bench".to_owned(),
        )]);
        for (k, v) in pairs {
            env.insert((*k).to_owned(), (*v).to_owned());
        }
        Config::from_lookup(|name| env.get(name).cloned())
    }

    #[test]
    fn defaults_follow_the_contract() {
        let c = config(&[]).expect("defaults are valid");
        assert_eq!(c.db_name, "queue_rs_bench");
        assert_eq!(c.schema, DEFAULT_SCHEMA);
        assert_eq!(c.producer_mode, ProducerMode::Fixed);
        assert_eq!(c.pacing, Pacing::Adapter);
        assert_eq!(c.producer_rate, 800.0);
        assert_eq!(c.batch_max, 128);
        assert_eq!(c.batch_period, Duration::from_millis(25));
        assert_eq!(c.target_depth, 1_000);
        assert_eq!(c.worker_count, 32);
        assert_eq!(c.payload_bytes, 256);
        assert_eq!(c.work, Duration::from_millis(1));
        assert_eq!(c.sample_every_s, 5);
        assert_eq!(c.instance_id, 0);
        assert_eq!(c.rate_control_file, None);
    }

    #[test]
    fn harness_values_are_read() {
        let c = config(&[
            ("SCENARIO", "long_horizon"),
            ("PRODUCER_MODE", "depth-target"),
            ("PRODUCER_PACING", "harness"),
            ("PRODUCER_RATE", "1200.0"),
            ("PRODUCER_BATCH_MAX", "1000"),
            ("PRODUCER_BATCH_MS", "10"),
            ("TARGET_DEPTH", "5000"),
            ("WORKER_COUNT", "256"),
            ("JOB_PAYLOAD_BYTES", "1024"),
            ("JOB_WORK_MS", "0"),
            ("SAMPLE_EVERY_S", "1"),
            ("BENCH_INSTANCE_ID", "3"),
            ("PRODUCER_RATE_CONTROL_FILE", "/tmp/rate.txt"),
            ("QUEUE_RS_SCHEMA", "bench_7"),
            ("QUEUE_RS_POOL", "40"),
        ])
        .expect("valid");
        assert_eq!(c.producer_mode, ProducerMode::DepthTarget);
        assert_eq!(c.pacing, Pacing::Harness);
        assert_eq!(c.producer_rate, 1200.0);
        assert_eq!(c.batch_max, 1000);
        assert_eq!(c.batch_period, Duration::from_millis(10));
        assert_eq!(c.target_depth, 5000);
        assert_eq!(c.worker_count, 256);
        assert_eq!(c.payload_bytes, 1024);
        assert_eq!(c.work, Duration::ZERO);
        assert_eq!(c.sample_every_s, 1);
        assert_eq!(c.instance_id, 3);
        assert_eq!(c.rate_control_file.as_deref(), Some("/tmp/rate.txt"));
        assert_eq!(c.schema, "bench_7");
        assert_eq!(c.pool, 40);
    }

    #[test]
    fn empty_values_count_as_unset() {
        let c = config(&[("PRODUCER_RATE", ""), ("SCENARIO", " ")]).expect("valid");
        assert_eq!(c.producer_rate, 800.0);
    }

    #[test]
    fn bad_values_are_refused_naming_the_variable() {
        for (pairs, expected) in [
            (
                vec![("SCENARIO", "chaos")],
                "SCENARIO=chaos: unknown scenario",
            ),
            (
                vec![("PRODUCER_RATE", "fast")],
                "PRODUCER_RATE=fast: not a number",
            ),
            (
                vec![("PRODUCER_RATE", "-5")],
                "PRODUCER_RATE=-5: not a number",
            ),
            (
                vec![("PRODUCER_RATE", "NaN")],
                "PRODUCER_RATE=NaN: not a number",
            ),
            (
                vec![("WORKER_COUNT", "0")],
                "WORKER_COUNT=0: must be at least 1",
            ),
            (
                vec![("WORKER_COUNT", "4.5")],
                "WORKER_COUNT=4.5: not a whole number",
            ),
            (
                vec![("PRODUCER_MODE", "burst")],
                "PRODUCER_MODE=burst: unknown mode",
            ),
            (
                vec![("PRODUCER_PACING", "stdin")],
                "PRODUCER_PACING=stdin: unknown",
            ),
            (
                vec![("PRODUCER_BATCH_MAX", "0")],
                "PRODUCER_BATCH_MAX=0: must be at least 1",
            ),
            (
                vec![("SAMPLE_EVERY_S", "0")],
                "SAMPLE_EVERY_S=0: must be at least 1",
            ),
            (
                vec![("SAMPLE_EVERY_S", "7200")],
                "SAMPLE_EVERY_S=7200: must be at most",
            ),
            (
                vec![("PRODUCER_MODE", "depth-target"), ("TARGET_DEPTH", "0")],
                "TARGET_DEPTH=0",
            ),
            (
                vec![("QUEUE_RS_SCHEMA", "a-b")],
                "QUEUE_RS_SCHEMA=a-b: not a schema",
            ),
            (
                vec![("DATABASE_URL", "mysql://x/y")],
                "not a postgres:// URL",
            ),
            (
                vec![("DATABASE_URL", "postgres://h:1/")],
                "names no database",
            ),
        ] {
            let error = config(&pairs).expect_err(expected);
            assert!(error.contains(expected), "{error:?} lacks {expected:?}");
            assert!(!error.contains('\n'), "{error:?} is not one line");
        }
    }

    #[test]
    fn the_password_stays_out_of_errors() {
        let error = config(&[("DATABASE_URL", "postgres://u:hunter2@h:1/")]).expect_err("no db");
        assert!(!error.contains("hunter2"), "{error}");
    }

    #[test]
    fn a_missing_url_is_refused() {
        let error = Config::from_lookup(|_| None).expect_err("no url");
        assert_eq!(error, "DATABASE_URL is not set");
    }
}
