//! Document uploads (`POST /v1/kb-sources/file`) and import estimates (`POST /v1/kb-sources/estimate`)
//! against the real binary on SQLite and PostgreSQL: each document type (the real files of
//! `tests/fixtures/kb`) becomes FAQs in section order with its charge; a CSV of questions and answers becomes
//! FAQs row by row; bad uploads (no file, empty, unsupported type, unknown part, over the size limit) are
//! refused; a document without text, an empty balance and malicious documents (a zip bomb DOCX, a PDF whose
//! form draws itself, one enormous HTML line) fail their source while the server keeps answering; an upload
//! accepted by a core that stops before reading it is imported after the restart.

use std::time::Duration;

use axum::{Router, http::header, response::IntoResponse, routing::get};
use frontdesk_api::{
    admin::v1::CreditsRequest,
    v1::{FilePart, ImportFileRequest, kb_sources_client::KbSourcesClient},
};
use frontdesk_tests::{
    Answer, Db, Server, admin,
    knowledge::{Part, balance, finished, fixture, multipart, upload},
    on_both_databases,
    platform::{Platform, agency_and_child, assert_invalid, assert_not_found},
};
use serde_json::{Value, json};

const ENV: &[(&str, &str)] = &[("FRONTDESK_ALLOW_PRIVATE_URLS", "true")];

/// Uploads `parts`, which must be accepted; the new source's id.
async fn accepted(api: &Platform<'_>, parts: &[Part<'_>]) -> String {
    let answer = upload(api.server, &api.key, parts).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        (answer.body["success"].clone(), answer.body["status"].clone()),
        (json!(true), json!("queued")),
        "{}",
        answer.body
    );
    answer.body["source_id"].as_str().unwrap().to_owned()
}

/// Uploads the fixture `name` as the part `file`; the source once its import ended.
async fn imported(api: &Platform<'_>, name: &str, content_type: &str) -> (String, Value) {
    let source = accepted(api, &[Part::file("file", name, content_type, fixture(name))]).await;
    let done = finished(api, &source).await;
    (source, done)
}

