//! Knowledge imports (`/v1/kb-sources`) against the real binary on SQLite and PostgreSQL, reading a local web
//! site served by the test: main text without navigation, headers, footers or cookie banners, one FAQ per
//! section, searchable once imported; progress while importing; the charge of 0.05 credits per started
//! 1,000 characters taken from the balance; per-page errors (robots.txt, timeout, size, redirects, HTTP);
//! an empty balance; bad requests and another account's source; a core killed in the middle of a 50-page
//! import resuming it after a restart, charging each page once.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Router,
    extract::State,
    http::header,
    response::{IntoResponse, Redirect, Response},
    routing::get,
};
use frontdesk_api::admin::v1::CreditsRequest;
use frontdesk_tests::{
    Db, Server, admin,
    knowledge::{balance, finished, poll_until},
    on_both_databases,
    platform::{Platform, assert_invalid, assert_not_found},
    webhook_receiver::Receiver,
};
use serde_json::{Value, json};

/// Loopback targets allowed (the test's site), and a short page timeout so the slow page fails quickly.
const ENV: &[(&str, &str)] = &[
    ("FRONTDESK_ALLOW_PRIVATE_URLS", "true"),
    ("FRONTDESK_IMPORT_TIMEOUT", "2s"),
];

const HOURS: &str = r#"<!doctype html><html><head><title>Acme help</title><style>body{color:red}</style></head>
<body><header><a href="/">Acme home</a></header>
<nav><ul><li><a href="/hours">Opening hours menu</a></li></ul></nav>
<div id="cookie-consent">We use cookies. Accept all?</div>
<main><h1>Opening hours</h1><p>We are open from nine to five, Monday to Friday.</p>
<h2>Holidays</h2><p>On public holidays the shop stays closed.</p>
<script>window.tracking = "secret tracker";</script></main>
<footer>Copyright Acme 2026. All rights reserved.</footer></body></html>"#;

