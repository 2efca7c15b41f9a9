//! The dashboard's handlers over the in-memory reference storage: pages,
//! actions, the access token, CSRF, read-only mode, escaping, metrics.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use queue_core::{DequeueRequest, JobId, ManualClock, NewJob, QueueName, Retry, Storage, WorkerId};
use queue_dashboard::{DashboardOptions, router};
use queue_testkit::MemoryStorage;
use serde_json::json;
use tower::ServiceExt;

struct Reply {
    status: StatusCode,
    location: Option<String>,
    cookie: Option<String>,
    body: String,
}

async fn send(app: &axum::Router, request: Request<Body>) -> Reply {
    let response = app.clone().oneshot(request).await.expect("a response");
    let header_text = |name| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let (status, location, cookie) = (
        response.status(),
        header_text(header::LOCATION),
        header_text(header::SET_COOKIE),
    );
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .expect("a body");
    Reply {
        status,
        location,
        cookie,
        body: String::from_utf8(bytes.to_vec()).expect("UTF-8"),
    }
}

fn get(path: &str) -> Request<Body> {
    Request::get(path).body(Body::empty()).expect("request")
}

fn post(path: &str, form: &str) -> Request<Body> {
    Request::post(path)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(form.to_owned()))
        .expect("request")
}

/// The CSRF token of a page's forms.
fn csrf(page: &str) -> String {
    let at = page
        .find(r#"name="csrf" value=""#)
        .expect("a form with a CSRF token")
        + 19;
    page[at..at + 32].to_owned()
}

/// A storage holding one pending job and one dead letter (ids returned).
async fn storage() -> (Arc<MemoryStorage>, JobId, JobId) {
    let storage = Arc::new(MemoryStorage::new());
    let live = storage
        .enqueue(NewJob::new(
            "emails",
            json!({ "to": "<script>alert(1)</script>" }),
        ))
        .await
        .expect("enqueue")
        .id;
    let dead = storage
        .enqueue(NewJob::new("reports", json!({ "n": 1 })).max_attempts(1))
        .await
        .expect("enqueue")
        .id;
    let request = DequeueRequest::new(
        vec![QueueName::new("reports").expect("name")],
        1,
        Duration::from_secs(30),
        WorkerId::new("w").expect("worker"),
    )
    .expect("request");
    let job = storage.dequeue(&request).await.expect("dequeue").remove(0);
    storage
        .nack(
            &job.lease().expect("leased"),
            json!({ "message": "<b>boom</b>" }),
            Retry::Never,
        )
        .await
        .expect("nack");
    (storage, live, dead)
}

#[tokio::test]
async fn the_overview_shows_each_queue_and_refreshes_itself() {
    let (storage, _, _) = storage().await;
    let app = router(storage, DashboardOptions::default());
    let page = send(&app, get("/")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains(">emails</a>"), "{}", page.body);
    assert!(page.body.contains(r#"http-equiv="refresh""#));
    assert!(page.body.contains(r#"action="/queues/emails/pause""#));
}

#[tokio::test]
async fn payloads_and_errors_render_as_text_never_as_markup() {
    let (storage, live, dead) = storage().await;
    let app = router(storage, DashboardOptions::default());
    let page = send(&app, get(&format!("/jobs/{live}"))).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("<script>"), "{}", page.body);
    let page = send(&app, get(&format!("/jobs/{dead}"))).await;
    assert!(page.body.contains("&lt;b&gt;boom&lt;/b&gt;") && !page.body.contains("<b>boom"));
}

#[tokio::test]
async fn a_dead_letter_is_retried_from_its_page() {
    let (storage, _, dead) = storage().await;
    let app = router(Arc::clone(&storage), DashboardOptions::default());
    let page = send(&app, get("/history?status=dead_letter")).await;
    assert!(
        page.body.contains(&format!("/jobs/{dead}/retry")),
        "{}",
        page.body
    );
    let reply = send(
        &app,
        post(
            &format!("/jobs/{dead}/retry"),
            &format!("csrf={}", csrf(&page.body)),
        ),
    )
    .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    assert_eq!(
        reply.location.as_deref(),
        Some(format!("/jobs/{dead}").as_str())
    );
    assert!(
        storage.get_job(dead).await.expect("read").is_some(),
        "live again"
    );
}

#[tokio::test]
async fn a_mutation_without_the_csrf_token_is_refused_and_changes_nothing() {
    let (storage, live, dead) = storage().await;
    let app = router(Arc::clone(&storage), DashboardOptions::default());
    for (path, form) in [
        (format!("/jobs/{dead}/retry"), String::new()),
        (
            format!("/jobs/{live}/discard"),
            "csrf=00000000000000000000000000000000".to_owned(),
        ),
        ("/queues/emails/pause".to_owned(), String::new()),
        (
            "/enqueue".to_owned(),
            "queue=emails&payload=%7B%7D".to_owned(),
        ),
    ] {
        let reply = send(&app, post(&path, &form)).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{path}");
    }
    assert!(
        storage.get_job(dead).await.expect("read").is_none(),
        "still a dead letter"
    );
    assert!(
        storage.get_job(live).await.expect("read").is_some(),
        "not discarded"
    );
    let stats = storage.stats().await.expect("stats");
    assert!(stats.iter().all(|s| !s.paused));
    assert_eq!(
        stats.iter().map(|s| s.live()).sum::<u64>(),
        1,
        "nothing enqueued"
    );
}

#[tokio::test]
async fn read_only_refuses_every_mutation_and_shows_no_buttons() {
    let (storage, live, _) = storage().await;
    let options = DashboardOptions {
        read_only: true,
        ..DashboardOptions::default()
    };
    let app = router(Arc::clone(&storage), options);
    let page = send(&app, get(&format!("/jobs/{live}"))).await;
    assert!(
        !page.body.contains("<form method=\"post\""),
        "{}",
        page.body
    );
    let token = "csrf=whatever";
    let reply = send(&app, post(&format!("/jobs/{live}/discard"), token)).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert_eq!(
        send(&app, get("/enqueue")).await.status,
        StatusCode::FORBIDDEN
    );
    assert!(storage.get_job(live).await.expect("read").is_some());
}

#[tokio::test]
async fn with_a_token_every_page_needs_it_but_healthz() {
    let (storage, _, _) = storage().await;
    let options = DashboardOptions {
        token: Some("s3cret-token-0123456789".to_owned()),
        ..DashboardOptions::default()
    };
    let app = router(storage, options);
    assert_eq!(send(&app, get("/")).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        send(&app, get("/metrics")).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        send(&app, get("/?token=wrong")).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(send(&app, get("/healthz")).await.status, StatusCode::OK);
    let with_bearer = Request::get("/")
        .header(header::AUTHORIZATION, "Bearer s3cret-token-0123456789")
        .body(Body::empty())
        .expect("request");
    assert_eq!(send(&app, with_bearer).await.status, StatusCode::OK);
    let login = send(&app, get("/history?token=s3cret-token-0123456789")).await;
    assert_eq!(login.status, StatusCode::SEE_OTHER);
    assert_eq!(login.location.as_deref(), Some("/history"));
    let cookie = login.cookie.expect("a cookie");
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    let with_cookie = Request::get("/history")
        .header(
            header::COOKIE,
            cookie.split(';').next().expect("name=value"),
        )
        .body(Body::empty())
        .expect("request");
    assert_eq!(send(&app, with_cookie).await.status, StatusCode::OK);
}

#[tokio::test]
async fn the_enqueue_form_adds_a_job_and_rejects_bad_input() {
    let (storage, _, _) = storage().await;
    let app = router(Arc::clone(&storage), DashboardOptions::default());
    let token = csrf(&send(&app, get("/enqueue")).await.body);
    let reply = send(
        &app,
        post(
            "/enqueue",
            &format!(
                "csrf={token}&queue=sms&payload=%7B%22a%22%3A1%7D&priority=3&delay_seconds=60"
            ),
        ),
    )
    .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    let id: i64 = reply
        .location
        .expect("to the job")
        .trim_start_matches("/jobs/")
        .parse()
        .expect("an id");
    let job = storage
        .get_job(JobId(id))
        .await
        .expect("read")
        .expect("live");
    assert_eq!(
        (job.queue.as_str(), job.priority, job.payload.clone()),
        ("sms", 3, json!({ "a": 1 }))
    );
    let bad = send(
        &app,
        post("/enqueue", &format!("csrf={token}&queue=sms&payload=nope")),
    )
    .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let bad = send(
        &app,
        post("/enqueue", &format!("csrf={token}&queue=&payload=%7B%7D")),
    )
    .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        send(&app, get("/history?status=bogus")).await.status,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn metrics_expose_a_gauge_per_queue_and_state() {
    let (storage, _, _) = storage().await;
    let app = router(storage, DashboardOptions::default());
    let reply = send(&app, get("/metrics")).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(
        reply
            .body
            .contains(r#"queue_jobs{queue="emails",state="pending"} 1"#),
        "{}",
        reply.body
    );
    assert!(
        reply.body.contains(r#"queue_paused{queue="emails"} 0"#),
        "{}",
        reply.body
    );
    assert!(reply.body.trim_end().ends_with("# EOF"));
}

#[tokio::test]
async fn the_overview_counts_the_last_day_and_charts_the_last_hour() {
    let (storage, _, _) = storage().await;
    let app = router(storage, DashboardOptions::default());
    let page = send(&app, get("/")).await;
    assert_eq!(page.status, StatusCode::OK);
    // `reports` has no live job left, only a dead letter from just now.
    assert!(page.body.contains(">reports</a>"), "{}", page.body);
    assert!(
        page.body
            .contains(r#"<a href="/history?status=dead_letter&amp;queue=reports">1</a>"#),
        "{}",
        page.body
    );
    assert!(page.body.contains(r#"<svg class="chart""#), "{}", page.body);
    assert!(page.body.contains(r#"<rect class="dead""#), "{}", page.body);
    assert!(
        page.body.contains("0 completed, 1 dead-lettered"),
        "{}",
        page.body
    );
}

/// Three jobs scheduled an hour ahead in queue `bulk`.
async fn scheduled(storage: &MemoryStorage) -> Vec<JobId> {
    let mut ids = Vec::new();
    for i in 0..3 {
        let job = NewJob::new("bulk", json!({ "i": i })).delay(Duration::from_secs(3600));
        ids.push(storage.enqueue(job).await.expect("enqueue").id);
    }
    ids
}

#[tokio::test]
async fn the_jobs_page_filters_and_discards_what_it_selects() {
    let (storage, live, _) = storage().await;
    let ids = scheduled(&storage).await;
    let app = router(Arc::clone(&storage), DashboardOptions::default());
    let page = send(&app, get("/jobs?queue=bulk&state=scheduled")).await;
    assert_eq!(page.status, StatusCode::OK);
    for id in &ids {
        assert!(
            page.body.contains(&format!(r#"href="/jobs/{id}""#)),
            "{}",
            page.body
        );
    }
    assert!(!page.body.contains(&format!(r#"href="/jobs/{live}""#)));
    assert_eq!(
        send(&app, get("/jobs?state=sleeping")).await.status,
        StatusCode::BAD_REQUEST
    );
    let token = csrf(&page.body);
    let refused = send(&app, post("/jobs/bulk", "action=discard&queue=bulk")).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(storage.get_job(ids[0]).await.expect("read").is_some());

    let done = send(
        &app,
        post(
            "/jobs/bulk",
            &format!("csrf={token}&action=discard&queue=bulk&state=scheduled&unique_key="),
        ),
    )
    .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert_eq!(
        done.location.as_deref(),
        Some("/jobs?queue=bulk&state=scheduled")
    );
    for id in &ids {
        let record = storage
            .get_history(*id)
            .await
            .expect("read")
            .expect("archived");
        assert_eq!(record.status, queue_core::FinalStatus::Discarded);
    }
    assert!(
        storage.get_job(live).await.expect("read").is_some(),
        "other queues untouched"
    );
}

#[tokio::test]
async fn run_now_moves_a_scheduled_job_and_refuses_a_pending_one() {
    let (storage, live, _) = storage().await;
    let ids = scheduled(&storage).await;
    let app = router(Arc::clone(&storage), DashboardOptions::default());
    let page = send(&app, get(&format!("/jobs/{}", ids[0]))).await;
    assert!(
        page.body
            .contains(&format!(r#"action="/jobs/{}/run-now""#, ids[0]))
    );
    let token = csrf(&page.body);
    let moved = send(
        &app,
        post(
            &format!("/jobs/{}/run-now", ids[0]),
            &format!("csrf={token}"),
        ),
    )
    .await;
    assert_eq!(moved.status, StatusCode::SEE_OTHER);
    let now = storage.now().await.expect("now");
    let job = storage.get_job(ids[0]).await.expect("read").expect("live");
    assert_eq!(job.state(now), queue_core::JobState::Pending);
    let refused = send(
        &app,
        post(&format!("/jobs/{live}/run-now"), &format!("csrf={token}")),
    )
    .await;
    assert_eq!(refused.status, StatusCode::CONFLICT);

    let bulk = send(
        &app,
        post(
            "/jobs/bulk",
            &format!("csrf={token}&action=run_now&queue=bulk"),
        ),
    )
    .await;
    assert_eq!(bulk.status, StatusCode::SEE_OTHER);
    let now = storage.now().await.expect("now");
    for id in &ids {
        let job = storage.get_job(*id).await.expect("read").expect("live");
        assert_eq!(job.state(now), queue_core::JobState::Pending, "{id}");
    }
}

#[tokio::test]
async fn every_dead_letter_is_retried_from_the_dead_letters_page() {
    let (storage, _, dead) = storage().await;
    let app = router(Arc::clone(&storage), DashboardOptions::default());
    let page = send(&app, get("/history?status=dead_letter")).await;
    assert!(
        page.body.contains(r#"action="/dead-letters/retry""#),
        "{}",
        page.body
    );
    let token = csrf(&page.body);
    let done = send(
        &app,
        post("/dead-letters/retry", &format!("csrf={token}&queue=")),
    )
    .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER);
    assert!(
        storage.get_job(dead).await.expect("read").is_some(),
        "live again"
    );
}

#[tokio::test]
async fn metrics_count_the_jobs_finished_in_the_last_hour() {
    let (storage, _, _) = storage().await;
    let app = router(storage, DashboardOptions::default());
    let reply = send(&app, get("/metrics")).await;
    assert!(
        reply
            .body
            .contains(r#"queue_finished_last_hour{queue="reports",status="dead_letter"} 1"#),
        "{}",
        reply.body
    );
}

#[tokio::test]
async fn a_live_job_is_cancelled_from_its_page() {
    let (storage, live, _) = storage().await;
    let app = router(Arc::clone(&storage), DashboardOptions::default());
    let page = send(&app, get(&format!("/jobs/{live}"))).await;
    assert!(
        page.body.contains(&format!("/jobs/{live}/cancel")),
        "{}",
        page.body
    );
    let form = format!("csrf={}", csrf(&page.body));
    let reply = send(&app, post(&format!("/jobs/{live}/cancel"), &form)).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    let record = storage
        .get_history(live)
        .await
        .expect("read")
        .expect("archived");
    assert_eq!(record.status, queue_core::FinalStatus::Cancelled);
    let again = send(&app, post(&format!("/jobs/{live}/cancel"), &form)).await;
    assert_eq!(again.status, StatusCode::NOT_FOUND, "{}", again.body);
}

#[tokio::test]
async fn limits_are_set_from_the_overview_and_shown_there() {
    let (storage, _, _) = storage().await;
    let app = router(Arc::clone(&storage), DashboardOptions::default());
    let page = send(&app, get("/")).await;
    let token = csrf(&page.body);
    let reply = send(
        &app,
        post(
            "/queues/limits",
            &format!("csrf={token}&queue=emails&concurrency=5&rate=2.5&burst="),
        ),
    )
    .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    let configs = storage.queue_configs().await.expect("configs");
    assert_eq!(configs.len(), 1);
    assert_eq!(configs[0].limits.concurrency, Some(5));
    let rate = configs[0].limits.rate.expect("a rate");
    assert_eq!(
        (rate.per_second, rate.burst),
        (2.5, 3),
        "burst defaults to the rate rounded up"
    );
    let page = send(&app, get("/")).await;
    assert!(
        page.body.contains("concurrency 5, 2.5/s (burst 3)"),
        "{}",
        page.body
    );
    let bad = send(
        &app,
        post(
            "/queues/limits",
            &format!("csrf={token}&queue=emails&concurrency=lots"),
        ),
    )
    .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    let zero = send(
        &app,
        post(
            "/queues/limits",
            &format!("csrf={token}&queue=emails&concurrency=0"),
        ),
    )
    .await;
    assert_eq!(zero.status, StatusCode::BAD_REQUEST, "{}", zero.body);
    assert_eq!(
        storage.queue_configs().await.expect("configs")[0]
            .limits
            .concurrency,
        Some(5)
    );
}

/// Claims and finishes one job of `queue`: acked, or dead-lettered.
async fn finish(storage: &MemoryStorage, queue: &str, ok: bool) -> JobId {
    let id = storage
        .enqueue(NewJob::new(queue, json!({})).max_attempts(1))
        .await
        .expect("enqueue")
        .id;
    let request = DequeueRequest::new(
        vec![QueueName::new(queue).expect("name")],
        1,
        Duration::from_secs(30),
        WorkerId::new("w").expect("worker"),
    )
    .expect("request");
    let job = storage.dequeue(&request).await.expect("dequeue").remove(0);
    let lease = job.lease().expect("leased");
    if ok {
        storage.ack(&lease, None).await.expect("ack");
    } else {
        storage
            .nack(&lease, json!("boom"), Retry::Never)
            .await
            .expect("nack");
    }
    id
}

fn counter(body: &str, name: &str, queue: &str) -> Option<u64> {
    let prefix = format!("{name}_total{{queue=\"{queue}\"}} ");
    body.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map(|n| n.parse().expect("a count"))
}

#[tokio::test]
async fn metrics_count_finished_jobs_in_counters_that_only_grow() {
    let start = chrono::DateTime::parse_from_rfc3339("2030-01-01T12:00:10Z")
        .expect("time")
        .to_utc();
    let clock = ManualClock::new(start);
    let storage = Arc::new(MemoryStorage::with_clock(clock.clone()));
    finish(&storage, "mail", true).await;
    let app = router(Arc::clone(&storage), DashboardOptions::default());
    // The first scrape starts counting: what finished before is not counted.
    let reply = send(&app, get("/metrics")).await;
    assert_eq!(counter(&reply.body, "queue_jobs_completed", "mail"), None);

    clock.advance(Duration::from_secs(60));
    finish(&storage, "mail", true).await;
    finish(&storage, "mail", true).await;
    let dead = finish(&storage, "mail", false).await;
    // 12:01:10: the jobs' minute has not closed yet.
    let reply = send(&app, get("/metrics")).await;
    assert_eq!(counter(&reply.body, "queue_jobs_completed", "mail"), None);

    clock.advance(Duration::from_secs(120));
    let reply = send(&app, get("/metrics")).await;
    assert!(
        reply.body.contains("# TYPE queue_jobs_completed counter"),
        "{}",
        reply.body
    );
    assert_eq!(
        counter(&reply.body, "queue_jobs_completed", "mail"),
        Some(2)
    );
    assert_eq!(
        counter(&reply.body, "queue_jobs_dead_lettered", "mail"),
        Some(1)
    );

    // Retrying the dead letter takes it out of history, not out of the count;
    // scraping again counts nothing twice.
    storage.retry_dead_letter(dead).await.expect("retry");
    clock.advance(Duration::from_secs(60));
    finish(&storage, "mail", true).await;
    let reply = send(&app, get("/metrics")).await;
    assert_eq!(
        counter(&reply.body, "queue_jobs_completed", "mail"),
        Some(2)
    );
    assert_eq!(
        counter(&reply.body, "queue_jobs_dead_lettered", "mail"),
        Some(1)
    );
    clock.advance(Duration::from_secs(120));
    let reply = send(&app, get("/metrics")).await;
    assert_eq!(
        counter(&reply.body, "queue_jobs_completed", "mail"),
        Some(3)
    );
    assert_eq!(
        counter(&reply.body, "queue_jobs_dead_lettered", "mail"),
        Some(1)
    );
}