/// The source's FAQs as listed (section order).
async fn faqs(api: &Platform<'_>, source: &str) -> Vec<(String, String)> {
    let answer = api
        .ok("GET", &format!("/v1/kb-sources/{source}/faqs?limit=200"), None)
        .await;
    answer["faqs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["question"].as_str().unwrap().to_owned(),
                f["answer"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Expected FAQs: (question, answer) in order.
type Faqs = &'static [(&'static str, &'static str)];

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(q, a)| ((*q).to_owned(), (*a).to_owned()))
        .collect()
}

on_both_databases!(each_document_type_becomes_faqs_in_section_order, |db: Db| async move {
    let server = Server::start(&db, ENV).await;
    let api = Platform::new(&server).await;
    let cases: [(&str, &str, Faqs); 7] = [
        (
            "hours.html",
            "text/html",
            &[
                ("Opening hours", "We are open from nine to five, Monday to Friday."),
                ("Holidays", "On public holidays the shop stays closed."),
            ],
        ),
        (
            "welcome.txt",
            "text/plain",
            &[(
                "welcome.txt",
                "Welcome to Acme.\nWe sell tea, coffee and biscuits from our shop on the harbour.",
            )],
        ),
        (
            "care.md",
            "application/octet-stream",
            &[
                ("care.md", "Tips from the Acme tea room."),
                (
                    "Storing tea",
                    "Keep tea in an airtight tin, away from light and strong smells.\nGreen tea: use within six months.\nBlack tea: use within two years.",
                ),
                (
                    "Brewing",
                    "Use water just off the boil for black tea, and 80 °C for green tea.",
                ),
            ],
        ),
        (
            "returns.pdf",
            "application/pdf",
            &[(
                "returns.pdf",
                "Returns and refunds\nUnused items can be returned within thirty days for a full refund.\nRefunds reach your card within five working days.",
            )],
        ),
        (
            "shipping.docx",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            &[
                (
                    "Delivery",
                    "We deliver Monday to Saturday between eight and six.\nOrders placed before noon leave the same day.",
                ),
                ("Gift wrapping", "Gift wrapping costs two euros & comes with a card."),
            ],
        ),
        (
            "faq.csv",
            "text/csv",
            &[
                ("Do you ship abroad?", "Yes, to every country in the EU."),
                ("Can I pay by invoice?", "Business customers can pay within 30 days."),
                (
                    "How do I cancel an order?",
                    "Write to us before it ships and we cancel it at no cost.",
                ),
            ],
        ),
        (
            "prices.csv",
            "text/csv",
            &[("prices.csv", "product, price\ngreen tea, 4.50\nblack tea, 3.90")],
        ),
    ];
    for (name, content_type, expected) in cases {
        let (source, done) = imported(&api, name, content_type).await;
        assert_eq!(
            (done["status"].clone(), done["kind"].clone(), done["file_name"].clone()),
            (json!("ready"), json!("file"), json!(name)),
            "{name}: {done}"
        );
        assert_eq!(
            (
                done["pages_total"].clone(),
                done["pages_done"].clone(),
                done["error"].clone(),
                done["url"].clone()
            ),
            (json!(1), json!(1), Value::Null, Value::Null),
            "{name}: {done}"
        );
        assert_eq!(done["faqs_created"], json!(expected.len()), "{name}: {done}");
        // Each is under 1,000 characters of text: 0.05 credits.
        assert_eq!(done["credits_used"], json!(0.05), "{name}: {done}");
        assert_eq!(faqs(&api, &source).await, pairs(expected), "{name}");
    }
    // 7 × 0.05 off the opening 10.
    assert_eq!(balance(&server, &api.account_id).await, 9.65);

    // Paging keeps section order: one FAQ a page.
    let (source, _) = imported(&api, "care.md", "text/markdown").await;
    let first = api
        .ok("GET", &format!("/v1/kb-sources/{source}/faqs?limit=1"), None)
        .await;
    assert_eq!(first["faqs"][0]["question"], "care.md", "{first}");
    let cursor = first["next_cursor"].as_str().unwrap();
    let second = api
        .ok(
            "GET",
            &format!("/v1/kb-sources/{source}/faqs?limit=2&cursor={cursor}"),
            None,
        )
        .await;
    let questions: Vec<&str> = second["faqs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["question"].as_str().unwrap())
        .collect();
    assert_eq!(questions, ["Storing tea", "Brewing"]);
    assert_eq!(second["next_cursor"], Value::Null);

    // Attached on creation: the agent finds the document's FAQs.
    let agent = api.agent("Front desk").await;
    let source = accepted(
        &api,
        &[
            Part::text("agent_id", &agent),
            Part::file("file", "faq.csv", "text/csv", fixture("faq.csv")),
        ],
    )
    .await;
    assert_eq!(finished(&api, &source).await["status"], "ready");
    let found = api
        .ok(
            "POST",
            &format!("/v1/agents/{agent}/search"),
            Some(json!({"query": "invoice payment"})),
        )
        .await;
    assert_eq!(
        found["results"][0]["faq"]["question"], "Can I pay by invoice?",
        "{found}"
    );
    assert_eq!(found["results"][0]["faq"]["source_id"], json!(source));
});

/// A 400 naming `field` whose message mentions `words`.
fn assert_refused(answer: &Answer, field: &str, words: &str) {
    assert_invalid(answer, field, words);
    assert!(
        answer.body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains(words),
        "{words}: {}",
        answer.body
    );
}

on_both_databases!(bad_uploads_are_refused, |db: Db| async move {
    let server = Server::start(&db, &[("FRONTDESK_MAX_UPLOAD_MB", "1")]).await;
    let api = Platform::new(&server).await;
    let other = Platform::new(&server).await;
    let key = api.key.clone();

    let answer = upload(&server, &key, &[Part::text("agent_id", "")]).await;
    assert_refused(&answer, "file", "is required");
    let answer = upload(
        &server,
        &key,
        &[Part::file("file", "empty.txt", "text/plain", Vec::new())],
    )
    .await;
    assert_refused(&answer, "file", "is empty");
    let answer = upload(
        &server,
        &key,
        &[Part::file("file", "logo.png", "image/png", vec![1, 2, 3])],
    )
    .await;
    assert_refused(&answer, "file", "image/png");
    let answer = upload(
        &server,
        &key,
        &[Part::file(
            "file",
            "archive.zip",
            "application/octet-stream",
            vec![1, 2, 3],
        )],
    )
    .await;
    assert_refused(&answer, "file", ".zip");
    let answer = upload(
        &server,
        &key,
        &[
            Part::file("file", "welcome.txt", "text/plain", fixture("welcome.txt")),
            Part::text("colour", "blue"),
        ],
    )
    .await;
    assert_refused(&answer, "colour", "unknown part");
    let answer = upload(
        &server,
        &key,
        &[
            Part::file("file", "welcome.txt", "text/plain", fixture("welcome.txt")),
            Part::file("file", "welcome.txt", "text/plain", fixture("welcome.txt")),
        ],
    )
    .await;
    assert_refused(&answer, "file", "more than once");
    // A JSON body is no upload.
    let answer = api
        .send("POST", "/v1/kb-sources/file", Some(json!({"file": "x"})))
        .await;
    assert_refused(&answer, "body", "multipart/form-data");

    // Over the limit (1 MB here): 413, declared or not (then refused while it streams in).
    let big = vec![b'a'; 1024 * 1024 + 1];
    assert_eq!(raw_upload(&server, &key, big.clone(), false).await, 413);
    assert_eq!(raw_upload(&server, &key, big.clone(), true).await, 413);
    // Credentials come first: a bad key is 401 even for a body that is too large.
    assert_eq!(raw_upload(&server, "fd_live_wrong", big, false).await, 401);

    // Another account's agent: 404 and nothing created; another account's source: 404.
    let theirs = other.agent("Theirs").await;
    let answer = upload(
        &server,
        &key,
        &[
            Part::text("agent_id", &theirs),
            Part::file("file", "welcome.txt", "text/plain", fixture("welcome.txt")),
        ],
    )
    .await;
    assert_not_found(&answer, "another account's agent");
    assert_eq!(api.ok("GET", "/v1/kb-sources", None).await["kb_sources"], json!([]));
    let source = accepted(&api, &[Part::file("file", "welcome.txt", "", fixture("welcome.txt"))]).await;
    for (method, path) in [
        ("GET", format!("/v1/kb-sources/{source}")),
        ("GET", format!("/v1/kb-sources/{source}/faqs")),
        ("DELETE", format!("/v1/kb-sources/{source}")),
    ] {
        assert_not_found(&other.send(method, &path, None).await, &path);
    }
    assert_eq!(finished(&api, &source).await["status"], "ready");
    // Over gRPC: the same limit, and the same reasons.
    let mut grpc = KbSourcesClient::connect(server.grpc.clone()).await.unwrap();
    let file = |data: Vec<u8>| ImportFileRequest {
        file: Some(FilePart {
            file_name: "big.txt".to_owned(),
            content_type: "text/plain".to_owned(),
            data,
        }),
        agent_id: String::new(),
    };
    let refused = grpc
        .import_file(api.grpc(file(vec![b'a'; 1024 * 1024 + 1])))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{refused:?}");
    let refused = grpc.import_file(api.grpc(file(Vec::new()))).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    // At the limit exactly: accepted.
    let within = vec![b'a'; 1024 * 1024];
    let answer = upload(&server, &key, &[Part::file("file", "big.txt", "text/plain", within)]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
});

/// Sends `data` as the file of an upload over a raw socket, its length declared or (`chunked`) not, while
/// reading the answer (a refusal comes before the body is all sent); the answer's status.
async fn raw_upload(server: &Server, key: &str, data: Vec<u8>, chunked: bool) -> u16 {
    let (body, content_type) = multipart(&[Part::file("file", "big.txt", "text/plain", data)]);
    let headers = [("x-api-key", key), ("Content-Type", content_type.as_str())];
    frontdesk_tests::raw_post::status(&server.http, "/v1/kb-sources/file", &headers, body, chunked).await
}

on_both_databases!(documents_without_text_or_credits_fail, |db: Db| async move {
    let server = Server::start(&db, ENV).await;
    let api = Platform::new(&server).await;

    // A PDF of a scanned page: no text.
    let (_, done) = imported(&api, "scanned.pdf", "application/pdf").await;
    assert_eq!(
        (
            done["status"].clone(),
            done["error"].clone(),
            done["credits_used"].clone()
        ),
        (json!("failed"), json!("no_text"), json!(0.0)),
        "{done}"
    );
    assert_eq!(done["errors"][0]["reason"], "no_text", "{done}");
    assert_eq!(done["errors"][0]["url"], "scanned.pdf", "{done}");

    // An empty balance: the document is not imported and nothing is charged.
    let left = balance(&server, &api.account_id).await;
    let debit = CreditsRequest {
        account_id: api.account_id.clone(),
        credits: format!("{left:.2}"),
        reason: "test".to_owned(),
    };
    admin::client(&server).await.debit_credits(debit).await.unwrap();
    let (source, done) = imported(&api, "shipping.docx", "").await;
    assert_eq!(
        (
            done["status"].clone(),
            done["error"].clone(),
            done["credits_used"].clone(),
            done["faqs_created"].clone()
        ),
        (json!("failed"), json!("insufficient_credits"), json!(0.0), json!(0)),
        "{done}"
    );
    assert_eq!(faqs(&api, &source).await, []);
    assert_eq!(balance(&server, &api.account_id).await, 0.0);
});

on_both_databases!(
    malicious_documents_fail_their_source_and_the_server_goes_on,
    |db: Db| async move {
        let server = Server::start(&db, ENV).await;
        let api = Platform::new(&server).await;
        let docx = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";
        // A DOCX whose document.xml inflates to 200 MiB; a PDF whose form XObject draws itself (the PDF
        // parser recurses until its stack overflows); 5 MB of text in one HTML line (2,500 FAQs' worth; larger
        // than gRPC's default message limit of 4 MiB, which the core raises for uploads).
        let one_line = format!("<html><body><p>{}</p></body></html>", "tea ".repeat(1_250_000)).into_bytes();
        let cases = [
            ("bomb.docx", docx, fixture("bomb.docx"), "too_large"),
            (
                "loop-form.pdf",
                "application/pdf",
                fixture("loop-form.pdf"),
                "unreadable",
            ),
            (
                "loop-pages.pdf",
                "application/pdf",
                fixture("loop-pages.pdf"),
                "no_text",
            ),
            // Found by the fuzzer: the PDF parser panics on the page's font.
            (
                "font-panic.pdf",
                "application/pdf",
                fixture("font-panic.pdf"),
                "unreadable",
            ),
            ("one-line.html", "text/html", one_line, "too_large"),
        ];
        for (name, content_type, data, reason) in cases {
            let source = accepted(&api, &[Part::file("file", name, content_type, data)]).await;
            let done = finished(&api, &source).await;
            assert_eq!(
                (done["status"].clone(), done["error"].clone()),
                (json!("failed"), json!(reason)),
                "{name}: {done}"
            );
            assert_eq!(done["credits_used"], json!(0.0), "{name}: {done}");
            // Still answering, with the same process.
            api.ok("GET", "/v1/kb-sources", None).await;
        }
        // 50 MB of one HTML line: over the default limit of 20 MB.
        let huge = format!("<p>{}</p>", "x".repeat(50 * 1024 * 1024)).into_bytes();
        assert_eq!(raw_upload(&server, &api.key, huge, true).await, 413);
        // And the good document after them all.
        let (_, done) = imported(&api, "welcome.txt", "text/plain").await;
        assert_eq!(done["status"], "ready", "{done}");
    }
);

on_both_databases!(
    an_upload_accepted_before_a_stop_is_imported_after_the_restart,
    |db: Db| async move {
        // No job runs in the first process: the upload is only stored.
        let mut env = ENV.to_vec();
        env.push(("FRONTDESK_JOB_CONCURRENCY", "0"));
        let mut server = Server::start(&db, &env).await;
        let api = Platform::new(&server).await;
        let (account_id, key) = (api.account_id.clone(), api.key.clone());
        let source = accepted(
            &api,
            &[Part::file("file", "hours.html", "text/html", fixture("hours.html"))],
        )
        .await;
        assert_eq!(
            api.ok("GET", &format!("/v1/kb-sources/{source}"), None).await["kb_source"]["status"],
            "queued"
        );
        server.kill();

        let server = Server::start(&db, ENV).await;
        let api = Platform::of(&server, &account_id, &key);
        let done = finished(&api, &source).await;
        assert_eq!(
            (done["status"].clone(), done["faqs_created"].clone()),
            (json!("ready"), json!(2)),
            "{done}"
        );
    }
);

/// A local site for estimates: two pages, one missing, one robots.txt disallows, and a sitemap.
async fn site() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let html = |body: String| ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response();
    let sitemap = {
        let base = base.clone();
        move || async move {
            let urls: String = ["hours", "prices"]
                .iter()
                .map(|p| format!("<url><loc>{base}/{p}</loc></url>"))
                .collect();
            format!(
                r#"<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>"#
            )
        }
    };
    let app = Router::new()
        .route(
            "/robots.txt",
            get(|| async { "User-agent: FrontDeskBot\nDisallow: /secret\n" }),
        )
        .route("/sitemap.xml", get(sitemap))
        .route(
            "/hours",
            get(move || async move {
                // "Opening hours" (13) and 97 characters of text: 110.
                html(format!(
                    "<html><body><h1>Opening hours</h1><p>{}</p></body></html>",
                    "b".repeat(97)
                ))
            }),
        )
        .route(
            "/prices",
            get(move || async move {
                // "Prices" (6) and 1,995 characters: 2,001, charged 0.15.
                html(format!(
                    "<html><body><h2>Prices</h2><p>{}</p></body></html>",
                    "a".repeat(1995)
                ))
            }),
        )
        .route(
            "/secret",
            get(move || async move { html("<p>Staff only.</p>".to_owned()) }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

on_both_databases!(estimates_read_pages_without_importing, |db: Db| async move {
    let server = Server::start(&db, ENV).await;
    let api = Platform::new(&server).await;
    let base = site().await;

    let urls: Vec<String> = ["hours", "missing", "secret", "prices"]
        .iter()
        .map(|p| format!("{base}/{p}"))
        .collect();
    let estimate = api
        .ok("POST", "/v1/kb-sources/estimate", Some(json!({"urls": urls})))
        .await;
    assert_eq!(
        (
            estimate["pages"].clone(),
            estimate["characters"].clone(),
            estimate["estimated_credits"].clone()
        ),
        (json!(2), json!(2111), json!(0.2)),
        "{estimate}"
    );
    let errors: Vec<(&str, &str)> = estimate["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["url"].as_str().unwrap().trim_start_matches(&base),
                e["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(errors, [("/missing", "http_error"), ("/secret", "robots_disallowed")]);

    let estimate = api
        .ok(
            "POST",
            "/v1/kb-sources/estimate",
            Some(json!({"sitemap_url": format!("{base}/sitemap.xml")})),
        )
        .await;
    assert_eq!(
        (estimate["pages"].clone(), estimate["estimated_credits"].clone()),
        (json!(2), json!(0.2)),
        "{estimate}"
    );
    // Nothing imported, nothing charged.
    assert_eq!(api.ok("GET", "/v1/kb-sources", None).await["kb_sources"], json!([]));
    assert_eq!(balance(&server, &api.account_id).await, 10.0);

    let too_many: Vec<String> = (0..101).map(|n| format!("{base}/page/{n}")).collect();
    for (body, field) in [
        (json!({"urls": too_many}), "urls"),
        (json!({"urls": ["ftp://example.com/faq"]}), "urls[0]"),
        (json!({}), "urls"),
        (json!({"urls": [format!("{base}/hours")], "agent_id": "x"}), "agent_id"),
    ] {
        let answer = api.send("POST", "/v1/kb-sources/estimate", Some(body.clone())).await;
        assert_invalid(&answer, field, &body.to_string());
    }
});

// A file name is the uploader's: one that reads like a flag is still the document's name.
on_both_databases!(a_document_named_like_a_flag_is_read_by_name, |db: Db| async move {
    let server = Server::start(&db, ENV).await;
    let api = Platform::new(&server).await;
    for name in ["--version.txt", "-rf welcome.txt"] {
        let file = Part::file("file", name, "text/plain", fixture("welcome.txt"));
        let source = accepted(&api, &[file]).await;
        assert_eq!(finished(&api, &source).await["status"], "ready", "{name}");
        assert_eq!(faqs(&api, &source).await[0].0, name);
    }
});

/// How many requests a slow site serves at once, at most, across its listeners.
#[derive(Clone, Default)]
struct Crowd(std::sync::Arc<std::sync::Mutex<(usize, usize)>>);

impl Crowd {
    fn most(&self) -> usize {
        self.0.lock().unwrap().1
    }

    /// A listener on `ip` whose pages each take 400 ms, counted in this crowd; its base URL.
    async fn listen(&self, ip: &str) -> String {
        let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let crowd = self.clone();
        let page = move || {
            let crowd = crowd.clone();
            async move {
                {
                    let mut counts = crowd.0.lock().unwrap();
                    counts.0 += 1;
                    counts.1 = counts.1.max(counts.0);
                }
                tokio::time::sleep(Duration::from_millis(400)).await;
                crowd.0.lock().unwrap().0 -= 1;
                (
                    [(header::CONTENT_TYPE, "text/html")],
                    "<h1>Slow</h1><p>A page that takes a while.</p>",
                )
                    .into_response()
            }
        };
        let app = Router::new().route("/slow/{n}", get(page));
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{ip}:{port}")
    }
}

// An estimate names up to a hundred pages: it reads a few at once, and one server's pages take turns
// however many names reach it.
on_both_databases!(estimates_read_a_few_pages_at_once, |db: Db| async move {
    let server = Server::start(&db, ENV).await;
    let api = Platform::new(&server).await;
    let estimate = |urls: Vec<String>| api.ok("POST", "/v1/kb-sources/estimate", Some(json!({"urls": urls})));

    // One server under two names: two at once (FRONTDESK_IMPORT_HOST_CONCURRENCY), not two per name.
    let one = Crowd::default();
    let base = one.listen("127.0.0.1").await;
    let by_name = base.replace("127.0.0.1", "localhost");
    let urls = (0..8).map(|n| format!("{}/slow/{n}", if n % 2 == 0 { &base } else { &by_name }));
    assert_eq!(estimate(urls.collect()).await["pages"], 8);
    assert!(one.most() <= 2, "one server's slots, not two per name: {}", one.most());

    // Twenty servers: eight at once.
    let many = Crowd::default();
    let mut urls = Vec::new();
    for n in 2..22 {
        urls.push(format!("{}/slow/0", many.listen(&format!("127.0.0.{n}")).await));
    }
    assert_eq!(estimate(urls).await["pages"], 20);
    let most = many.most();
    assert!((2..=8).contains(&most), "{most} pages were read at once");
});

on_both_databases!(an_agency_uploads_for_its_sub_account, |db: Db| async move {
    let server = Server::start(&db, ENV).await;
    let (agency, child) = agency_and_child(&server).await;
    let source = accepted(
        &agency,
        &[
            Part::text("sub_account_id", &child.account_id),
            Part::file("file", "welcome.txt", "text/plain", fixture("welcome.txt")),
        ],
    )
    .await;
    // The child's source, charged to the child.
    assert_eq!(finished(&child, &source).await["status"], "ready");
    assert_eq!(balance(&server, &child.account_id).await, 9.95);
    assert_eq!(agency.ok("GET", "/v1/kb-sources", None).await["kb_sources"], json!([]));
});