/// The test's web site; `base` is its address.
async fn site() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let base = format!("http://{addr}");
    let app = Router::new()
        .route(
            "/robots.txt",
            get(|| async { "User-agent: FrontDeskBot\nDisallow: /secret\n" }),
        )
        .route("/sitemap.xml", get(sitemap))
        .route("/hours", get(|| async { html(HOURS.to_owned()) }))
        .route("/parking", get(parking))
        .route("/prices", get(|| async { html(prices()) }))
        .route("/moved", get(|| async { Redirect::permanent("/hours") }))
        .route("/secret", get(|| async { html("<p>Staff only.</p>".to_owned()) }))
        .route("/slow", get(slow))
        .route(
            "/huge",
            get(|| async { html(format!("<p>{}</p>", "x".repeat(6 * 1024 * 1024))) }),
        )
        .route(
            "/loop/{n}",
            get(|axum::extract::Path(n): axum::extract::Path<u32>| async move {
                Redirect::temporary(&format!("/loop/{}", n + 1))
            }),
        )
        .with_state(base.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

fn html(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

/// A page in ISO-8859-1, as its header says.
async fn parking() -> Response {
    let body = b"<html><body><h2>Parking</h2><p>Free behind the caf\xe9.</p></body></html>".to_vec();
    ([(header::CONTENT_TYPE, "text/html; charset=ISO-8859-1")], body).into_response()
}

/// Heading "Prices" (6 characters) and 1,994 characters of text: 2,000 characters, charged 0.10.
fn prices() -> String {
    format!("<html><body><h2>Prices</h2><p>{}</p></body></html>", "a".repeat(1994))
}

async fn slow() -> Response {
    tokio::time::sleep(Duration::from_secs(5)).await;
    html("<p>Too late.</p>".to_owned())
}

async fn sitemap(State(base): State<String>) -> Response {
    let urls: String = ["hours", "parking"]
        .iter()
        .map(|p| format!("<url><loc>{base}/{p}</loc></url>"))
        .collect();
    let xml =
        format!(r#"<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>"#);
    ([(header::CONTENT_TYPE, "application/xml")], xml).into_response()
}

/// Starts an import at `path`; the new source's id, after checking the immediate answer.
async fn import(api: &Platform<'_>, path: &str, body: Value) -> String {
    let answer = api.ok("POST", path, Some(body)).await;
    assert_eq!(answer["status"], "queued", "{answer}");
    let id = answer["source_id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("kbs_"), "{id}");
    id
}

async fn faqs(api: &Platform<'_>, source: &str) -> Vec<(String, String)> {
    let answer = api.ok("GET", &format!("/v1/kb-sources/{source}/faqs"), None).await;
    let mut faqs: Vec<(String, String)> = answer["faqs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["question"].as_str().unwrap().to_owned(),
                f["answer"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    faqs.sort();
    faqs
}

/// The agent's search answer for `query`.
async fn search(api: &Platform<'_>, agent: &str, query: &str) -> Value {
    let body = json!({"query": query});
    api.ok("POST", &format!("/v1/agents/{agent}/search"), Some(body)).await
}

on_both_databases!(a_page_becomes_searchable_faqs_without_noise, |db: Db| async move {
    let server = Server::start(&db, ENV).await;
    let api = Platform::new(&server).await;
    let base = site().await;
    let agent = api.agent("Front desk").await;

    // Through a redirect, attached to the agent on creation.
    let source = import(
        &api,
        "/v1/kb-sources/url",
        json!({"url": format!("{base}/moved"), "agent_id": agent}),
    )
    .await;
    let done = finished(&api, &source).await;
    assert_eq!(done["status"], "ready", "{done}");
    assert_eq!(
        (
            done["kind"].clone(),
            done["pages_total"].clone(),
            done["pages_done"].clone()
        ),
        (json!("url"), json!(1), json!(1))
    );
    assert_eq!(
        (
            done["faqs_created"].clone(),
            done["error"].clone(),
            done["errors"].clone()
        ),
        (json!(2), Value::Null, json!([]))
    );
    assert_eq!(
        faqs(&api, &source).await,
        [
            (
                "Holidays".to_owned(),
                "On public holidays the shop stays closed.".to_owned()
            ),
            (
                "Opening hours".to_owned(),
                "We are open from nine to five, Monday to Friday.".to_owned()
            ),
        ]
    );
    // 110 characters of text: one started thousand, 0.05 credits, taken from the opening 10.
    assert_eq!(done["credits_used"], json!(0.05));
    assert_eq!(balance(&server, &api.account_id).await, 9.95);

    let found = search(&api, &agent, "holidays").await;
    assert_eq!(found["results"][0]["faq"]["question"], "Holidays", "{found}");
    assert_eq!(found["results"][0]["faq"]["source_id"], json!(source));
    let listed = api.ok("GET", "/v1/kb-sources", None).await;
    assert_eq!(listed["kb_sources"][0]["source_id"], json!(source));

    // Deleting the source deletes its FAQs: the agent no longer finds them.
    api.ok("DELETE", &format!("/v1/kb-sources/{source}"), None).await;
    assert_not_found(
        &api.send("GET", &format!("/v1/kb-sources/{source}"), None).await,
        "deleted source",
    );
    let found = search(&api, &agent, "holidays").await;
    assert_eq!(found["results"], json!([]));
});

on_both_databases!(
    a_bulk_import_lists_each_failed_page_and_shows_progress,
    |db: Db| async move {
        let server = Server::start(&db, ENV).await;
        let api = Platform::new(&server).await;
        let base = site().await;
        let urls: Vec<String> = [
            "hours", "slow", "parking", "secret", "huge", "loop/0", "missing", "prices",
        ]
        .iter()
        .map(|p| format!("{base}/{p}"))
        .collect();
        let source = import(&api, "/v1/kb-sources/bulk-import", json!({"urls": urls})).await;

        // The slow page holds the import: its progress shows in the meantime.
        let during = poll_until(&api, &source, |s| s["pages_done"].as_i64() >= Some(1)).await;
        assert_eq!(
            (during["status"].clone(), during["pages_total"].clone()),
            (json!("processing"), json!(8)),
            "{during}"
        );
        assert!(during["pages_done"].as_i64() < Some(8), "{during}");

        let done = finished(&api, &source).await;
        assert_eq!(
            (done["status"].clone(), done["pages_done"].clone()),
            (json!("ready"), json!(8)),
            "{done}"
        );
        let errors: Vec<(String, String)> = done["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["url"].as_str().unwrap().trim_start_matches(&base).to_owned(),
                    e["reason"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let expected = [
            ("/slow", "timeout"),
            ("/secret", "robots_disallowed"),
            ("/huge", "too_large"),
            ("/loop/0", "too_many_redirects"),
            ("/missing", "http_error"),
        ];
        assert_eq!(errors, expected.map(|(u, r)| (u.to_owned(), r.to_owned())));
        assert!(done["errors"][4]["message"].as_str().unwrap().contains("404"), "{done}");

        // hours (2 FAQs, 110 characters), parking (decoded from ISO-8859-1, 28) and prices (2,000): 0.05 + 0.05 + 0.10.
        let imported = faqs(&api, &source).await;
        assert!(
            imported.contains(&("Parking".to_owned(), "Free behind the café.".to_owned())),
            "{imported:?}"
        );
        assert_eq!(done["faqs_created"], json!(4));
        assert_eq!(done["credits_used"], json!(0.2));
        assert_eq!(balance(&server, &api.account_id).await, 9.8);
    }
);

on_both_databases!(robots_sitemaps_and_an_empty_balance, |db: Db| async move {
    let server = Server::start(&db, ENV).await;
    let api = Platform::new(&server).await;
    let base = site().await;

    // A single page that robots.txt disallows fails the source.
    let source = import(&api, "/v1/kb-sources/url", json!({"url": format!("{base}/secret")})).await;
    let done = finished(&api, &source).await;
    assert_eq!(
        (done["status"].clone(), done["error"].clone()),
        (json!("failed"), json!("robots_disallowed"))
    );
    assert_eq!(done["credits_used"], json!(0.0));

    // A sitemap's pages.
    let source = import(
        &api,
        "/v1/kb-sources/bulk-import",
        json!({"sitemap_url": format!("{base}/sitemap.xml")}),
    )
    .await;
    let done = finished(&api, &source).await;
    assert_eq!(
        (
            done["status"].clone(),
            done["pages_total"].clone(),
            done["faqs_created"].clone()
        ),
        (json!("ready"), json!(2), json!(3)),
        "{done}"
    );

    // 0.05 left: the first page (0.10) is not read and the rest fail with it.
    let left = balance(&server, &api.account_id).await;
    let debit = CreditsRequest {
        account_id: api.account_id.clone(),
        credits: format!("{:.2}", left - 0.05),
        reason: "test".to_owned(),
    };
    admin::client(&server).await.debit_credits(debit).await.unwrap();
    let urls = [format!("{base}/prices"), format!("{base}/hours")];
    let source = import(&api, "/v1/kb-sources/bulk-import", json!({"urls": urls})).await;
    let done = finished(&api, &source).await;
    assert_eq!(
        (done["status"].clone(), done["error"].clone()),
        (json!("failed"), json!("insufficient_credits")),
        "{done}"
    );
    let reasons: Vec<&str> = done["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["insufficient_credits", "insufficient_credits"]);
    assert_eq!(
        (done["credits_used"].clone(), done["faqs_created"].clone()),
        (json!(0.0), json!(0))
    );
    assert_eq!(balance(&server, &api.account_id).await, 0.05);
});

on_both_databases!(bad_requests_and_other_accounts_sources, |db: Db| async move {
    // Private targets refused (the default).
    let server = Server::start(&db, &[]).await;
    let api = Platform::new(&server).await;
    let other = Platform::new(&server).await;

    let too_many: Vec<String> = (0..101).map(|n| format!("https://example.invalid/{n}")).collect();
    let cases = [
        ("/v1/kb-sources/bulk-import", json!({"urls": too_many}), "urls"),
        ("/v1/kb-sources/bulk-import", json!({}), "urls"),
        (
            "/v1/kb-sources/bulk-import",
            json!({"urls": ["https://example.invalid/"], "sitemap_url": "https://example.invalid/s.xml"}),
            "urls",
        ),
        (
            "/v1/kb-sources/bulk-import",
            json!({"urls": ["https://example.invalid/", "file:///etc/passwd"]}),
            "urls[1]",
        ),
        ("/v1/kb-sources/url", json!({"url": "ftp://example.com/faq"}), "url"),
        ("/v1/kb-sources/url", json!({"url": ""}), "url"),
        (
            "/v1/kb-sources/url",
            json!({"url": "https://user:pw@example.com/"}),
            "url",
        ),
    ];
    for (path, body, field) in cases {
        assert_invalid(
            &api.send("POST", path, Some(body.clone())).await,
            field,
            &body.to_string(),
        );
    }
    // A private address is refused by name.
    let refused = api
        .send(
            "POST",
            "/v1/kb-sources/url",
            Some(json!({"url": "http://169.254.169.254/latest"})),
        )
        .await;
    assert_invalid(&refused, "url", "metadata address");
    assert!(refused.body.to_string().contains("169.254.169.254"), "{}", refused.body);
    // An agent of another account: 404, and nothing is created.
    let theirs = other.agent("Theirs").await;
    let answer = api
        .send(
            "POST",
            "/v1/kb-sources/url",
            Some(json!({"url": "https://example.invalid/", "agent_id": theirs})),
        )
        .await;
    assert_not_found(&answer, "another account's agent");
    assert_eq!(api.ok("GET", "/v1/kb-sources", None).await["kb_sources"], json!([]));

    let source = import(&api, "/v1/kb-sources/url", json!({"url": "https://example.invalid/"})).await;
    for (method, path) in [
        ("GET", format!("/v1/kb-sources/{source}")),
        ("GET", format!("/v1/kb-sources/{source}/faqs")),
        ("DELETE", format!("/v1/kb-sources/{source}")),
    ] {
        assert_not_found(&other.send(method, &path, None).await, &path);
    }
    assert_eq!(other.ok("GET", "/v1/kb-sources", None).await["kb_sources"], json!([]));
    api.ok("GET", &format!("/v1/kb-sources/{source}"), None).await;
});

/// Pages of the crash-resume test's site.
const PAGES: usize = 50;

/// The crash-resume test's site: `/page/{n}` for 1..=50, each "Topic NN" (8 characters) over 1,492 characters
/// of text, 1,500 in all and so charged 0.10, answered after 150 ms so an import of them takes a while.
/// Its address, and how many times each page was fetched.
async fn fifty_page_site() -> (String, Arc<Mutex<BTreeMap<u32, usize>>>) {
    let fetched = Arc::new(Mutex::new(BTreeMap::new()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new()
        .route(
            "/page/{n}",
            get(
                |State(fetched): State<Arc<Mutex<BTreeMap<u32, usize>>>>,
                 axum::extract::Path(n): axum::extract::Path<u32>| async move {
                    *fetched.lock().unwrap().entry(n).or_default() += 1;
                    tokio::time::sleep(Duration::from_millis(150)).await;
                    html(format!(
                        "<html><body><nav>Menu</nav><main><h1>Topic {n:02}</h1><p>{}</p></main></body></html>",
                        "a".repeat(1492)
                    ))
                },
            ),
        )
        .with_state(fetched.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, fetched)
}

on_both_databases!(
    a_killed_core_resumes_an_import_and_charges_each_page_once,
    |db: Db| async move {
        // A short job lease, so the restarted core takes the dead one's import over soon.
        let mut env = ENV.to_vec();
        env.push(("FRONTDESK_JOB_LEASE", "2s"));
        let mut server = Server::start(&db, &env).await;
        let (base, fetched) = fifty_page_site().await;
        let receiver = Receiver::start().await;
        let (account_id, key, source, before, during) = {
            let api = Platform::new(&server).await;
            let hook = json!({"name": "kb", "url": receiver.url, "events": ["kb_source.ready", "kb_source.failed"]});
            api.ok("POST", "/v1/webhooks", Some(hook)).await;
            let before = balance(&server, &api.account_id).await;
            let urls: Vec<String> = (1..=PAGES).map(|n| format!("{base}/page/{n}")).collect();
            let source = import(&api, "/v1/kb-sources/bulk-import", json!({"urls": urls})).await;
            let during = poll_until(&api, &source, |s| s["pages_done"].as_i64() >= Some(5)).await;
            (api.account_id, api.key, source, before, during)
        };
        // SIGKILL once a few pages are recorded: the core is in the middle of the import (a page takes 150 ms
        // to answer), with pages recorded before it and pending after it.
        server.kill();
        assert_eq!(
            (during["status"].clone(), during["pages_total"].clone()),
            (json!("processing"), json!(PAGES)),
            "{during}"
        );
        assert!(
            during["pages_done"].as_i64() < Some(40),
            "the kill must land mid-import: {during}"
        );

        // The same core again on the same database: once the dead process's lease ends, its import is taken
        // over and finishes.
        let server = server.restart().await;
        let api = Platform::of(&server, &account_id, &key);
        let done = finished(&api, &source).await;
        assert_eq!(
            (
                done["status"].clone(),
                done["pages_total"].clone(),
                done["pages_done"].clone()
            ),
            (json!("ready"), json!(PAGES), json!(PAGES)),
            "{done}"
        );
        assert_eq!(
            (
                done["faqs_created"].clone(),
                done["sections"].clone(),
                done["error"].clone(),
                done["errors"].clone()
            ),
            (json!(PAGES), json!(PAGES), Value::Null, json!([])),
            "{done}"
        );

        // One FAQ per page, none twice.
        let listed = api
            .ok("GET", &format!("/v1/kb-sources/{source}/faqs?limit=200"), None)
            .await;
        let mut questions: Vec<&str> = listed["faqs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                assert_eq!(f["answer"].as_str().map(str::len), Some(1492), "{f}");
                f["question"].as_str().unwrap()
            })
            .collect();
        questions.sort_unstable();
        let expected: Vec<String> = (1..=PAGES).map(|n| format!("Topic {n:02}")).collect();
        assert_eq!(questions, expected);

        // Each page charged once: 50 × 0.10, on the source and off the balance.
        let milli = |credits: f64| (credits * 1000.0).round() as i64;
        assert_eq!(done["credits_used"].as_f64().map(milli), Some(5_000), "{done}");
        let after = balance(&server, &api.account_id).await;
        assert_eq!(milli(before) - milli(after), 5_000, "balance {before} -> {after}");

        // The import resumed where it stopped instead of starting over: every page fetched, and at most the
        // one in flight at the kill fetched twice.
        let fetched = fetched.lock().unwrap().clone();
        assert_eq!(fetched.len(), PAGES, "{fetched:?}");
        assert!(fetched.values().sum::<usize>() <= PAGES + 1, "{fetched:?}");

        // And the source ended once: one `kb_source.ready`, no `kb_source.failed`.
        receiver.wait_for(1, Duration::from_secs(30)).await;
        frontdesk_tests::admin::quiesce(&server).await;
        let ended: Vec<String> = receiver
            .deliveries()
            .iter()
            .map(|d| d.json["type"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(ended, ["kb_source.ready"]);
        assert!(receiver.deliveries()[0].body.contains(&source));
    }
);
