//! The Grafana board in `queue-dashboard/grafana/queue.json` asks only for
//! what `/metrics` exports: every panel's query (and the queue variable's)
//! is read, and each metric it names, each label it selects or groups by,
//! and each `state` or `status` value it filters on must appear in a real
//! scrape of the dashboard, with jobs in every state and finished jobs
//! counted.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use queue_core::{
    DequeueRequest, FinalStatus, ManualClock, NewJob, QueueName, Retry, Storage, WorkerId,
};
use queue_dashboard::{DashboardOptions, router};
use queue_testkit::MemoryStorage;
use serde_json::{Value, json};
use tower::ServiceExt;

const BOARD: &str = include_str!("../grafana/queue.json");

/// What a scrape exposes: per sample name, each label with its values.
type Exposed = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

async fn scrape(app: &axum::Router) -> String {
    let request = Request::get("/metrics")
        .header(header::HOST, "127.0.0.1:8080")
        .body(Body::empty())
        .expect("request");
    let response = app.clone().oneshot(request).await.expect("a response");
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    String::from_utf8(bytes.to_vec()).expect("UTF-8")
}

fn exposed(body: &str) -> Exposed {
    let mut out = Exposed::new();
    for line in body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, _value) = line.rsplit_once(' ').expect("name and value");
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        let entry = out.entry(name.to_owned()).or_default();
        for pair in labels.split(',').filter(|p| !p.is_empty()) {
            let (label, value) = pair.split_once('=').expect("label=value");
            entry
                .entry(label.to_owned())
                .or_default()
                .insert(value.trim_matches('"').to_owned());
        }
    }
    out
}

/// A metric named in a query, with the labels its selector matches on
/// (and the values it compares them with).
#[derive(Debug)]
struct Selector {
    metric: String,
    labels: Vec<(String, String)>,
}

/// What one PromQL expression names: selectors, and the labels of every
/// `by (...)` / `without (...)` grouping.
#[derive(Debug, Default)]
struct Names {
    selectors: Vec<Selector>,
    grouping: Vec<String>,
}

const KEYWORDS: [&str; 8] = [
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "on",
    "ignoring",
    "group_left",
];

fn identifier(chars: &[char], mut i: usize) -> (String, usize) {
    let start = i;
    while i < chars.len()
        && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
    {
        i += 1;
    }
    (chars[start..i].iter().collect(), i)
}

fn skip_space(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    i
}

/// The label matchers of a selector body (between `{` and `}`).
fn matchers(body: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(op) = rest.find(['=', '!']) {
        let label = rest[..op].trim().trim_start_matches(',').trim().to_owned();
        let after = rest[op..].trim_start_matches(['=', '!', '~']);
        let value_start = after.find('"').expect("a quoted value") + 1;
        let value_end = value_start + after[value_start..].find('"').expect("a closing quote");
        out.push((label, after[value_start..value_end].to_owned()));
        rest = &after[value_end + 1..];
    }
    out
}

fn names(expr: &str) -> Names {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = Names::default();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '[' {
            while i < chars.len() && chars[i] != ']' {
                i += 1;
            }
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let (word, end) = identifier(&chars, i);
            let next = skip_space(&chars, end);
            match chars.get(next) {
                Some('(') if word == "by" || word == "without" => {
                    let close = next + chars[next..].iter().position(|&c| c == ')').expect(")");
                    let list: String = chars[next + 1..close].iter().collect();
                    names
                        .grouping
                        .extend(list.split(',').map(|l| l.trim().to_owned()));
                    i = close + 1;
                }
                Some('(') => i = next + 1,
                Some('{') => {
                    let close = next + chars[next..].iter().position(|&c| c == '}').expect("}");
                    let body: String = chars[next + 1..close].iter().collect();
                    names.selectors.push(Selector {
                        metric: word,
                        labels: matchers(&body),
                    });
                    i = close + 1;
                }
                _ => {
                    // `sum by (...) (...)`: an aggregation, its grouping
                    // before its argument.
                    let (following, _) = identifier(&chars, next);
                    let aggregation = following == "by" || following == "without";
                    if !aggregation && !KEYWORDS.contains(&word.as_str()) {
                        names.selectors.push(Selector {
                            metric: word,
                            labels: Vec::new(),
                        });
                    }
                    i = end;
                }
            }
        } else if c == '{' {
            panic!("a selector without a metric name in {expr:?}");
        } else {
            i += 1;
        }
    }
    names
}

/// Every query of the board: each panel target's `expr`, and the queue
/// variable's `label_values(metric, label)` as the selector `metric` plus
/// a grouping by `label`.
fn queries(board: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for panel in board["panels"].as_array().expect("panels") {
        let title = panel["title"].as_str().expect("a title");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "panel {title:?} has no query");
        for target in targets {
            let expr = target["expr"].as_str().expect("an expr");
            out.push((title.to_owned(), expr.to_owned()));
        }
    }
    for variable in board["templating"]["list"].as_array().expect("variables") {
        if variable["type"] == "query" {
            let query = variable["definition"].as_str().expect("a definition");
            let inner = query
                .strip_prefix("label_values(")
                .and_then(|q| q.strip_suffix(')'))
                .expect("label_values(metric, label)");
            let (metric, label) = inner.split_once(',').expect("metric, label");
            out.push((
                format!("variable {}", variable["name"]),
                format!("sum by ({}) ({})", label.trim(), metric.trim()),
            ));
        }
    }
    out
}

