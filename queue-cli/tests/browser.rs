//! The dashboard in a real headless Chromium (Debian's `chromium` and
//! `chromium-driver`), served by the `queue` binary on PostgreSQL.
//!
//! These tests are `#[ignore]`d, so `cargo test` lists them as ignored on
//! a machine without Chromium; `scripts/test.sh` runs them with
//! `--ignored` when `chromium` and `chromedriver` are installed (`.ci/run`
//! installs them). `QUEUE_UPDATE_SCREENSHOTS=1` also writes the screenshots
//! into `docs/`.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use queue::{
    AnyStorage, DequeueRequest, JobId, NewJob, QueueName, QueueSample, Retry, Storage, WorkerId,
};
use queue_testkit::harness::postgres::TestSchema;
use serde_json::json;

/// A child process killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn wait_for_port(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A schema with jobs in three queues and one dead letter; its storage,
/// the dead letter's id, and a pending job whose payload holds a script.
async fn fixture() -> (TestSchema, AnyStorage, JobId, JobId) {
    let schema = TestSchema::create().await;
    let storage = queue::connect(schema.url())
        .await
        .expect("connect")
        .with_schema(schema.name())
        .expect("schema");
    storage.migrate().await.expect("migrate");
    for (queue, n, delay) in [("emails", 12, 0), ("reports", 3, 3600), ("webhooks", 7, 0)] {
        for i in 0..n {
            let job = NewJob::new(queue, json!({ "n": i })).delay(Duration::from_secs(delay));
            storage.enqueue(job).await.expect("enqueue");
        }
    }
    let hostile = storage
        .enqueue(NewJob::new(
            "emails",
            json!({ "html": "<script>window.__pwned = 1</script>" }),
        ))
        .await
        .expect("enqueue")
        .id;
    let dead = storage
        .enqueue(NewJob::new("billing", json!({ "invoice": 42 })).max_attempts(1))
        .await
        .expect("enqueue")
        .id;
    let job = claim_one(&storage, "billing").await;
    let error = json!({ "message": "card declined", "kind": "failed" });
    storage
        .nack(&job.lease().expect("leased"), error, Retry::Never)
        .await
        .expect("nack");
    (schema, storage, dead, hostile)
}

/// The next job of `queue`, leased for 30 s by the test's worker.
async fn claim_one(storage: &AnyStorage, queue: &str) -> queue::Job {
    let request = DequeueRequest::new(
        vec![QueueName::new(queue).expect("name")],
        1,
        Duration::from_secs(30),
        WorkerId::new("browser-test").expect("worker"),
    )
    .expect("request");
    storage.dequeue(&request).await.expect("dequeue").remove(0)
}

/// `queue dashboard` on the schema, and a Chromium session next to it.
async fn open(schema: &TestSchema) -> (Process, Process, Client, String) {
    open_with(schema, &[]).await
}

/// `open` with more arguments for `queue dashboard`.
async fn open_with(schema: &TestSchema, extra: &[&str]) -> (Process, Process, Client, String) {
    let port = free_port();
    let dashboard = Process(
        Command::new(env!("CARGO_BIN_EXE_queue"))
            .args(["dashboard", "--bind", &format!("127.0.0.1:{port}")])
            // Still pages unless the test asks for live updates.
            .args(if extra.contains(&"--refresh") {
                &[][..]
            } else {
                &["--refresh", "0"][..]
            })
            .args(extra)
            .env("QUEUE_DATABASE_URL", schema.url())
            .env("QUEUE_SCHEMA", schema.name())
            .stderr(Stdio::null())
            .spawn()
            .expect("the dashboard starts"),
    );
    let driver_port = free_port();
    let driver = Process(
        Command::new("chromedriver")
            .arg(format!("--port={driver_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts (apt-get install chromium-driver)"),
    );
    wait_for_port(port, "the dashboard");
    wait_for_port(driver_port, "chromedriver");
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".to_owned(),
        json!({
            "binary": "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,800"]
        }),
    );
    let client = ClientBuilder::new(HttpConnector::new())
        .capabilities(capabilities)
        .connect(&format!("http://127.0.0.1:{driver_port}"))
        .await
        .expect("a Chromium session");
    (
        dashboard,
        driver,
        client,
        format!("http://127.0.0.1:{port}"),
    )
}

