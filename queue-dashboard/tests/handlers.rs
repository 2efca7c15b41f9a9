//! The dashboard's handlers over the in-memory reference storage: pages,
//! actions, the access token and its login, the Host check, security
//! headers, CSRF, read-only mode, escaping and encoding, metrics.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use queue_core::{
    Capabilities, DequeueRequest, JobId, ManualClock, NewJob, QueueName, Retry, Storage, WorkerId,
};
use queue_dashboard::{DashboardOptions, OptionsError, router};
use queue_testkit::MemoryStorage;
use queue_testkit::restricted::Restricted;
use serde_json::json;
use tower::ServiceExt;

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
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
    let headers = response.headers().clone();
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
        headers,
        location,
        cookie,
        body: String::from_utf8(bytes.to_vec()).expect("UTF-8"),
    }
}

/// The dashboard over `storage`, for options `router` accepts.
fn app<S: Storage>(storage: Arc<S>, options: DashboardOptions) -> axum::Router {
    router(storage, options).expect("valid options")
}

/// The `Host` a browser on the loopback address sends.
const HOST: &str = "127.0.0.1:8080";

fn get(path: &str) -> Request<Body> {
    Request::get(path)
        .header(header::HOST, HOST)
        .body(Body::empty())
        .expect("request")
}