/// A storage whose scrape shows every family: jobs pending, scheduled,
/// running, stalled and exhausted, and finished jobs counted (a counter
/// counts a minute one to two minutes after it closed).
async fn scraped() -> Exposed {
    let start = chrono::DateTime::parse_from_rfc3339("2030-01-01T12:00:10Z")
        .expect("time")
        .to_utc();
    let clock = ManualClock::new(start);
    let storage = Arc::new(MemoryStorage::with_clock(clock.clone()));
    let app = router(Arc::clone(&storage), DashboardOptions::default()).expect("router");
    scrape(&app).await;
    clock.advance(Duration::from_secs(60));
    let claim = |n: u32| {
        DequeueRequest::new(
            vec![QueueName::new("mail").expect("valid")],
            n,
            Duration::from_secs(30),
            WorkerId::new("w").expect("valid"),
        )
        .expect("valid")
    };
    for i in 0..4 {
        storage
            .enqueue(NewJob::new("mail", json!(i)).max_attempts(1))
            .await
            .expect("enqueue");
    }
    let jobs = storage.dequeue(&claim(2)).await.expect("dequeue");
    storage
        .ack(&jobs[0].lease().expect("lease"), None)
        .await
        .expect("ack");
    let outcome = storage
        .nack(&jobs[1].lease().expect("lease"), json!("no"), Retry::Never)
        .await
        .expect("nack");
    assert!(matches!(outcome, queue_core::NackOutcome::DeadLettered));
    clock.advance(Duration::from_secs(120));
    // A stalled job (claimed, lease expired) and a running one.
    storage.dequeue(&claim(1)).await.expect("dequeue");
    clock.advance(Duration::from_secs(60));
    storage.dequeue(&claim(1)).await.expect("dequeue");
    storage
        .enqueue(NewJob::new("mail", json!("later")).delay(Duration::from_secs(600)))
        .await
        .expect("enqueue");
    storage
        .enqueue(NewJob::new("mail", json!("now")))
        .await
        .expect("enqueue");
    storage
        .pause_queue(&QueueName::new("mail").expect("valid"))
        .await
        .expect("pause");
    let history = storage
        .list_history(&queue_core::HistoryFilter::default())
        .await
        .expect("history");
    assert!(
        history
            .records
            .iter()
            .any(|r| r.status == FinalStatus::DeadLetter)
    );
    exposed(&scrape(&app).await)
}

#[tokio::test]
async fn every_query_of_the_grafana_board_names_what_metrics_exports() {
    let board: Value = serde_json::from_str(BOARD).expect("the board is JSON");
    let exposed = scraped().await;
    let mut ids = BTreeSet::new();
    for panel in board["panels"].as_array().expect("panels") {
        assert!(ids.insert(panel["id"].as_u64().expect("an id")), "{panel}");
        assert!(panel["gridPos"]["w"].as_u64().is_some(), "{panel}");
    }
    let queries = queries(&board);
    assert!(queries.len() >= 8, "{queries:?}");
    for (title, expr) in &queries {
        let names = names(expr);
        assert!(
            !names.selectors.is_empty(),
            "{title}: no metric in {expr:?}"
        );
        for selector in &names.selectors {
            let labels = exposed.get(&selector.metric).unwrap_or_else(|| {
                panic!(
                    "{title}: {expr:?} names {}, which /metrics does not export (it exports {:?})",
                    selector.metric,
                    exposed.keys().collect::<Vec<_>>()
                )
            });
            for (label, value) in &selector.labels {
                let values = labels.get(label).unwrap_or_else(|| {
                    panic!(
                        "{title}: {expr:?} selects on {label}, which {} does not carry",
                        selector.metric
                    )
                });
                if label == "state" || label == "status" {
                    assert!(
                        values.contains(value),
                        "{title}: {expr:?} wants {label}={value:?}; {} has {values:?}",
                        selector.metric
                    );
                }
            }
            for label in &names.grouping {
                assert!(
                    labels.contains_key(label),
                    "{title}: {expr:?} groups by {label}, which {} does not carry",
                    selector.metric
                );
            }
        }
    }
}

#[test]
fn the_query_reader_finds_metrics_labels_and_groupings() {
    let names = names(
        r#"sum by (queue, state) (rate(queue_jobs_completed_total{queue=~"$queue", state!="x"}[5m])) * 60 + queue_paused"#,
    );
    let metrics: Vec<&str> = names.selectors.iter().map(|s| s.metric.as_str()).collect();
    assert_eq!(metrics, ["queue_jobs_completed_total", "queue_paused"]);
    assert_eq!(
        names.selectors[0].labels,
        [
            ("queue".to_owned(), "$queue".to_owned()),
            ("state".to_owned(), "x".to_owned())
        ]
    );
    assert_eq!(names.grouping, ["queue", "state"]);
}
