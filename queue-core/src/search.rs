//! Search: live jobs or history rows by the listings' filters (queue,
//! state or final status, id, unique key) and by one value in the payload
//! (`payload.customer_id = 42`), on any [`Storage`], at a bounded cost.
//!
//! A search walks the listing it narrows ([`Storage::list_jobs`] or
//! [`Storage::list_history`]) newest first, a page at a time, and keeps
//! the rows whose payload holds the value. It reads at most `scan` rows
//! per call ([`MAX_SEARCH_SCAN`] at most): what each storage's listing
//! statements cost per row is what a search costs, and no call reads an
//! unbounded part of a table. A call that stops before the listing's end
//! (it found `limit` rows, or it read `scan`) answers the id to continue
//! from, so a search across a large table is a series of bounded calls.

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use crate::{
    HistoryFilter, HistoryRecord, Job, JobFilter, JobId, MAX_PAGE_SIZE, QueueError, Result, Storage,
};

/// The most rows one search call reads.
pub const MAX_SEARCH_SCAN: u32 = 100_000;

/// The rows a search call reads unless told otherwise.
pub const DEFAULT_SEARCH_SCAN: u32 = 10_000;

/// The most steps a payload path may have.
pub const MAX_PATH_STEPS: usize = 16;

/// The longest payload match, as text.
pub const MAX_MATCH_BYTES: usize = 1_024;

/// One step of a [`PayloadMatch`]'s path: an object's key or an array's
/// index.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// A value at a path in a job's payload: `payload.customer_id = 42`,
/// `payload.order.lines[0].sku = "A-7"`.
///
/// The path starts with `payload`, then names object keys after dots
/// (letters, digits, `_` and `-`) and array positions in brackets. The
/// value after `=` is JSON; a bare word that is not JSON is a string
/// (`payload.plan = gold` is `"gold"`). Numbers compare by value (`42`
/// matches `42.0`), everything else as JSON.
///
/// ```
/// use queue_core::PayloadMatch;
/// use serde_json::json;
///
/// let wanted: PayloadMatch = "payload.order.lines[1].sku = A-7".parse().unwrap();
/// assert!(wanted.matches(&json!({"order": {"lines": [{"sku": "B"}, {"sku": "A-7"}]}})));
/// assert!(!wanted.matches(&json!({"order": {"lines": [{"sku": "A-7"}]}})));
/// assert_eq!(wanted.to_string(), r#"payload.order.lines[1].sku = "A-7""#);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PayloadMatch {
    path: Vec<Step>,
    value: Value,
}

impl PayloadMatch {
    /// Whether `payload` holds the value at the path.
    pub fn matches(&self, payload: &Value) -> bool {
        let mut at = payload;
        for step in &self.path {
            let next = match step {
                Step::Key(key) => at.get(key.as_str()),
                Step::Index(index) => at.get(*index),
            };
            match next {
                Some(next) => at = next,
                None => return false,
            }
        }
        same(at, &self.value)
    }

    /// The value it looks for.
    pub fn value(&self) -> &Value {
        &self.value
    }
}

/// JSON equality, numbers by value.
fn same(found: &Value, wanted: &Value) -> bool {
    match (found, wanted) {
        (Value::Number(a), Value::Number(b)) => match (a.as_i64(), b.as_i64()) {
            (Some(a), Some(b)) => a == b,
            _ => match (a.as_u64(), b.as_u64()) {
                (Some(a), Some(b)) => a == b,
                _ => a.as_f64() == b.as_f64(),
            },
        },
        _ => found == wanted,
    }
}

fn bad(reason: impl Into<String>) -> QueueError {
    QueueError::invalid("payload_match", reason)
}

impl FromStr for PayloadMatch {
    type Err = QueueError;

    fn from_str(text: &str) -> Result<Self> {
        if text.len() > MAX_MATCH_BYTES {
            return Err(bad(format!(
                "{} bytes; at most {MAX_MATCH_BYTES}",
                text.len()
            )));
        }
        let (path, value) = text
            .split_once('=')
            .ok_or_else(|| bad("expected `payload.<path> = <value>`"))?;
        let path = parse_path(path.trim())?;
        let value = value.trim();
        if value.is_empty() {
            return Err(bad("no value after `=`"));
        }
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
        Ok(Self { path, value })
    }
}

/// `payload` followed by `.key` and `[index]` steps.
fn parse_path(text: &str) -> Result<Vec<Step>> {
    let rest = text
        .strip_prefix("payload")
        .ok_or_else(|| bad(format!("the path {text:?} does not start with `payload`")))?;
    let mut steps = Vec::new();
    let mut chars = rest.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        match c {
            '.' => {
                let mut key = String::new();
                while let Some(&(_, c)) = chars.peek() {
                    if c.is_alphanumeric() || c == '_' || c == '-' {
                        key.push(c);
                        chars.next();
                    } else {
                        break;
                    }
                }
                if key.is_empty() {
                    return Err(bad(format!("an empty key in {text:?}")));
                }
                steps.push(Step::Key(key));
            }
            '[' => {
                let mut digits = String::new();
                loop {
                    match chars.next() {
                        Some((_, ']')) => break,
                        Some((_, d)) if d.is_ascii_digit() => digits.push(d),
                        _ => return Err(bad(format!("a bad array index in {text:?}"))),
                    }
                }
                let index = digits
                    .parse()
                    .map_err(|_| bad(format!("a bad array index in {text:?}")))?;
                steps.push(Step::Index(index));
            }
            other => {
                return Err(bad(format!("unexpected {other:?} in the path {text:?}")));
            }
        }
    }
    if steps.is_empty() {
        return Err(bad("the path names no field: `payload.<field>`"));
    }
    if steps.len() > MAX_PATH_STEPS {
        return Err(bad(format!(
            "{} steps; at most {MAX_PATH_STEPS}",
            steps.len()
        )));
    }
    Ok(steps)
}