/// Writes a screenshot under the test's target directory and, when asked,
/// into docs/.
async fn screenshot(client: &Client, name: &str) {
    let png = client.screenshot().await.expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    std::fs::write(format!("{}/{name}", env!("CARGO_TARGET_TMPDIR")), &png).expect("write");
    if std::env::var("QUEUE_UPDATE_SCREENSHOTS").as_deref() == Ok("1") {
        let docs = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/");
        std::fs::write(format!("{docs}{name}"), &png).expect("write into docs/");
    }
}

async fn body_text(client: &Client) -> String {
    client
        .find(Locator::Css("body"))
        .await
        .expect("a body")
        .text()
        .await
        .expect("its text")
}

/// The body's text, or `None` while a navigation has none to show.
async fn body_text_now(client: &Client) -> Option<String> {
    client
        .find(Locator::Css("body"))
        .await
        .ok()?
        .text()
        .await
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromedriver: scripts/test.sh runs it when they are installed"]
async fn the_overview_and_a_job_render_in_a_browser() {
    let (schema, _storage, dead, _) = fixture().await;
    let (_dashboard, _driver, client, base) = open(&schema).await;
    client
        .goto(&format!("{base}/"))
        .await
        .expect("open the overview");
    let text = body_text(&client).await;
    for queue in ["emails", "reports", "webhooks"] {
        assert!(text.contains(queue), "{queue} on the overview: {text}");
    }
    screenshot(&client, "dashboard-overview.png").await;
    client
        .goto(&format!("{base}/jobs/{dead}"))
        .await
        .expect("open the job");
    let text = body_text(&client).await;
    assert!(
        text.contains("dead_letter") && text.contains("card declined"),
        "{text}"
    );
    screenshot(&client, "dashboard-job.png").await;
    client.close().await.expect("close");
    schema.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromedriver: scripts/test.sh runs it when they are installed"]
async fn a_dead_letter_is_retried_from_the_page() {
    let (schema, storage, dead, _) = fixture().await;
    let (_dashboard, _driver, client, base) = open(&schema).await;
    client
        .goto(&format!("{base}/history?status=dead_letter"))
        .await
        .expect("open the dead letters");
    let selector = format!("form[action='/jobs/{dead}/retry'] button");
    client
        .find(Locator::Css(&selector))
        .await
        .expect("a Retry button")
        .click()
        .await
        .expect("click");
    let deadline = Instant::now() + Duration::from_secs(10);
    while storage.get_job(dead).await.expect("read").is_none() {
        assert!(
            Instant::now() < deadline,
            "the dead letter is not live again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        storage.get_history(dead).await.expect("read").is_none(),
        "left history"
    );
    client.close().await.expect("close");
    schema.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromedriver: scripts/test.sh runs it when they are installed"]
async fn a_mutation_without_the_csrf_token_is_refused_and_changes_nothing() {
    let (schema, storage, _, hostile) = fixture().await;
    let (_dashboard, _driver, client, base) = open(&schema).await;
    client
        .goto(&format!("{base}/jobs/{hostile}"))
        .await
        .expect("open the job");
    client
        .execute(
            "document.querySelectorAll(\"input[name='csrf']\").forEach(i => i.value = 'forged');",
            vec![],
        )
        .await
        .expect("forge the token");
    let selector = format!("form[action='/jobs/{hostile}/discard'] button");
    client
        .find(Locator::Css(&selector))
        .await
        .expect("a Discard button")
        .click()
        .await
        .expect("click");
    let deadline = Instant::now() + Duration::from_secs(10);
    // While the refusal page loads the old body is gone: keep polling.
    while !body_text_now(&client)
        .await
        .is_some_and(|text| text.contains("CSRF"))
    {
        assert!(Instant::now() < deadline, "no refusal shown");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        storage.get_job(hostile).await.expect("read").is_some(),
        "not discarded"
    );
    client.close().await.expect("close");
    schema.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromedriver: scripts/test.sh runs it when they are installed"]
async fn a_script_in_a_payload_renders_as_inert_text() {
    let (schema, _storage, _, hostile) = fixture().await;
    let (_dashboard, _driver, client, base) = open(&schema).await;
    client
        .goto(&format!("{base}/jobs/{hostile}"))
        .await
        .expect("open the job");
    let ran = client
        .execute("return typeof window.__pwned;", vec![])
        .await
        .expect("evaluate");
    assert_eq!(ran, json!("undefined"), "the payload's script ran");
    assert!(
        body_text(&client)
            .await
            .contains("<script>window.__pwned = 1</script>")
    );
    client.close().await.expect("close");
    schema.drop_schema().await;
}

/// Polls `script` (a function body returning a boolean) until it is true.
async fn wait_until(client: &Client, script: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if client.execute(script, vec![]).await.ok() == Some(json!(true)) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromedriver: scripts/test.sh runs it when they are installed"]
async fn the_dashboard_cannot_be_framed_and_its_style_sheet_applies() {
    let (schema, _storage, _, _) = fixture().await;
    let (_dashboard, _driver, client, base) = open(&schema).await;
    client
        .goto(&format!("{base}/"))
        .await
        .expect("open the overview");
    // The style sheet loads under the Content-Security-Policy.
    let background = client
        .execute(
            "return getComputedStyle(document.querySelector('header')).backgroundColor;",
            vec![],
        )
        .await
        .expect("evaluate");
    assert_eq!(background, json!("rgb(29, 35, 48)"));
    // Even a page of its own origin cannot frame it: the frame stays empty.
    client
        .execute(
            "const f = document.createElement('iframe'); f.id = 'framed'; \
             f.onload = () => { window.__framed_loaded = true; }; \
             f.src = '/jobs'; document.body.appendChild(f);",
            vec![],
        )
        .await
        .expect("add a frame");
    wait_until(
        &client,
        "return window.__framed_loaded === true;",
        "the frame never finished loading",
    )
    .await;
    let framed = client
        .execute(
            "try { const d = document.getElementById('framed').contentDocument; \
               return !!d && !!d.body && d.body.innerText.includes('Jobs'); } \
             catch (e) { return false; }",
            vec![],
        )
        .await
        .expect("evaluate");
    assert_eq!(framed, json!(false), "the dashboard rendered in a frame");
    client.close().await.expect("close");
    schema.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromedriver: scripts/test.sh runs it when they are installed"]
async fn the_login_form_posts_and_its_cookie_is_out_of_scripts_reach() {
    let token = "browser-token-0123456789";
    let (schema, _storage, _, _) = fixture().await;
    let (_dashboard, _driver, client, base) = open_with(&schema, &["--token", token]).await;
    client
        .goto(&format!("{base}/history"))
        .await
        .expect("open the history");
    assert!(body_text(&client).await.contains("access token"));
    client
        .find(Locator::Css("input[name='token']"))
        .await
        .expect("a token field")
        .send_keys(token)
        .await
        .expect("type the token");
    client
        .find(Locator::Css("form button"))
        .await
        .expect("an Open button")
        .click()
        .await
        .expect("click");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !body_text_now(&client)
        .await
        .is_some_and(|text| text.contains("History"))
    {
        assert!(
            Instant::now() < deadline,
            "the login did not open the history"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let url = client.current_url().await.expect("a URL");
    assert_eq!(url.path(), "/history");
    assert!(!url.as_str().contains(token), "the token in the URL: {url}");
    // HttpOnly: a script on the page cannot read the cookie.
    let cookies = client
        .execute("return document.cookie;", vec![])
        .await
        .expect("evaluate");
    assert_eq!(cookies, json!(""), "a script read the cookie");
    let cookie = client
        .get_named_cookie("queue_dashboard_token")
        .await
        .expect("the login cookie");
    assert_eq!(cookie.http_only(), Some(true));
    assert_eq!(format!("{:?}", cookie.same_site()), "Some(Strict)");
    assert_ne!(cookie.secure(), Some(true), "plain HTTP: not Secure");
    client.close().await.expect("close");
    schema.drop_schema().await;
}

/// The overview updates in place: jobs enqueued after it loaded show in
/// its counts within a few periods, without a reload (a mark left on the
/// window stays), and the page stays whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromedriver: scripts/test.sh runs it when they are installed"]
async fn the_overview_updates_in_place() {
    let (schema, storage, _, _) = fixture().await;
    let (_dashboard, _driver, client, base) = open_with(&schema, &["--refresh", "1"]).await;
    client
        .goto(&format!("{base}/"))
        .await
        .expect("open the overview");
    client
        .execute("window.__kept = 1; return null;", vec![])
        .await
        .expect("mark the window");
    let webhooks_pending = "return Array.from(document.querySelectorAll('#live tr')).some(\
         row => row.cells.length > 1 && row.cells[0].innerText.trim() === 'webhooks' \
         && row.cells[1].innerText.trim() === '{n}');";
    wait_until(
        &client,
        &webhooks_pending.replace("{n}", "7"),
        "the overview shows webhooks' 7 pending jobs",
    )
    .await;
    for i in 0..5 {
        storage
            .enqueue(NewJob::new("webhooks", json!({ "late": i })))
            .await
            .expect("enqueue");
    }
    wait_until(
        &client,
        &webhooks_pending.replace("{n}", "12"),
        "the overview never showed the 5 new jobs in place",
    )
    .await;
    assert_eq!(
        client
            .execute(
                "return window.__kept === 1 && !!document.querySelector('header a.brand');",
                vec![]
            )
            .await
            .expect("read the window"),
        json!(true),
        "the page was reloaded or lost its frame"
    );
    client.close().await.expect("close");
    schema.drop_schema().await;
}

/// Typed into the jobs page's search field, a value in the payload lists
/// only the jobs that hold it, and says how many rows it read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromedriver: scripts/test.sh runs it when they are installed"]
async fn the_jobs_page_searches_the_payload() {
    let (schema, _storage, _, _) = fixture().await;
    let (_dashboard, _driver, client, base) = open(&schema).await;
    client
        .goto(&format!("{base}/jobs"))
        .await
        .expect("open the jobs page");
    let field = client
        .find(Locator::Css("form[action='/jobs'] input[name=payload]"))
        .await
        .expect("a search field");
    field.send_keys("payload.n = 5").await.expect("type");
    client
        .find(Locator::Css("form[action='/jobs'] button[type=submit]"))
        .await
        .expect("the Filter button")
        .click()
        .await
        .expect("click");
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        // Read while the page may be between the click's navigation and
        // its answer (no body yet).
        let text = body_text_now(&client).await.unwrap_or_default();
        if text.contains("Searched") {
            break text;
        }
        assert!(Instant::now() < deadline, "no search summary: {text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Jobs with n = 5 are one in emails and one in webhooks (reports has
    // three jobs, n 0 to 2), of the 23 live jobs.
    assert!(text.contains("Searched 23 rows, 2 found."), "{text}");
    let rows = client
        .find_all(Locator::Css("main table tbody tr"))
        .await
        .expect("rows");
    assert_eq!(rows.len(), 2, "{text}");
    assert!(
        text.contains("emails") && text.contains("webhooks"),
        "{text}"
    );
    screenshot(&client, "dashboard-search.png").await;
    client.close().await.expect("close");
    schema.drop_schema().await;
}

/// The charts page draws its three charts (jobs finished, start lags,
/// depths) from an hour of recorded samples, and follows a link to one
/// queue's charts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromedriver: scripts/test.sh runs it when they are installed"]
async fn the_charts_page_draws_an_hour_of_samples() {
    let (schema, storage, _, _) = fixture().await;
    let now = storage.now().await.expect("now");
    let samples: Vec<QueueSample> = (0..60i64)
        .flat_map(|ago| {
            let minute = queue::minute_of(now) - chrono::TimeDelta::minutes(ago);
            ["emails", "webhooks"].into_iter().map(move |queue| {
                let mut sample = QueueSample::new(QueueName::new(queue).expect("name"), minute);
                let wave = (ago % 20) as u64;
                for k in 0..20u64 {
                    sample
                        .lag
                        .record(Duration::from_millis(5 + k * k * (1 + wave)));
                }
                sample.depth = Some(queue::Depth {
                    pending: 40 + wave * 15,
                    scheduled: 12,
                    running: 8 + wave % 5,
                });
                sample
            })
        })
        .collect();
    storage.record_samples(&samples).await.expect("record");
    let (_dashboard, _driver, client, base) = open(&schema).await;
    client
        .goto(&format!("{base}/charts"))
        .await
        .expect("open the charts");
    let text = body_text(&client).await;
    for expected in ["Jobs finished per minute", "Start lag per minute", "Depth"] {
        assert!(text.contains(expected), "{expected}: {text}");
    }
    let plots = client
        .find_all(Locator::Css("svg.plot"))
        .await
        .expect("plots");
    assert_eq!(plots.len(), 3, "{text}");
    let drawn: i64 = client
        .execute(
            "return [...document.querySelectorAll('svg.plot polyline')]
                .filter(l => l.getBBox().width > 300).length",
            vec![],
        )
        .await
        .expect("measure the lines")
        .as_i64()
        .expect("a count");
    assert_eq!(drawn, 5, "p50, p99 and three depths span the hour");
    screenshot(&client, "dashboard-charts.png").await;
    client
        .find(Locator::Css("p.picker a[href*='queue=webhooks']"))
        .await
        .expect("a link to one queue")
        .click()
        .await
        .expect("click");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !body_text(&client).await.contains("Charts: webhooks") {
        assert!(Instant::now() < deadline, "the queue's charts did not open");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client.close().await.expect("close");
    schema.drop_schema().await;
}

/// Every page the navigation links (overview, jobs, history, dead letters,
/// workers, charts, enqueue) opens in the browser with a 200, its heading
/// and what the fixture put there; the workers page shows a registered
/// worker with its host, process id and queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromedriver: scripts/test.sh runs it when they are installed"]
async fn every_page_in_the_navigation_opens() {
    let (schema, storage, _, _) = fixture().await;
    let started = storage.now().await.expect("now");
    let worker = queue::WorkerInfo {
        id: WorkerId::new("web-7f3a").expect("worker id"),
        host: "web-1.internal".into(),
        pid: 31337,
        version: "0.1.0".into(),
        queues: vec![queue::WorkerQueue {
            queue: QueueName::new("webhooks").expect("name"),
            concurrency: 8,
        }],
        started_at: started,
    };
    storage.register_worker(&worker).await.expect("register");
    let (_dashboard, _driver, client, base) = open(&schema).await;
    client.goto(&format!("{base}/")).await.expect("open");
    let links: Vec<String> = client
        .execute(
            "return [...document.querySelectorAll('header a')].map(a => a.getAttribute('href'))",
            vec![],
        )
        .await
        .expect("the navigation's links")
        .as_array()
        .expect("a list")
        .iter()
        .map(|href| href.as_str().expect("an href").to_owned())
        .collect();
    // What each page must show beyond its heading.
    let expected: &[(&str, &[&str])] = &[
        ("/", &["emails", "reports", "webhooks"]),
        ("/jobs", &["emails", "webhooks"]),
        ("/history", &["billing"]),
        ("/history?status=dead_letter", &["billing", "dead_letter"]),
        (
            "/workers",
            &["web-7f3a", "web-1.internal", "31337", "webhooks"],
        ),
        ("/charts", &["Jobs finished per minute"]),
        ("/enqueue", &["payload (JSON)", "unique key"]),
    ];
    let mut hrefs: Vec<&str> = links.iter().map(String::as_str).collect();
    hrefs.dedup();
    assert_eq!(
        hrefs,
        expected.iter().map(|(href, _)| *href).collect::<Vec<_>>(),
        "the navigation's links"
    );
    for (href, shows) in expected {
        client
            .goto(&format!("{base}{href}"))
            .await
            .expect("open the page");
        let status = client
            .execute(
                "return performance.getEntriesByType('navigation')[0].responseStatus",
                vec![],
            )
            .await
            .expect("the response's status");
        assert_eq!(status.as_i64(), Some(200), "{href}");
        let heading = client
            .find(Locator::Css("main h1"))
            .await
            .expect("a heading")
            .text()
            .await
            .expect("its text");
        assert!(!heading.trim().is_empty(), "{href} has a heading");
        let text = body_text(&client).await;
        for needle in *shows {
            assert!(text.contains(needle), "{href} shows {needle}: {text}");
        }
        if *href == "/workers" {
            screenshot(&client, "dashboard-workers.png").await;
        }
    }
    client.close().await.expect("close");
    schema.drop_schema().await;
}

/// A fan-out/fan-in workflow on PostgreSQL (a root, three children, a join)
/// drawn on the join's page: five boxes, six arrows, the join outlined; a
/// click on the root's box opens the root's page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromedriver: scripts/test.sh runs it when they are installed"]
async fn a_workflow_draws_as_a_graph_in_a_browser() {
    use queue::Dependency;

    let (schema, storage, _, _) = fixture().await;
    let mut graph = vec![NewJob::new("etl", json!({ "step": "root" }))];
    for i in 0..3 {
        graph.push(NewJob::new("etl", json!({ "child": i })).depends_on(Dependency::InBatch(0)));
    }
    graph.push(
        NewJob::new("etl", json!({ "step": "join" }))
            .depends_on_all((1..=3).map(Dependency::InBatch)),
    );
    let ids: Vec<JobId> = storage
        .enqueue_batch(graph)
        .await
        .expect("enqueue the graph")
        .iter()
        .map(|outcome| outcome.id)
        .collect();
    let (root, join) = (ids[0], ids[4]);
    let (_dashboard, _driver, client, base) = open(&schema).await;
    client
        .goto(&format!("{base}/jobs/{join}"))
        .await
        .expect("open the join");
    let drawn = client
        .execute(
            "const svg = document.querySelector('svg.workflow');
             return svg ? [svg.querySelectorAll('rect').length,
                           svg.querySelectorAll('line').length,
                           svg.querySelectorAll('rect.current').length,
                           svg.querySelectorAll('rect.waiting').length,
                           svg.getBoundingClientRect().width > 0] : null;",
            vec![],
        )
        .await
        .expect("read the graph");
    assert_eq!(drawn, json!([5, 6, 1, 4, true]), "the join's graph");
    let fill = client
        .execute(
            "return getComputedStyle(document.querySelector('svg.workflow rect.pending')).fill;",
            vec![],
        )
        .await
        .expect("the root's fill");
    assert_eq!(
        fill,
        json!("rgb(238, 242, 255)"),
        "the style sheet colours the states"
    );
    client
        .execute(
            "document.querySelector('h2:nth-of-type(3)').scrollIntoView();",
            vec![],
        )
        .await
        .expect("scroll to the workflow");
    screenshot(&client, "dashboard-workflow.png").await;
    client
        .find(Locator::Css(&format!(
            "svg.workflow a[href='/jobs/{root}']"
        )))
        .await
        .expect("the root's box")
        .click()
        .await
        .expect("click the root");
    wait_until(
        &client,
        &format!("return location.pathname === '/jobs/{root}';"),
        "the root's page did not open",
    )
    .await;
    let text = body_text(&client).await;
    assert!(text.contains("pending (live)"), "{text}");
    client.close().await.expect("close");
    schema.drop_schema().await;
}

/// A batch of three on PostgreSQL, one job completed and one discarded,
/// a fourth joining it: the callback's page reads its progress, and the
/// graph draws the four jobs it waits for, the joined one among them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium and chromedriver: scripts/test.sh runs it when they are installed"]
async fn a_batch_callback_shows_its_progress_in_a_browser() {
    let (schema, storage, _, _) = fixture().await;
    let jobs = (0..3)
        .map(|i| NewJob::new("import", json!({ "file": i })))
        .collect();
    let outcomes = storage
        .enqueue_batch(queue::batch(jobs, NewJob::new("import-done", json!({}))))
        .await
        .expect("enqueue the batch");
    let callback = outcomes[3].id;
    storage
        .enqueue(NewJob::new("import", json!({ "file": 3 })).joins(callback))
        .await
        .expect("join the batch");
    let first = claim_one(&storage, "import").await;
    assert_eq!(first.id, outcomes[0].id);
    storage
        .ack(&first.lease().expect("leased"), None)
        .await
        .expect("ack");
    storage.discard(outcomes[1].id).await.expect("discard");
    let (_dashboard, _driver, client, base) = open(&schema).await;
    client
        .goto(&format!("{base}/jobs/{callback}"))
        .await
        .expect("open the callback");
    let progress = client
        .execute(
            "const p = document.querySelector('p.batch-progress');
             return p ? p.innerText : null;",
            vec![],
        )
        .await
        .expect("read the progress");
    assert_eq!(
        progress,
        json!(
            "its dependencies: 2 of 4 finished (1 completed, 0 dead-lettered, 1 discarded, 0 cancelled)"
        ),
    );
    let drawn = client
        .execute(
            "const svg = document.querySelector('svg.workflow');
             return svg ? [svg.querySelectorAll('rect').length,
                           svg.querySelectorAll('rect.waiting').length,
                           svg.querySelectorAll('rect.completed').length,
                           svg.querySelectorAll('rect.discarded').length] : null;",
            vec![],
        )
        .await
        .expect("read the graph");
    assert_eq!(drawn, json!([5, 1, 1, 1]), "the callback's graph");
    client.close().await.expect("close");
    schema.drop_schema().await;
}