fn post(path: &str, form: &str) -> Request<Body> {
    Request::post(path)
        .header(header::HOST, HOST)
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
    let app = app(storage, DashboardOptions::default());
    let page = send(&app, get("/")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains(">emails</a>"), "{}", page.body);
    assert!(page.body.contains(r#"action="/queues/pause?queue=emails""#));
    // Updated in place by the one script, every 5 s; reloaded without it.
    assert!(
        page.body.contains(r#"<main id="live" data-every="5">"#),
        "{}",
        page.body
    );
    assert!(page.body.contains(LIVE_SCRIPT), "{}", page.body);
    assert!(
        page.body
            .contains(r#"<noscript><meta http-equiv="refresh" content="5"></noscript>"#),
        "{}",
        page.body
    );
}

/// How pages load the live-update script.
const LIVE_SCRIPT: &str = r#"<script src="/live.js" defer></script>"#;

fn live_get(path: &str) -> Request<Body> {
    let mut request = get(path);
    request
        .headers_mut()
        .insert("x-live", "1".parse().expect("a value"));
    request
}

/// Live requests within a refresh period are answered from one copy of
/// the page (the storage is read once per period and page, however many
/// tabs ask); a plain request always reads afresh; past the period the
/// live copy is made again.
#[tokio::test]
async fn live_requests_within_a_period_share_one_copy_of_the_page() {
    let (storage, _, _) = storage().await;
    let options = DashboardOptions {
        refresh: Some(Duration::from_secs(1)),
        ..DashboardOptions::default()
    };
    let app = app(Arc::clone(&storage), options);
    let path = "/jobs?queue=emails";
    let first = send(&app, live_get(path)).await;
    assert_eq!(first.status, StatusCode::OK);
    let added = storage
        .enqueue(NewJob::new("emails", json!({ "n": 2 })))
        .await
        .expect("enqueue")
        .id;
    let shown = format!(r#"href="/jobs/{added}""#);
    assert!(!first.body.contains(&shown));
    let copy = send(&app, live_get(path)).await;
    assert_eq!(copy.status, StatusCode::OK);
    assert_eq!(copy.body, first.body, "a live request within the period");
    assert_eq!(
        copy.headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
        Some("text/html; charset=utf-8")
    );
    let plain = send(&app, get(path)).await;
    assert!(plain.body.contains(&shown), "a plain request reads afresh");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let later = send(&app, live_get(path)).await;
    assert!(later.body.contains(&shown), "past the period, a new copy");
}

/// A copy made for a reader with the token never reaches a request
/// without it: the access checks run first.
#[tokio::test]
async fn a_live_copy_is_served_only_past_the_access_checks() {
    let (storage, _, _) = storage().await;
    let app = app(storage, with_token());
    let mut allowed = live_get("/");
    allowed.headers_mut().insert(
        header::AUTHORIZATION,
        format!("Bearer {TOKEN}").parse().expect("a value"),
    );
    let page = send(&app, allowed).await;
    assert_eq!(page.status, StatusCode::OK);
    let refused = send(&app, live_get("/")).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert!(!refused.body.contains("emails"), "{}", refused.body);
}

/// The script is served with its type; with refresh off, pages load no
/// script and every request reads afresh; the enqueue form never updates
/// under the user's hands.
#[tokio::test]
async fn the_script_is_served_and_refresh_off_means_no_live_region() {
    let (storage, _, _) = storage().await;
    let open = app(Arc::clone(&storage), DashboardOptions::default());
    let script = send(&open, get("/live.js")).await;
    assert_eq!(script.status, StatusCode::OK);
    assert!(script.body.contains(r#""X-Live": "1""#), "{}", script.body);
    assert_eq!(
        script
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
        Some("text/javascript; charset=utf-8")
    );
    let form = send(&open, get("/enqueue")).await;
    assert!(!form.body.contains("<script"), "{}", form.body);
    assert!(!form.body.contains(r#"id="live""#), "{}", form.body);

    let still = app(
        Arc::clone(&storage),
        DashboardOptions {
            refresh: None,
            ..DashboardOptions::default()
        },
    );
    let page = send(&still, live_get("/jobs?queue=emails")).await;
    assert!(!page.body.contains("<script"), "{}", page.body);
    assert!(!page.body.contains(r#"id="live""#), "{}", page.body);
    let added = storage
        .enqueue(NewJob::new("emails", json!({ "n": 3 })))
        .await
        .expect("enqueue")
        .id;
    let again = send(&still, live_get("/jobs?queue=emails")).await;
    assert!(again.body.contains(&format!(r#"href="/jobs/{added}""#)));
}

#[tokio::test]
async fn payloads_and_errors_render_as_text_never_as_markup() {
    let (storage, live, dead) = storage().await;
    let app = app(storage, DashboardOptions::default());
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
    let app = app(Arc::clone(&storage), DashboardOptions::default());
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
    let app = app(Arc::clone(&storage), DashboardOptions::default());
    for (path, form) in [
        (format!("/jobs/{dead}/retry"), String::new()),
        (
            format!("/jobs/{live}/discard"),
            "csrf=00000000000000000000000000000000".to_owned(),
        ),
        ("/queues/pause?queue=emails".to_owned(), String::new()),
        (
            "/queues/group-limit".to_owned(),
            "queue=emails&group=big&limit=2".to_owned(),
        ),
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

/// Pages that show buttons when the dashboard is writable.
fn pages_with_buttons(live: JobId, dead: JobId) -> Vec<String> {
    vec![
        "/".to_owned(),
        format!("/jobs/{live}"),
        format!("/jobs/{dead}"),
        "/jobs?queue=emails".to_owned(),
        "/history?status=dead_letter".to_owned(),
    ]
}

#[tokio::test]
async fn read_only_refuses_every_mutation_and_shows_no_buttons() {
    let (storage, live, dead) = storage().await;
    let scheduled = scheduled(&storage).await;
    // A writable dashboard over the same storage: its pages write the
    // markup looked for below, and its CSRF token is the process's.
    let writable = app(Arc::clone(&storage), DashboardOptions::default());
    let mut token = String::new();
    for path in pages_with_buttons(live, dead) {
        let page = send(&writable, get(&path)).await;
        assert!(
            page.body.contains(r#"method="post""#),
            "{path}: {}",
            page.body
        );
        token = csrf(&page.body);
    }
    let options = DashboardOptions {
        read_only: true,
        ..DashboardOptions::default()
    };
    let app = app(Arc::clone(&storage), options);
    for path in pages_with_buttons(live, dead) {
        let page = send(&app, get(&path)).await;
        assert_eq!(page.status, StatusCode::OK, "{path}");
        assert!(
            !page.body.contains(r#"method="post""#),
            "{path}: {}",
            page.body
        );
        assert!(
            !page.body.contains(r#"name="csrf""#),
            "{path}: {}",
            page.body
        );
        assert!(page.body.contains("read-only"), "{path}: {}", page.body);
    }
    let csrf = format!("csrf={token}");
    let mutations = [
        (format!("/jobs/{dead}/retry"), csrf.clone()),
        (format!("/jobs/{live}/discard"), csrf.clone()),
        (format!("/jobs/{live}/cancel"), csrf.clone()),
        (format!("/jobs/{}/run-now", scheduled[0]), csrf.clone()),
        (
            "/jobs/bulk".to_owned(),
            format!("{csrf}&action=discard&queue=bulk"),
        ),
        (
            "/jobs/bulk".to_owned(),
            format!("{csrf}&action=run_now&queue=bulk"),
        ),
        ("/dead-letters/retry".to_owned(), format!("{csrf}&queue=")),
        (
            "/enqueue".to_owned(),
            format!("{csrf}&queue=emails&payload=%7B%7D"),
        ),
        (
            "/queues/limits".to_owned(),
            format!("{csrf}&queue=emails&concurrency=5"),
        ),
        ("/queues/pause?queue=emails".to_owned(), csrf.clone()),
        ("/queues/resume?queue=emails".to_owned(), csrf.clone()),
        (
            "/queues/group-limit".to_owned(),
            format!("{csrf}&queue=emails&group=big&limit=2"),
        ),
    ];
    for (path, form) in mutations {
        let reply = send(&app, post(&path, &form)).await;
        assert_eq!(
            reply.status,
            StatusCode::FORBIDDEN,
            "{path}: {}",
            reply.body
        );
        assert!(reply.body.contains("read-only"), "{path}: {}", reply.body);
    }
    assert_eq!(
        send(&app, get("/enqueue")).await.status,
        StatusCode::FORBIDDEN
    );
    assert!(storage.get_job(live).await.expect("read").is_some(), "live");
    assert!(storage.get_job(dead).await.expect("read").is_none(), "dead");
    let now = storage.now().await.expect("now");
    for id in &scheduled {
        let job = storage.get_job(*id).await.expect("read").expect("live");
        assert_eq!(job.state(now), queue_core::JobState::Scheduled, "{id}");
    }
    let stats = storage.stats().await.expect("stats");
    assert!(stats.iter().all(|s| !s.paused));
    assert_eq!(
        stats.iter().map(|s| s.live()).sum::<u64>(),
        4,
        "nothing enqueued"
    );
    assert!(storage.queue_configs().await.expect("configs").is_empty());
    assert!(storage.group_limits().await.expect("groups").is_empty());
}

const TOKEN: &str = "s3cret-token-0123456789";

fn with_token() -> DashboardOptions {
    DashboardOptions {
        token: Some(TOKEN.to_owned()),
        ..DashboardOptions::default()
    }
}

#[tokio::test]
async fn with_a_token_every_page_needs_it_but_healthz() {
    let (storage, live, dead) = storage().await;
    let app = app(Arc::clone(&storage), with_token());
    assert_eq!(send(&app, get("/")).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        send(&app, get("/metrics")).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(send(&app, get("/healthz")).await.status, StatusCode::OK);
    let with_bearer = Request::get("/")
        .header(header::HOST, HOST)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .body(Body::empty())
        .expect("request");
    assert_eq!(send(&app, with_bearer).await.status, StatusCode::OK);
    let wrong = Request::get("/")
        .header(header::HOST, HOST)
        .header(header::AUTHORIZATION, "Bearer s3cret-token-0123456788")
        .body(Body::empty())
        .expect("request");
    assert_eq!(send(&app, wrong).await.status, StatusCode::UNAUTHORIZED);

    // A mutation with a wrong token, even with a valid CSRF field, is
    // refused and changes nothing.
    let page = Request::get(format!("/jobs/{live}"))
        .header(header::HOST, HOST)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .body(Body::empty())
        .expect("request");
    let csrf = format!("csrf={}", csrf(&send(&app, page).await.body));
    for (path, form) in [
        (format!("/jobs/{live}/discard"), csrf.clone()),
        (format!("/jobs/{dead}/retry"), csrf.clone()),
        ("/queues/pause?queue=emails".to_owned(), csrf.clone()),
        (
            "/enqueue".to_owned(),
            format!("{csrf}&queue=emails&payload=%7B%7D"),
        ),
    ] {
        let mut request = post(&path, &form);
        request.headers_mut().insert(
            header::AUTHORIZATION,
            "Bearer s3cret-token-0123456788".parse().expect("a value"),
        );
        assert_eq!(
            send(&app, request).await.status,
            StatusCode::UNAUTHORIZED,
            "{path}"
        );
    }
    assert!(storage.get_job(live).await.expect("read").is_some(), "live");
    assert!(storage.get_job(dead).await.expect("read").is_none(), "dead");
    let stats = storage.stats().await.expect("stats");
    assert!(stats.iter().all(|s| !s.paused));
    assert_eq!(
        stats.iter().map(|s| s.live()).sum::<u64>(),
        1,
        "nothing enqueued"
    );
}

/// A login form post with `X-Forwarded-Proto` when given.
fn login(form: &str, proto: Option<&str>) -> Request<Body> {
    let mut request = post("/login", form);
    if let Some(proto) = proto {
        request
            .headers_mut()
            .insert("x-forwarded-proto", proto.parse().expect("a value"));
    }
    request
}

#[tokio::test]
async fn the_login_posts_the_token_and_sets_a_strict_http_only_cookie() {
    let (storage, _, _) = storage().await;
    let app = app(Arc::clone(&storage), with_token());
    // The form posts; the token in a query string opens nothing.
    let form = send(&app, get("/history?status=dead_letter")).await;
    assert_eq!(form.status, StatusCode::UNAUTHORIZED);
    assert!(
        form.body
            .contains(r#"<form method="post" action="/login">"#),
        "{}",
        form.body
    );
    assert!(
        form.body
            .contains(r#"name="next" value="/history?status=dead_letter""#),
        "{}",
        form.body
    );
    let by_query = send(&app, get(&format!("/history?token={TOKEN}"))).await;
    assert_eq!(
        by_query.status,
        StatusCode::UNAUTHORIZED,
        "{}",
        by_query.body
    );
    assert_eq!(by_query.cookie, None);

    let wrong = send(&app, login("token=wrong&next=%2Fhistory", None)).await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert_eq!(wrong.cookie, None);

    let done = send(&app, login(&format!("token={TOKEN}&next=%2Fhistory"), None)).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER);
    assert_eq!(done.location.as_deref(), Some("/history"));
    let cookie = done.cookie.expect("a cookie");
    let flags: Vec<&str> = cookie.split(';').map(str::trim).collect();
    assert!(flags.contains(&"HttpOnly"), "{cookie}");
    assert!(flags.contains(&"SameSite=Strict"), "{cookie}");
    assert!(!flags.contains(&"Secure"), "plain HTTP: {cookie}");
    let with_cookie = Request::get("/history")
        .header(header::HOST, HOST)
        .header(header::COOKIE, flags[0])
        .body(Body::empty())
        .expect("request");
    assert_eq!(send(&app, with_cookie).await.status, StatusCode::OK);

    // Never on to another site.
    let away = send(
        &app,
        login(&format!("token={TOKEN}&next=%2F%2Fevil.example%2F"), None),
    )
    .await;
    assert_eq!(away.location.as_deref(), Some("/"));

    // Over HTTPS, as a proxy says or as configured: `Secure`.
    let proxied = send(&app, login(&format!("token={TOKEN}"), Some("https"))).await;
    let cookie = proxied.cookie.expect("a cookie");
    assert!(cookie.split(';').any(|f| f.trim() == "Secure"), "{cookie}");
    let secure = app_with_secure_cookie(storage);
    let configured = send(&secure, login(&format!("token={TOKEN}"), Some("http"))).await;
    let cookie = configured.cookie.expect("a cookie");
    assert!(cookie.split(';').any(|f| f.trim() == "Secure"), "{cookie}");
}

fn app_with_secure_cookie(storage: Arc<MemoryStorage>) -> axum::Router {
    app(
        storage,
        DashboardOptions {
            secure_cookie: true,
            ..with_token()
        },
    )
}

#[tokio::test]
async fn router_refuses_a_blank_token_and_a_malformed_allowed_host() {
    let storage = Arc::new(MemoryStorage::new());
    for (token, expected) in [
        ("", OptionsError::BlankToken),
        ("   \t ", OptionsError::BlankToken),
        ("s3cret;token-0123456789", OptionsError::TokenCharacter(';')),
        ("s3cret token-0123456789", OptionsError::TokenCharacter(' ')),
    ] {
        let options = DashboardOptions {
            token: Some(token.to_owned()),
            ..DashboardOptions::default()
        };
        let refused = router(Arc::clone(&storage), options).err();
        assert_eq!(refused, Some(expected), "{token:?}");
    }
    let options = DashboardOptions {
        allowed_hosts: vec!["dash example".to_owned()],
        ..DashboardOptions::default()
    };
    assert_eq!(
        router(Arc::clone(&storage), options).err(),
        Some(OptionsError::AllowedHost("dash example".to_owned()))
    );
    assert!(router(storage, with_token()).is_ok());
}

fn from_host(host: Option<&str>, path: &str) -> Request<Body> {
    let mut request = Request::get(path);
    if let Some(host) = host {
        request = request.header(header::HOST, host);
    }
    request.body(Body::empty()).expect("request")
}

#[tokio::test]
async fn without_a_token_only_loopback_and_allowed_hosts_are_served() {
    let (storage, live, _) = storage().await;
    let app = app(Arc::clone(&storage), DashboardOptions::default());
    for host in [
        "localhost",
        "localhost:8080",
        "127.0.0.1:1",
        "[::1]:8080",
        "[::1]",
    ] {
        let reply = send(&app, from_host(Some(host), "/")).await;
        assert_eq!(reply.status, StatusCode::OK, "{host}");
    }
    // A rebound name, a look-alike, no Host at all.
    for host in [
        Some("evil.example:8080"),
        Some("localhost.evil.example"),
        Some("127.0.0.1.evil.example"),
        None,
    ] {
        let reply = send(&app, from_host(host, "/")).await;
        assert_eq!(reply.status, StatusCode::MISDIRECTED_REQUEST, "{host:?}");
        assert_eq!(reply.body.lines().count(), 1, "{}", reply.body);
    }
    // A mutation with the right CSRF token from a rebound name: refused.
    let token = csrf(&send(&app, get("/")).await.body);
    let mut rebound = post(&format!("/jobs/{live}/discard"), &format!("csrf={token}"));
    rebound
        .headers_mut()
        .insert(header::HOST, "evil.example".parse().expect("a value"));
    assert_eq!(
        send(&app, rebound).await.status,
        StatusCode::MISDIRECTED_REQUEST
    );
    assert!(storage.get_job(live).await.expect("read").is_some());

    // A reverse proxy's name, on any port or on one.
    let options = DashboardOptions {
        allowed_hosts: vec![
            "Dash.Example.com".to_owned(),
            "ops.example.com:8443".to_owned(),
        ],
        ..DashboardOptions::default()
    };
    let proxied = app_with(Arc::clone(&storage), options);
    for (host, status) in [
        ("dash.example.com", StatusCode::OK),
        ("dash.example.com:443", StatusCode::OK),
        ("ops.example.com:8443", StatusCode::OK),
        ("ops.example.com", StatusCode::MISDIRECTED_REQUEST),
        ("evil.example", StatusCode::MISDIRECTED_REQUEST),
    ] {
        let reply = send(&proxied, from_host(Some(host), "/")).await;
        assert_eq!(reply.status, status, "{host}");
    }
    // With a token the token decides, whatever the name.
    let guarded = app_with(storage, with_token());
    let mut request = from_host(Some("dash.example.com"), "/");
    request.headers_mut().insert(
        header::AUTHORIZATION,
        format!("Bearer {TOKEN}").parse().expect("a value"),
    );
    assert_eq!(send(&guarded, request).await.status, StatusCode::OK);
}

fn app_with(storage: Arc<MemoryStorage>, options: DashboardOptions) -> axum::Router {
    app(storage, options)
}

#[tokio::test]
async fn every_response_carries_the_security_headers_and_pages_need_no_inline_code() {
    let (storage, live, _) = storage().await;
    let open = app(Arc::clone(&storage), DashboardOptions::default());
    let guarded = app(storage, with_token());
    let replies = [
        send(&open, get("/")).await,
        send(&open, get(&format!("/jobs/{live}"))).await,
        send(&open, get("/enqueue")).await,
        send(&open, get("/healthz")).await,
        send(&open, get("/metrics")).await,
        send(&open, get("/style.css")).await,
        send(&open, get("/no-such-page")).await,
        send(&open, post("/queues/pause?queue=emails", "")).await,
        send(&open, from_host(Some("evil.example"), "/")).await,
        send(&guarded, get("/")).await,
    ];
    for reply in &replies {
        let header = |name: &str| {
            reply
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let policy = header("content-security-policy");
        assert!(
            policy.contains("default-src 'self'"),
            "{}: {policy}",
            reply.status
        );
        assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
        assert!(!policy.contains("unsafe-inline"), "{policy}");
        assert_eq!(header("x-frame-options"), "DENY", "{}", reply.status);
        assert_eq!(header("x-content-type-options"), "nosniff");
        assert_eq!(header("referrer-policy"), "no-referrer");
    }
    // Under that policy an inline style or script would not apply: the
    // pages link the style sheet and the live script, and carry neither.
    for reply in [&replies[0], &replies[1], &replies[2], &replies[9]] {
        assert!(
            reply
                .body
                .contains(r#"<link rel="stylesheet" href="/style.css">"#),
            "{}",
            reply.body
        );
        assert!(!reply.body.contains("<style"), "{}", reply.body);
        // The one script is a file of the dashboard's own.
        let without = reply.body.replace(LIVE_SCRIPT, "");
        assert!(!without.contains("<script"), "{}", reply.body);
        assert!(!reply.body.contains("style=\""), "{}", reply.body);
    }
    let css = &replies[5];
    assert_eq!(css.status, StatusCode::OK);
    assert!(css.body.contains("svg.chart rect.dead"), "{}", css.body);
    assert_eq!(
        css.headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
        Some("text/css; charset=utf-8")
    );
}

/// A queue named `.` or `..`: a browser removes such a path segment (even
/// percent-encoded as `%2E`) before it sends the request, so the pause
/// button names the queue in the query string. Each action the overview
/// emits, resolved as a browser resolves it, still names the queue and
/// pauses it.
#[tokio::test]
async fn queues_named_dot_and_dot_dot_are_paused_by_the_overviews_buttons() {
    for name in [".", ".."] {
        let storage = Arc::new(MemoryStorage::new());
        storage
            .enqueue(NewJob::new(name, json!({})))
            .await
            .expect("enqueue");
        let app = app(Arc::clone(&storage), DashboardOptions::default());
        let page = send(&app, get("/")).await;
        let action = page
            .body
            .split(r#"action=""#)
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .find(|action| action.contains("pause"))
            .unwrap_or_else(|| panic!("a pause button for {name:?}: {}", page.body))
            .replace("&amp;", "&");
        let base = url::Url::parse("http://127.0.0.1:8080/").expect("base");
        let resolved = base.join(&action).expect("the action resolves");
        let sent = match resolved.query() {
            Some(query) => format!("{}?{query}", resolved.path()),
            None => resolved.path().to_owned(),
        };
        let token = csrf(&page.body);
        let paused = send(&app, post(&sent, &format!("csrf={token}"))).await;
        assert_eq!(
            paused.status,
            StatusCode::SEE_OTHER,
            "{name:?}: {action} was sent as {sent}: {}",
            paused.body
        );
        let stats = storage.stats().await.expect("stats");
        assert!(
            stats.iter().any(|s| s.queue.as_str() == name && s.paused),
            "{name:?} is paused"
        );
    }
}

#[tokio::test]
async fn a_queue_named_with_reserved_characters_is_paused_resumed_and_filtered() {
    let storage = Arc::new(MemoryStorage::new());
    let name = "a/b#c?d&e=f";
    let encoded = "a%2Fb%23c%3Fd%26e%3Df";
    let id = storage
        .enqueue(NewJob::new(name, json!({})))
        .await
        .expect("enqueue")
        .id;
    let app = app(Arc::clone(&storage), DashboardOptions::default());
    let page = send(&app, get("/")).await;
    let pause = format!("/queues/pause?queue={encoded}");
    assert!(
        page.body.contains(&format!(r#"action="{pause}""#)),
        "{}",
        page.body
    );
    let jobs = format!("/jobs?queue={encoded}");
    assert!(
        page.body.contains(&format!(r#"href="{jobs}""#)),
        "{}",
        page.body
    );
    assert!(
        page.body.contains(&format!(
            r#"href="/history?status=dead_letter&amp;queue={encoded}""#
        )),
        "{}",
        page.body
    );
    let token = csrf(&page.body);
    let paused = send(&app, post(&pause, &format!("csrf={token}"))).await;
    assert_eq!(paused.status, StatusCode::SEE_OTHER, "{}", paused.body);
    let stats = storage.stats().await.expect("stats");
    assert!(stats.iter().any(|s| s.queue.as_str() == name && s.paused));
    let page = send(&app, get("/")).await;
    let resume = format!("/queues/resume?queue={encoded}");
    assert!(
        page.body.contains(&format!(r#"action="{resume}""#)),
        "{}",
        page.body
    );
    let resumed = send(&app, post(&resume, &format!("csrf={token}"))).await;
    assert_eq!(resumed.status, StatusCode::SEE_OTHER, "{}", resumed.body);
    let stats = storage.stats().await.expect("stats");
    assert!(stats.iter().all(|s| !s.paused));
    let filtered = send(&app, get(&jobs)).await;
    assert_eq!(filtered.status, StatusCode::OK);
    assert!(
        filtered.body.contains(&format!(r#"href="/jobs/{id}""#)),
        "{}",
        filtered.body
    );

    // A dead letter in a queue with a non-ASCII name: the retry's redirect
    // and the history's next-page link carry it encoded.
    let queue = "é/x";
    let mut dead = Vec::new();
    for _ in 0..51 {
        dead.push(dead_letter(&storage, queue).await);
    }
    let page = send(&app, get("/history?status=dead_letter&queue=%C3%A9%2Fx")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.body
            .contains("&amp;queue=%C3%A9%2Fx&amp;status=dead_letter"),
        "{}",
        page.body
    );
    let done = send(
        &app,
        post(
            "/dead-letters/retry",
            &format!("csrf={token}&queue=%C3%A9%2Fx"),
        ),
    )
    .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert_eq!(
        done.location.as_deref(),
        Some("/history?status=dead_letter&queue=%C3%A9%2Fx")
    );
    assert!(storage.get_job(dead[0]).await.expect("read").is_some());
}

/// Enqueues and dead-letters one job of `queue`.
async fn dead_letter(storage: &MemoryStorage, queue: &str) -> JobId {
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
    storage
        .nack(&job.lease().expect("leased"), json!("boom"), Retry::Never)
        .await
        .expect("nack");
    id
}

#[tokio::test]
async fn the_enqueue_form_adds_a_job_and_rejects_bad_input() {
    let (storage, _, _) = storage().await;
    let app = app(Arc::clone(&storage), DashboardOptions::default());
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
    let stats = storage.stats().await.expect("stats");
    let sms = stats.iter().find(|s| s.queue.as_str() == "sms");
    assert_eq!(
        sms.map(|s| s.live()),
        Some(1),
        "only the good form wrote a job"
    );
    assert_eq!(
        stats.iter().map(|s| s.live()).sum::<u64>(),
        2,
        "the fixture's live job and the good form's: {stats:?}"
    );
    assert_eq!(
        send(&app, get("/history?status=bogus")).await.status,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn metrics_expose_a_gauge_per_queue_and_state() {
    let (storage, _, _) = storage().await;
    let app = app(storage, DashboardOptions::default());
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
    let app = app(storage, DashboardOptions::default());
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
    let app = app(Arc::clone(&storage), DashboardOptions::default());
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
    let app = app(Arc::clone(&storage), DashboardOptions::default());
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
    let app = app(Arc::clone(&storage), DashboardOptions::default());
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
    let app = app(storage, DashboardOptions::default());
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
    let app = app(Arc::clone(&storage), DashboardOptions::default());
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
    let app = app(Arc::clone(&storage), DashboardOptions::default());
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

/// The overview sets a queue's group concurrency with its other limits,
/// lists every group's own limit, sets one and lifts it; bad input (a
/// limit of 0 or not a number, an empty group, a queue without limits)
/// is refused and writes nothing; a group key renders as text.
#[tokio::test]
async fn group_limits_are_set_listed_and_lifted_from_the_overview() {
    let (storage, _, _) = storage().await;
    let app = app(Arc::clone(&storage), DashboardOptions::default());
    let page = send(&app, get("/")).await;
    assert!(
        page.body.contains("No group has its own limit."),
        "{}",
        page.body
    );
    let token = csrf(&page.body);
    let post_limits = |form: String| post("/queues/limits", &format!("csrf={token}&{form}"));
    let reply = send(
        &app,
        post_limits("queue=emails&concurrency=&rate=&burst=&group_concurrency=2".into()),
    )
    .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    let configs = storage.queue_configs().await.expect("configs");
    assert_eq!(configs[0].limits.group_concurrency, Some(2));
    let set = |form: &str| post("/queues/group-limit", &format!("csrf={token}&{form}"));
    for bad in [
        "queue=emails&group=big&limit=0",
        "queue=emails&group=big&limit=many",
        "queue=emails&group=&limit=3",
    ] {
        let reply = send(&app, set(bad)).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{bad}: {}",
            reply.body
        );
    }
    let unconfigured = send(&app, set("queue=other&group=big&limit=3")).await;
    assert_eq!(
        unconfigured.status,
        StatusCode::NOT_FOUND,
        "{}",
        unconfigured.body
    );
    assert!(storage.group_limits().await.expect("groups").is_empty());
    let reply = send(&app, set("queue=emails&group=%3Cb%3Ebig&limit=3")).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    let limits = storage.group_limits().await.expect("groups");
    assert_eq!(
        limits
            .iter()
            .map(|l| (l.queue.as_str(), l.group.as_str(), l.limit))
            .collect::<Vec<_>>(),
        vec![("emails", "<b>big", 3)]
    );
    let page = send(&app, get("/")).await;
    assert!(page.body.contains("group concurrency 2"), "{}", page.body);
    assert!(page.body.contains("&lt;b&gt;big"), "{}", page.body);
    assert!(!page.body.contains("<b>big"), "escaped: {}", page.body);
    // The row's Lift button posts no limit.
    let reply = send(&app, set("queue=emails&group=%3Cb%3Ebig")).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    assert!(storage.group_limits().await.expect("groups").is_empty());
    // Limits set without the field keep the group concurrency.
    let reply = send(&app, post_limits("queue=emails&concurrency=4".into())).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    let configs = storage.queue_configs().await.expect("configs");
    assert_eq!(
        (
            configs[0].limits.concurrency,
            configs[0].limits.group_concurrency
        ),
        (Some(4), Some(2))
    );
}

/// The overview's limits form sets a queue's priority aging period in
/// seconds with its other limits and shows it; a period under a second or
/// not a number is refused and changes nothing; limits set without the
/// field keep the period, and an empty field lifts it.
#[tokio::test]
async fn priority_aging_is_set_from_the_overview() {
    let (storage, _, _) = storage().await;
    let app = app(Arc::clone(&storage), DashboardOptions::default());
    let page = send(&app, get("/")).await;
    assert!(
        page.body.contains("name=\"priority_aging\""),
        "{}",
        page.body
    );
    let token = csrf(&page.body);
    let post_limits = |form: &str| post("/queues/limits", &format!("csrf={token}&{form}"));
    let reply = send(&app, post_limits("queue=emails&priority_aging=90")).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    let aging = |configs: Vec<queue_core::QueueConfig>| configs[0].limits.priority_aging;
    let configs = storage.queue_configs().await.expect("configs");
    assert_eq!(aging(configs), Some(Duration::from_secs(90)));
    for bad in [
        "queue=emails&priority_aging=0",
        "queue=emails&priority_aging=soon",
    ] {
        let reply = send(&app, post_limits(bad)).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{bad}: {}",
            reply.body
        );
    }
    let configs = storage.queue_configs().await.expect("configs");
    assert_eq!(aging(configs), Some(Duration::from_secs(90)), "unchanged");
    let page = send(&app, get("/")).await;
    assert!(page.body.contains("priority aging 90s"), "{}", page.body);
    let reply = send(&app, post_limits("queue=emails&concurrency=3")).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    let configs = storage.queue_configs().await.expect("configs");
    assert_eq!(
        (configs[0].limits.concurrency, aging(configs)),
        (Some(3), Some(Duration::from_secs(90)))
    );
    let reply = send(
        &app,
        post_limits("queue=emails&concurrency=3&priority_aging="),
    )
    .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    let configs = storage.queue_configs().await.expect("configs");
    assert_eq!(aging(configs), None, "an empty field lifts it");
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
    let app = app(Arc::clone(&storage), DashboardOptions::default());
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

/// On a storage that declares only the core, every page renders without
/// the buttons, links and series it lacks, and an action it cannot do
/// answers 501 naming the capability, changing nothing.
#[tokio::test]
async fn a_core_only_storage_gets_pages_without_what_it_cannot_do() {
    let (storage, live, dead) = storage().await;
    let core = Arc::new(Restricted::shared(Arc::clone(&storage), Capabilities::CORE));
    let app = app(core, DashboardOptions::default());
    for path in [
        "/".to_owned(),
        format!("/jobs/{live}"),
        format!("/jobs/{dead}"),
        "/history?status=dead_letter".to_owned(),
    ] {
        let page = send(&app, get(&path)).await;
        assert_eq!(page.status, StatusCode::OK, "{path}: {}", page.body);
        for absent in [
            "/queues/pause",
            "/retry",
            "/cancel",
            "/discard",
            "/queues/limits",
            "/dead-letters/retry",
            r#"href="/jobs""#,
        ] {
            assert!(
                !page.body.contains(absent),
                "{path} shows {absent}: {}",
                page.body
            );
        }
    }
    let overview = send(&app, get("/")).await.body;
    assert!(
        overview.contains(">n/a<"),
        "no throughput counts: {overview}"
    );
    let listing = send(&app, get("/jobs")).await;
    assert_eq!(listing.status, StatusCode::NOT_IMPLEMENTED);
    assert!(
        listing
            .body
            .contains("this storage does not support listing live jobs"),
        "{}",
        listing.body
    );
    let metrics = send(&app, get("/metrics")).await;
    assert_eq!(metrics.status, StatusCode::OK, "{}", metrics.body);

    // The token comes from a page of the full dashboard: the same process.
    let full = self::app(Arc::clone(&storage), DashboardOptions::default());
    let token = csrf(&send(&full, get(&format!("/jobs/{live}"))).await.body);
    let refused = send(
        &app,
        post(&format!("/jobs/{live}/discard"), &format!("csrf={token}")),
    )
    .await;
    assert_eq!(refused.status, StatusCode::NOT_IMPLEMENTED);
    assert!(
        refused.body.contains("capability discard"),
        "{}",
        refused.body
    );
    assert!(
        storage.get_job(live).await.expect("read").is_some(),
        "nothing discarded"
    );
}

/// A worker registered as `id` on `host`, consuming queue `emails`.
fn worker_info(id: &str, host: &str) -> queue_core::WorkerInfo {
    queue_core::WorkerInfo {
        id: WorkerId::new(id).expect("worker id"),
        host: host.into(),
        pid: 4242,
        version: "0.1.0".into(),
        queues: vec![queue_core::WorkerQueue {
            queue: QueueName::new("emails").expect("name"),
            concurrency: 4,
        }],
        started_at: chrono::DateTime::UNIX_EPOCH,
    }
}

/// The workers page lists each registered worker, escaped, live then
/// silent as its heartbeats stop, and forgets it later; the nav links it,
/// and a running job's page links the worker holding it, whose own link
/// shows it alone.
#[tokio::test]
async fn the_workers_page_lists_the_registry_and_a_job_links_its_worker() {
    let clock = ManualClock::new(chrono::Utc::now());
    let storage = Arc::new(MemoryStorage::with_clock(clock.clone()));
    let app = app(Arc::clone(&storage), DashboardOptions::default());
    let empty = send(&app, get("/workers")).await;
    assert_eq!(empty.status, StatusCode::OK);
    assert!(
        empty.body.contains("No worker is registered."),
        "{}",
        empty.body
    );
    assert!(
        empty.body.contains(r#"href="/workers""#),
        "the nav links it"
    );

    let holder = worker_info("w<1>&x", "<script>alert(1)</script>");
    storage.register_worker(&holder).await.expect("register");
    storage
        .register_worker(&worker_info("other", "h2"))
        .await
        .expect("register");
    let id = storage
        .enqueue(NewJob::new("emails", json!(1)))
        .await
        .expect("enqueue")
        .id;
    let request = DequeueRequest::new(
        vec![QueueName::new("emails").expect("name")],
        1,
        Duration::from_secs(300),
        holder.id.clone(),
    )
    .expect("request");
    storage.dequeue(&request).await.expect("claim");

    let listed = send(&app, get("/workers")).await.body;
    assert!(
        listed.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{listed}"
    );
    assert!(!listed.contains("<script>"), "{listed}");
    assert!(listed.contains("emails (4)"), "{listed}");
    assert_eq!(listed.matches(">live<").count(), 2, "{listed}");

    let job = send(&app, get(&format!("/jobs/{id}"))).await.body;
    let link = r#"href="/workers?id=w%3C1%3E%26x""#;
    assert!(job.contains(link), "{job}");
    let one = send(&app, get("/workers?id=w%3C1%3E%26x")).await.body;
    assert!(one.contains("w&lt;1&gt;&amp;x"), "{one}");
    assert!(!one.contains(">other<"), "only the worker asked for: {one}");

    clock.advance(Duration::from_secs(61));
    storage
        .register_worker(&worker_info("other", "h2"))
        .await
        .expect("heartbeat");
    let later = send(&app, get("/workers")).await.body;
    assert_eq!(later.matches(">silent<").count(), 1, "{later}");
    assert_eq!(later.matches(">live<").count(), 1, "{later}");

    clock.advance(Duration::from_secs(600));
    let gone = send(&app, get("/workers?id=w%3C1%3E%26x")).await.body;
    assert!(gone.contains("is not registered"), "{gone}");
}

/// A read-only dashboard lists a worker silent past the forget age and
/// deletes nothing; a storage without the registry gets no nav link, no
/// link on a job's page, and a 501 for the page.
#[tokio::test]
async fn the_workers_page_is_read_only_safe_and_absent_without_the_capability() {
    let clock = ManualClock::new(chrono::Utc::now());
    let storage = Arc::new(MemoryStorage::with_clock(clock.clone()));
    storage
        .register_worker(&worker_info("quiet", "h"))
        .await
        .expect("register");
    clock.advance(Duration::from_secs(3600));
    let read_only = app(
        Arc::clone(&storage),
        DashboardOptions {
            read_only: true,
            ..DashboardOptions::default()
        },
    );
    let page = send(&read_only, get("/workers")).await.body;
    assert!(
        page.contains(">quiet<") && page.contains(">silent<"),
        "{page}"
    );
    let kept = storage
        .list_workers(Duration::from_secs(60), Duration::from_secs(86_400))
        .await
        .expect("list");
    assert_eq!(kept.len(), 1, "reading the page deleted a worker");

    let core = Arc::new(Restricted::shared(Arc::clone(&storage), Capabilities::CORE));
    let app = app(core, DashboardOptions::default());
    let refused = send(&app, get("/workers")).await;
    assert_eq!(refused.status, StatusCode::NOT_IMPLEMENTED);
    assert!(
        refused.body.contains("capability workers"),
        "{}",
        refused.body
    );
    let id = storage
        .enqueue(NewJob::new("emails", json!(1)))
        .await
        .expect("enqueue")
        .id;
    let request = DequeueRequest::new(
        vec![QueueName::new("emails").expect("name")],
        1,
        Duration::from_secs(300),
        WorkerId::new("quiet").expect("id"),
    )
    .expect("request");
    storage.dequeue(&request).await.expect("claim");
    let job = send(&app, get(&format!("/jobs/{id}"))).await.body;
    assert!(job.contains(">quiet<"), "locked by is shown: {job}");
    assert!(
        !job.contains("/workers"),
        "no link to the workers page: {job}"
    );
}

/// The jobs and history pages search the payload: only matching rows,
/// what was read said, the search kept in the "Older" link, no bulk
/// action beside it; a match that does not parse is a 400 naming it.
#[tokio::test]
async fn the_jobs_and_history_pages_search_the_payload() {
    let storage = Arc::new(MemoryStorage::new());
    let mut sevens = Vec::new();
    for i in 0..120 {
        let customer = if i % 2 == 0 { 7 } else { 8 };
        let id = storage
            .enqueue(NewJob::new(
                "orders",
                json!({ "customer_id": customer, "i": i }),
            ))
            .await
            .expect("enqueue")
            .id;
        if customer == 7 {
            sevens.push(id);
        }
    }
    let app = app(storage.clone(), DashboardOptions::default());
    let search = "payload=payload.customer_id+%3D+7";
    let page = send(&app, get(&format!("/jobs?{search}"))).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.body.contains("Searched 100 rows, 50 found."),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains(&format!(r#"href="/jobs/{}""#, sevens[59]))
    );
    assert!(
        !page
            .body
            .contains(&format!(r#"href="/jobs/{}""#, sevens[59].0 + 1)),
        "a job of customer 8 is listed"
    );
    assert!(
        page.body.contains(&format!(
            "payload=payload.customer_id%20%3D%207&amp;before={}",
            sevens[10]
        )),
        "the next page goes on with the search: {}",
        page.body
    );
    assert!(
        !page.body.contains("/jobs/bulk"),
        "no bulk action beside a search"
    );
    let plain = send(&app, get("/jobs")).await;
    assert!(plain.body.contains("/jobs/bulk"));

    let bad = send(&app, get("/jobs?payload=customer_id%3D7")).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.body.contains("payload_match"), "{}", bad.body);

    let (storage, _, dead) = self::storage().await;
    let app = self::app(storage, DashboardOptions::default());
    let found = send(&app, get("/history?payload=payload.n+%3D+1")).await;
    assert_eq!(found.status, StatusCode::OK);
    assert!(found.body.contains(&format!(r#"href="/jobs/{dead}""#)));
    assert!(
        found.body.contains("Searched 1 row, 1 found."),
        "{}",
        found.body
    );
    let none = send(&app, get("/history?payload=payload.n+%3D+2")).await;
    assert!(!none.body.contains(&format!(r#"href="/jobs/{dead}""#)));
}

/// The charts page draws the finished jobs, the start lags and the depths
/// of every queue or one, over the hour or the day; a queue's name is
/// escaped; a window it does not know is a 400; a storage with neither
/// throughput nor samples gets a 501 and no link to the page.
#[tokio::test]
async fn the_charts_page_draws_throughput_lags_and_depths() {
    let (storage, _, _) = storage().await;
    let now = storage.now().await.expect("now");
    let minute = queue_core::minute_of(now);
    let mut sample =
        queue_core::QueueSample::new(QueueName::new("<b>q</b>").expect("name"), minute);
    sample.lag.record(Duration::from_millis(40));
    sample.lag.record(Duration::from_millis(3000));
    sample.depth = Some(queue_core::Depth {
        pending: 12,
        scheduled: 3,
        running: 4,
    });
    storage.record_samples(&[sample]).await.expect("record");
    let app = app(Arc::clone(&storage), DashboardOptions::default());

    let overview = send(&app, get("/")).await.body;
    assert!(overview.contains(r#"href="/charts""#), "{overview}");
    let every = send(&app, get("/charts")).await;
    assert_eq!(every.status, StatusCode::OK, "{}", every.body);
    for expected in [
        "Jobs finished per minute",
        "Start lag per minute",
        "highest 3.4 s",
        "highest 12",
        "dead-lettered",
        "&lt;b&gt;q&lt;/b&gt;",
        "<polyline",
        "<rect class=\"s1\"",
    ] {
        assert!(every.body.contains(expected), "{expected}: {}", every.body);
    }
    assert!(!every.body.contains("<b>q</b>"), "escaped");
    let day = send(&app, get("/charts?window=day&queue=reports")).await;
    assert_eq!(day.status, StatusCode::OK, "{}", day.body);
    assert!(
        day.body.contains("Jobs finished per 15 minutes"),
        "{}",
        day.body
    );
    assert!(
        day.body.contains("highest 1<"),
        "the dead letter: {}",
        day.body
    );
    assert!(
        !day.body.contains("highest 12"),
        "another queue's depth: {}",
        day.body
    );
    let bad = send(&app, get("/charts?window=week")).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    assert!(bad.body.contains("hour or day"), "{}", bad.body);

    let core = Arc::new(Restricted::shared(Arc::clone(&storage), Capabilities::CORE));
    let core = self::app(core, DashboardOptions::default());
    assert!(!send(&core, get("/")).await.body.contains("/charts"));
    let refused = send(&core, get("/charts")).await;
    assert_eq!(
        refused.status,
        StatusCode::NOT_IMPLEMENTED,
        "{}",
        refused.body
    );
}

/// The overview lists every group's own weight, sets one and lifts it;
/// bad input (a weight of 0, above 1000 or not a number, an empty group,
/// a queue without limits) is refused and writes nothing.
#[tokio::test]
async fn group_weights_are_set_listed_and_lifted_from_the_overview() {
    let (storage, _, _) = storage().await;
    let app = app(Arc::clone(&storage), DashboardOptions::default());
    let page = send(&app, get("/")).await;
    assert!(
        page.body.contains("No group has its own weight."),
        "{}",
        page.body
    );
    let token = csrf(&page.body);
    let reply = send(
        &app,
        post(
            "/queues/limits",
            &format!("csrf={token}&queue=emails&concurrency=3"),
        ),
    )
    .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    let set = |form: &str| post("/queues/group-weight", &format!("csrf={token}&{form}"));
    for bad in [
        "queue=emails&group=big&weight=0",
        "queue=emails&group=big&weight=1001",
        "queue=emails&group=big&weight=-2",
        "queue=emails&group=&weight=3",
    ] {
        let reply = send(&app, set(bad)).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{bad}: {}",
            reply.body
        );
    }
    let unconfigured = send(&app, set("queue=other&group=big&weight=3")).await;
    assert_eq!(
        unconfigured.status,
        StatusCode::NOT_FOUND,
        "{}",
        unconfigured.body
    );
    assert!(storage.group_weights().await.expect("weights").is_empty());
    let reply = send(&app, set("queue=emails&group=big&weight=4")).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    let weights = storage.group_weights().await.expect("weights");
    assert_eq!(
        weights
            .iter()
            .map(|w| (w.queue.as_str(), w.group.as_str(), w.weight))
            .collect::<Vec<_>>(),
        vec![("emails", "big", 4)]
    );
    let page = send(&app, get("/")).await;
    assert!(page.body.contains("Group weights"), "{}", page.body);
    assert!(
        page.body.contains("<td>big</td><td>4</td>"),
        "{}",
        page.body
    );
    // The row's Lift button posts no weight.
    let reply = send(&app, set("queue=emails&group=big")).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    assert!(storage.group_weights().await.expect("weights").is_empty());
}

/// A job's page draws its workflow: a chain a -> b -> c seen from b (every
/// job a box linked to its page, each dependency a line), a completed job
/// in history still showing its dependant, and nothing for a job without
/// links.
#[tokio::test]
async fn a_job_page_draws_its_workflow() {
    let storage = Arc::new(MemoryStorage::new());
    let a = storage
        .enqueue(NewJob::new("etl", json!({ "step": "extract" })))
        .await
        .expect("enqueue")
        .id;
    let b = storage
        .enqueue(NewJob::new("etl", json!({ "step": "transform" })).depends_on(a))
        .await
        .expect("enqueue")
        .id;
    let c = storage
        .enqueue(NewJob::new("etl", json!({ "step": "load" })).depends_on(b))
        .await
        .expect("enqueue")
        .id;
    let lonely = storage
        .enqueue(NewJob::new("etl", json!({})))
        .await
        .expect("enqueue")
        .id;
    let app = app(Arc::clone(&storage), DashboardOptions::default());

    let page = send(&app, get(&format!("/jobs/{b}"))).await;
    assert_eq!(page.status, StatusCode::OK);
    let body = page.body;
    assert!(body.contains("<h2>Workflow</h2>"), "{body}");
    let svg = &body[body.find("<svg class=\"workflow\"").expect("the graph")..];
    let svg = &svg[..svg.find("</svg>").expect("the graph's end")];
    assert_eq!(svg.matches("<rect").count(), 3, "{svg}");
    assert_eq!(svg.matches("<line").count(), 2, "{svg}");
    for id in [a, b, c] {
        assert!(svg.contains(&format!("href=\"/jobs/{id}\"")), "{svg}");
    }
    assert!(svg.contains("class=\"node waiting current\""), "{svg}");
    assert!(svg.contains("class=\"node pending\""), "{svg}");

    // a completes: its history page still shows the chain.
    let request = DequeueRequest::new(
        vec![QueueName::new("etl").expect("name")],
        1,
        Duration::from_secs(30),
        WorkerId::new("w").expect("worker"),
    )
    .expect("request");
    let job = storage.dequeue(&request).await.expect("dequeue").remove(0);
    assert_eq!(job.id, a);
    storage
        .ack(&job.lease().expect("leased"), None)
        .await
        .expect("ack");
    let body = send(&app, get(&format!("/jobs/{a}"))).await.body;
    assert!(body.contains("class=\"node completed current\""), "{body}");
    assert!(
        body.contains("class=\"node pending\""),
        "b released: {body}"
    );
    assert!(
        body.contains("class=\"node waiting\""),
        "c still waits: {body}"
    );

    let body = send(&app, get(&format!("/jobs/{lonely}"))).await.body;
    assert!(!body.contains("Workflow"), "{body}");
}

/// A batch's callback page says how its jobs stand, counting every job of
/// the batch, also past the jobs the graph draws.
#[tokio::test]
async fn a_batch_callback_page_shows_its_progress() {
    let storage = Arc::new(MemoryStorage::new());
    let jobs = (0..45)
        .map(|i| NewJob::new("import", json!({ "row": i })))
        .collect();
    let outcomes = storage
        .enqueue_batch(queue_core::batch(jobs, NewJob::new("report", json!({}))))
        .await
        .expect("enqueue the batch");
    let callback = outcomes.last().expect("the callback").id;
    storage.discard(outcomes[0].id).await.expect("discard");
    let request = DequeueRequest::new(
        vec![QueueName::new("import").expect("name")],
        2,
        Duration::from_secs(30),
        WorkerId::new("w").expect("worker"),
    )
    .expect("request");
    for job in storage.dequeue(&request).await.expect("dequeue") {
        storage
            .ack(&job.lease().expect("leased"), None)
            .await
            .expect("ack");
    }
    let app = app(Arc::clone(&storage), DashboardOptions::default());
    let body = send(&app, get(&format!("/jobs/{callback}"))).await.body;
    assert!(
        body.contains(
            "its dependencies: 3 of 45 finished (2 completed, 0 dead-lettered, 1 discarded, 0 \
             cancelled)"
        ),
        "{body}"
    );
}