impl fmt::Display for PayloadMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("payload")?;
        for step in &self.path {
            match step {
                Step::Key(key) => write!(f, ".{key}")?,
                Step::Index(index) => write!(f, "[{index}]")?,
            }
        }
        write!(f, " = {}", self.value)
    }
}

/// What one search call found.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchPage<T> {
    /// The rows that match, highest id first, at most the filter's limit.
    pub items: Vec<T>,
    /// Where to continue (pass as the filter's `before`): the call stopped
    /// before the end of the listing, having found `limit` rows or read
    /// `scan`. `None`: nothing older is left to read.
    pub next: Option<JobId>,
    /// How many rows the call read.
    pub scanned: u32,
    /// The call stopped because it read `scan` rows (it may have found
    /// fewer than `limit` with more left to read).
    pub budget_spent: bool,
}

/// Live jobs that `filter` selects and whose payload holds `payload` (any
/// payload without one), at most `filter.limit`, reading at most `scan`
/// rows of the listing (see the module docs).
///
/// # Errors
/// [`QueueError::InvalidInput`] for a `scan` of 0 or above
/// [`MAX_SEARCH_SCAN`], and whatever [`Storage::list_jobs`] refuses.
pub async fn search_jobs<S: Storage + ?Sized>(
    storage: &S,
    filter: &JobFilter,
    payload: Option<&PayloadMatch>,
    scan: u32,
) -> Result<SearchPage<Job>> {
    let listing = Jobs { storage, filter };
    walk(&listing, filter.before, filter.limit, payload, scan).await
}

/// History rows that `filter` selects and whose payload holds `payload`
/// (any without one), as [`search_jobs`] finds live jobs.
///
/// # Errors
/// As [`search_jobs`], with [`Storage::list_history`].
pub async fn search_history<S: Storage + ?Sized>(
    storage: &S,
    filter: &HistoryFilter,
    payload: Option<&PayloadMatch>,
    scan: u32,
) -> Result<SearchPage<HistoryRecord>> {
    let listing = History { storage, filter };
    walk(&listing, filter.before, filter.limit, payload, scan).await
}

/// Checks a search's row budget.
///
/// # Errors
/// [`QueueError::InvalidInput`] naming `scan` for 0 or above
/// [`MAX_SEARCH_SCAN`].
pub fn validate_scan(scan: u32) -> Result<()> {
    if scan == 0 || scan > MAX_SEARCH_SCAN {
        return Err(QueueError::invalid(
            "scan",
            format!("{scan}; expected 1..={MAX_SEARCH_SCAN}"),
        ));
    }
    Ok(())
}

/// A listing a search walks: its pages newest first, and each row's id
/// and payload.
trait Listing: Sync {
    type Row: Send;

    fn key(row: &Self::Row) -> (JobId, &Value);

    fn page(
        &self,
        before: Option<JobId>,
        limit: u32,
    ) -> impl Future<Output = Result<(Vec<Self::Row>, Option<JobId>)>> + Send;
}

/// The live jobs a filter selects.
struct Jobs<'a, S: ?Sized> {
    storage: &'a S,
    filter: &'a JobFilter,
}

impl<S: Storage + ?Sized> Listing for Jobs<'_, S> {
    type Row = Job;

    fn key(job: &Job) -> (JobId, &Value) {
        (job.id, &job.payload)
    }

    async fn page(&self, before: Option<JobId>, limit: u32) -> Result<(Vec<Job>, Option<JobId>)> {
        let filter = JobFilter {
            before,
            limit,
            ..self.filter.clone()
        };
        let page = self.storage.list_jobs(&filter).await?;
        Ok((page.jobs, page.next))
    }
}

/// The history rows a filter selects.
struct History<'a, S: ?Sized> {
    storage: &'a S,
    filter: &'a HistoryFilter,
}

impl<S: Storage + ?Sized> Listing for History<'_, S> {
    type Row = HistoryRecord;

    fn key(record: &HistoryRecord) -> (JobId, &Value) {
        (record.id, &record.payload)
    }

    async fn page(
        &self,
        before: Option<JobId>,
        limit: u32,
    ) -> Result<(Vec<HistoryRecord>, Option<JobId>)> {
        let filter = HistoryFilter {
            before,
            limit,
            ..self.filter.clone()
        };
        let page = self.storage.list_history(&filter).await?;
        Ok((page.records, page.next))
    }
}

/// The walk of both searches: `listing`'s pages from `before`, each row
/// kept when `payload` matches it.
async fn walk<L: Listing>(
    listing: &L,
    mut before: Option<JobId>,
    limit: u32,
    payload: Option<&PayloadMatch>,
    scan: u32,
) -> Result<SearchPage<L::Row>> {
    validate_scan(scan)?;
    crate::validate_limit("limit", limit, MAX_PAGE_SIZE)?;
    let mut items = Vec::new();
    let mut scanned: u32 = 0;
    loop {
        let found = u32::try_from(items.len()).unwrap_or(u32::MAX);
        // Without a payload match every row is kept: read no more than
        // the rows still wanted.
        let wanted = if payload.is_some() {
            MAX_PAGE_SIZE
        } else {
            limit - found
        };
        let page = wanted.min(scan - scanned).min(MAX_PAGE_SIZE);
        let (rows, next) = listing.page(before, page).await?;
        let read = rows.len();
        for (i, row) in rows.into_iter().enumerate() {
            scanned += 1;
            let (id, body) = L::key(&row);
            if payload.is_none_or(|p| p.matches(body)) {
                items.push(row);
            }
            if items.len() == limit as usize {
                let more = i + 1 < read || next.is_some();
                return Ok(SearchPage {
                    items,
                    next: more.then_some(id),
                    scanned,
                    budget_spent: false,
                });
            }
        }
        let Some(next) = next else {
            return Ok(SearchPage {
                items,
                next: None,
                scanned,
                budget_spent: false,
            });
        };
        before = Some(next);
        if scanned >= scan {
            return Ok(SearchPage {
                items,
                next: Some(next),
                scanned,
                budget_spent: true,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parsed(text: &str) -> PayloadMatch {
        text.parse().unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    #[test]
    fn values_are_json_or_a_bare_string() {
        assert_eq!(parsed("payload.a = 42").value(), &json!(42));
        assert_eq!(parsed("payload.a = \"42\"").value(), &json!("42"));
        assert_eq!(parsed("payload.a = gold").value(), &json!("gold"));
        assert_eq!(parsed("payload.a = true").value(), &json!(true));
        assert_eq!(parsed("payload.a = null").value(), &json!(null));
        assert_eq!(parsed("payload.a={\"b\":1}").value(), &json!({"b": 1}));
        assert_eq!(parsed("payload.a = x = y").value(), &json!("x = y"));
    }

    #[test]
    fn paths_walk_keys_and_indexes() {
        let payload = json!({"customer_id": 42, "tags": ["a", "b"], "o": {"n-1": {"x_y": 2.0}}});
        assert!(parsed("payload.customer_id = 42").matches(&payload));
        assert!(parsed("payload.customer_id = 42.0").matches(&payload));
        assert!(!parsed("payload.customer_id = \"42\"").matches(&payload));
        assert!(!parsed("payload.customer_id = 43").matches(&payload));
        assert!(parsed("payload.tags[1] = b").matches(&payload));
        assert!(!parsed("payload.tags[2] = b").matches(&payload));
        assert!(parsed("payload.o.n-1.x_y = 2").matches(&payload));
        assert!(!parsed("payload.missing = 42").matches(&payload));
        assert!(!parsed("payload.customer_id.deeper = 42").matches(&payload));
        assert!(!parsed("payload.customer_id = 42").matches(&json!([42])));
        assert!(parsed("payload[0] = 42").matches(&json!([42])));
        assert!(parsed("payload.big = 18446744073709551615").matches(&json!({"big": u64::MAX})));
    }

    #[test]
    fn bad_input_is_refused_with_its_field() {
        let long = format!("payload.a = \"{}\"", "x".repeat(MAX_MATCH_BYTES));
        let deep = format!("payload{} = 1", ".a".repeat(MAX_PATH_STEPS + 1));
        for text in [
            "",
            "customer_id = 42",
            "payload = 42",
            "payload.customer_id",
            "payload.customer_id =",
            "payload..a = 1",
            "payload.a b = 1",
            "payload[x] = 1",
            "payload[1 = 1",
            "payload.a[] = 1",
            "payloads.a = 1",
            long.as_str(),
            deep.as_str(),
        ] {
            let error = text.parse::<PayloadMatch>().expect_err(text);
            assert_eq!(error.invalid_field(), Some("payload_match"), "{text:?}");
        }
    }

    #[test]
    fn display_round_trips() {
        for text in [
            "payload.a = 42",
            "payload.o.lines[3].sku = \"A-7\"",
            "payload[0] = null",
        ] {
            let once = parsed(text);
            assert_eq!(once.to_string(), text);
            assert_eq!(parsed(&once.to_string()), once);
        }
    }

    #[test]
    fn scan_budgets_are_bounded() {
        assert!(validate_scan(1).is_ok());
        assert!(validate_scan(MAX_SEARCH_SCAN).is_ok());
        for scan in [0, MAX_SEARCH_SCAN + 1] {
            assert_eq!(
                validate_scan(scan).expect_err("refused").invalid_field(),
                Some("scan")
            );
        }
    }
}
