//! Knowledge: a bulk import of 100 local pages (pages per second, the vectors made before the
//! source is ready included), search over an agent with 10,000 FAQs sequentially by one client (fused,
//! the query's embedding included, and lexical only), and the embedding model's own speed on one core in
//! process (sections per second at import, and one query's embedding: the floor of a fused search).

use std::{collections::BTreeMap, net::SocketAddr, path::Path, time::Duration, time::Instant};

use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng, rngs::StdRng};
use sea_orm::{ConnectionTrait, Database, Statement};
use serde_json::{Value, json};

use crate::{
    drill::Receipts,
    load::{Outcome, Shape},
    process::ServerProcess,
    scenarios::{Measured, Setup, funded_account, measure, push_row},
};

pub const IMPORT: &str = "kb bulk import: 100 local pages of 3 sections, vectors included (SQLite)";
pub const SEARCH_FUSED: &str = "kb search: 10,000 FAQs, fused, query embedding included (SQLite, 1 client)";
pub const SEARCH_LEXICAL: &str = "kb search: 10,000 FAQs, lexical only (SQLite, 1 client)";

/// The embedding model measured alone, in a process of its own limited to one core.
#[derive(Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct ModelSpeed {
    pub sections_per_second: f64,
    pub query_p50_ms: f64,
    pub query_p99_ms: f64,
}

pub struct Run {
    pub measured: Vec<Measured>,
    pub model: Option<ModelSpeed>,
    /// How long the `faq_embed` job took to embed the 10,000 FAQs (both cores).
    pub vectors_in: Option<Duration>,
}

/// The model folder: `FRONTDESK_EMBEDDING_MODEL`, else `models/all-MiniLM-L6-v2` of the working directory.
pub(crate) fn model_folder() -> Option<String> {
    let folder = std::env::var("FRONTDESK_EMBEDDING_MODEL").unwrap_or_else(|_| "models/all-MiniLM-L6-v2".to_owned());
    Path::new(&folder).join("model.safetensors").is_file().then(|| {
        std::fs::canonicalize(&folder)
            .map(|p| p.display().to_string())
            .unwrap_or(folder)
    })
}

pub async fn run(setup: &Setup, shape: Shape, wanted: impl Fn(&str) -> bool) -> anyhow::Result<Run> {
    let mut run = Run {
        measured: Vec::new(),
        model: None,
        vectors_in: None,
    };
    if !(wanted(IMPORT) || wanted(SEARCH_FUSED) || wanted(SEARCH_LEXICAL)) {
        return Ok(run);
    }
    let Some(model) = model_folder() else {
        println!("knowledge: no embedding model (scripts/fetch-model): its scenarios are skipped");
        return Ok(run);
    };
    let smoke = shape.smoke();
    run.model = Some(model_speed(setup, &model, smoke)?);
    if wanted(IMPORT) {
        run.measured
            .push(bulk_import(setup, &model, if smoke { 10 } else { 100 }).await?);
    }
    if wanted(SEARCH_FUSED) || wanted(SEARCH_LEXICAL) {
        let faqs = if smoke { 100 } else { 10_000 };
        let (measured, vectors_in) = search(setup, &model, faqs, shape).await?;
        run.measured.extend(measured);
        run.vectors_in = Some(vectors_in);
    }
    Ok(run)
}

/// `frontdesk-bench embed-speed`: the model's speed in this process, printed as JSON (run by `run` with
/// `RAYON_NUM_THREADS=1`, so on one core).
pub fn embed_speed(model: &Path, sections: usize) -> anyhow::Result<()> {
    use frontdesk_domain::knowledge::{
        embeddings::{Embedder, LocalModel},
        retrieval::embedding_texts,
    };
    let model = LocalModel::load(model)?;
    let mut rng = StdRng::seed_from_u64(18);
    // Every vector of each section: a long one has a vector per passage.
    let mut texts: Vec<String> = (0..sections)
        .flat_map(|_| {
            let (q, a) = faq(&mut rng);
            embedding_texts(&q, &a)
        })
        .collect();
    texts.sort_by_key(String::len);
    let started = Instant::now();
    for batch in texts.chunks(16) {
        let batch: Vec<&str> = batch.iter().map(String::as_str).collect();
        model.embed(&batch)?;
    }
    let sections_per_second = sections as f64 / started.elapsed().as_secs_f64();
    let mut latency = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    for _ in 0..200 {
        let q = query(&mut rng);
        let at = Instant::now();
        model.embed(&[q.as_str()])?;
        latency.record(at.elapsed().as_micros().max(1) as u64)?;
    }
    let speed = ModelSpeed {
        sections_per_second,
        query_p50_ms: latency.value_at_quantile(0.5) as f64 / 1000.0,
        query_p99_ms: latency.value_at_quantile(0.99) as f64 / 1000.0,
    };
    println!("{}", serde_json::to_string(&speed)?);
    Ok(())
}

fn model_speed(setup: &Setup, model: &str, smoke: bool) -> anyhow::Result<ModelSpeed> {
    let output = std::process::Command::new(&setup.bench)
        .args([
            "embed-speed",
            "--model",
            model,
            "--sections",
            if smoke { "32" } else { "256" },
        ])
        .env("RAYON_NUM_THREADS", "1")
        .output()?;
    anyhow::ensure!(
        output.status.success(),
        "embed-speed failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line = String::from_utf8_lossy(&output.stdout);
    Ok(serde_json::from_str(line.trim())?)
}

const TOPICS: &[&str] = &[
    "refund",
    "invoice",
    "delivery",
    "password",
    "account",
    "subscription",
    "warranty",
    "parking",
    "booking",
    "appointment",
    "gift card",
    "discount",
    "return",
    "exchange",
    "order",
    "payment",
    "card",
    "receipt",
    "voucher",
    "membership",
    "newsletter",
    "shipping",
    "pickup",
    "repair",
    "installation",
    "cancellation",
    "upgrade",
    "plan",
    "contract",
    "deposit",
    "loyalty points",
    "opening hours",
    "address",
    "phone number",
    "email",
    "support",
];
const VERBS: &[&str] = &[
    "change", "cancel", "get", "update", "check", "pay for", "track", "renew", "transfer", "extend", "reset",
    "confirm", "book", "return", "replace", "find", "print", "share", "download", "close",
];
const PLACES: &[&str] = &[
    "online",
    "in the shop",
    "by phone",
    "in the app",
    "abroad",
    "on weekends",
    "for a business",
    "for a child",
    "after 30 days",
    "without an account",
    "as a student",
    "in Germany",
    "for a group",
    "at the airport",
];

fn pick<'a>(rng: &mut StdRng, words: &[&'a str]) -> &'a str {
    words[rng.random_range(0..words.len())]
}

/// A synthetic FAQ: a question and a few sentences of answer.
fn faq(rng: &mut StdRng) -> (String, String) {
    let (verb, topic, place) = (pick(rng, VERBS), pick(rng, TOPICS), pick(rng, PLACES));
    let question = format!("How do I {verb} my {topic} {place}?");
    let answer = format!(
        "You can {verb} your {topic} {place} from your account page. If that does not work, write to support \
         with your {} number and we answer within {} hours. Fees for the {} may apply {}.",
        pick(rng, TOPICS),
        rng.random_range(2..48),
        pick(rng, TOPICS),
        pick(rng, PLACES)
    );
    (question, answer)
}

pub fn query(rng: &mut StdRng) -> String {
    format!(
        "can I {} the {} {}",
        pick(rng, VERBS),
        pick(rng, TOPICS),
        pick(rng, PLACES)
    )
}

/// A client of the platform API (the process's TLS provider installed first, as reqwest needs one).
pub fn rest_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

pub(crate) struct Api {
    client: reqwest::Client,
    base: String,
    key: String,
}

impl Api {
    pub(crate) fn new(server: &ServerProcess, key: &str) -> Self {
        Self {
            client: rest_client(),
            base: format!("http://{}", server.http.expect("http")),
            key: key.to_owned(),
        }
    }

    pub(crate) async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.key);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer = request.send().await?;
        let status = answer.status();
        let body: Value = answer.json().await?;
        anyhow::ensure!(status.is_success(), "{path}: {status} {body}");
        Ok(body)
    }

    pub(crate) async fn agent(&self) -> anyhow::Result<String> {
        let agent = self
            .call(reqwest::Method::POST, "/v1/agents", Some(json!({"name": "Bench desk"})))
            .await?;
        Ok(agent["agent"]["id"].as_str().unwrap_or_default().to_owned())
    }

    /// A bulk import of the first `pages` pages of `site` (`site`'s help pages) for `agent`; its source id.
    pub(crate) async fn import_site(&self, site: SocketAddr, pages: usize, agent: &str) -> anyhow::Result<String> {
        let urls: Vec<String> = (0..pages).map(|n| format!("http://{site}/help/{n}")).collect();
        let body = json!({"urls": urls, "agent_id": agent});
        let accepted = self
            .call(reqwest::Method::POST, "/v1/kb-sources/bulk-import", Some(body))
            .await?;
        let source = accepted["source_id"].as_str().unwrap_or_default().to_owned();
        anyhow::ensure!(!source.is_empty(), "an import accepted without a source id: {accepted}");
        Ok(source)
    }
}

pub(crate) fn serve(setup: &Setup, database: &str, extra: &[(&str, &str)]) -> anyhow::Result<ServerProcess> {
    let mut env = setup.env(database, false);
    for (k, v) in extra {
        env.insert((*k).into(), (*v).into());
    }
    ServerProcess::spawn(&setup.frontdesk, &["serve"], &env, 2)
}

/// A local site of help pages (`/help/{n}`), three headed sections each: each page answered after `pause`,
/// and every fetch recorded in `fetched` by its path.
pub(crate) async fn site(pause: Duration, fetched: Receipts) -> anyhow::Result<SocketAddr> {
    use axum::{Router, extract::Path as UrlPath, extract::State, response::Html, routing::get};
    let page = move |UrlPath(n): UrlPath<usize>, State(fetched): State<Receipts>| async move {
        fetched.record(format!("/help/{n}"));
        tokio::time::sleep(pause).await;
        let mut rng = StdRng::seed_from_u64(n as u64);
        let mut body = format!("<html><head><title>Help page {n}</title></head><body><nav>Home | Help</nav><main>");
        for _ in 0..3 {
            let (q, a) = faq(&mut rng);
            body.push_str(&format!("<h2>{q}</h2><p>{a}</p><p>{a}</p>"));
        }
        body.push_str("</main><footer>(c) Bench shop</footer></body></html>");
        Html(body)
    };
    let app = Router::new().route("/help/{n}", get(page)).with_state(fetched);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(addr)
}

async fn bulk_import(setup: &Setup, model: &str, pages: usize) -> anyhow::Result<Measured> {
    let site = site(Duration::ZERO, Receipts::default()).await?;
    let database = setup.sqlite_database()?;
    let server = serve(
        setup,
        &database,
        &[
            ("FRONTDESK_EMBEDDING_MODEL", model),
            ("FRONTDESK_ALLOW_PRIVATE_URLS", "true"),
        ],
    )?;
    let (_, key) = funded_account(server.grpc.expect("grpc"), "100000").await?;
    let api = Api::new(&server, &key);
    let agent = api.agent().await?;
    let drive = async {
        let started = Instant::now();
        let id = api.import_site(site, pages, &agent).await?;
        let mut errors = BTreeMap::new();
        loop {
            let s = api
                .call(reqwest::Method::GET, &format!("/v1/kb-sources/{id}"), None)
                .await?;
            match s["kb_source"]["status"].as_str() {
                Some("ready") => break,
                Some("failed") => {
                    errors.insert(format!("failed: {}", s["kb_source"]["error"]), 1);
                    break;
                }
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(600),
                "the import did not finish"
            );
        }
        let elapsed = started.elapsed();
        let mut latency_us = Histogram::new_with_bounds(1, 60_000_000, 3)?;
        latency_us.record((elapsed.as_micros() / pages as u128).max(1) as u64)?;
        Ok(Outcome {
            requests: pages as u64,
            elapsed,
            latency_us,
            errors,
        })
    };
    measure(IMPORT, &[&server], drive).await
}

/// Writes `n` FAQs of the agent straight into the tables (as fast as the database takes them).
pub async fn seed_faqs(database: &str, account: &str, agent: &str, n: usize) -> anyhow::Result<()> {
    let db = Database::connect(database).await?;
    let mut rng = StdRng::seed_from_u64(10_000);
    let now = chrono::Utc::now();
    for start in (0..n).step_by(400) {
        let mut sql = String::from(
            "INSERT INTO agent_faqs (id, account_id, agent_id, question, answer, created_at, updated_at) VALUES ",
        );
        let mut values: Vec<sea_orm::Value> = Vec::new();
        for i in start..(start + 400).min(n) {
            let (q, a) = faq(&mut rng);
            push_row(&mut sql, values.len(), 7);
            values.extend([
                format!("faq_bench{i:011}").into(),
                account.into(),
                agent.into(),
                q.into(),
                a.into(),
                now.into(),
                now.into(),
            ]);
        }
        db.execute_raw(Statement::from_sql_and_values(db.get_database_backend(), sql, values))
            .await?;
    }
    db.close().await?;
    Ok(())
}

async fn vectors(database: &str) -> anyhow::Result<i64> {
    let db = Database::connect(database).await?;
    let row = db
        .query_one_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT COUNT(*) FROM faq_vectors",
        ))
        .await?
        .ok_or_else(|| anyhow::anyhow!("no count"))?;
    let count: i64 = row.try_get_by_index(0)?;
    db.close().await?;
    Ok(count)
}

/// One client asking one question after another for the measured time, each a new question.
async fn searches(api: &Api, agent: &str, shape: Shape) -> anyhow::Result<Outcome> {
    let mut rng = StdRng::seed_from_u64(99);
    let path = format!("/v1/agents/{agent}/search");
    let warm_until = Instant::now() + shape.warmup;
    while Instant::now() < warm_until {
        api.call(
            reqwest::Method::POST,
            &path,
            Some(json!({"query": query(&mut rng), "limit": 5})),
        )
        .await?;
    }
    let mut latency_us = Histogram::new_with_bounds(1, 60_000_000, 3)?;
    let mut errors = BTreeMap::new();
    let mut requests = 0;
    let started = Instant::now();
    while started.elapsed() < shape.duration {
        let body = json!({"query": query(&mut rng), "limit": 5});
        let at = Instant::now();
        match api.call(reqwest::Method::POST, &path, Some(body)).await {
            Ok(answer) if answer["results"].as_array().is_some_and(|r| !r.is_empty()) => {}
            Ok(_) => *errors.entry("no result".to_owned()).or_default() += 1,
            Err(_) => *errors.entry("error".to_owned()).or_default() += 1,
        }
        latency_us.record(at.elapsed().as_micros().max(1) as u64)?;
        requests += 1;
    }
    Ok(Outcome {
        requests,
        elapsed: started.elapsed(),
        latency_us,
        errors,
    })
}

async fn search(setup: &Setup, model: &str, faqs: usize, shape: Shape) -> anyhow::Result<(Vec<Measured>, Duration)> {
    let database = setup.sqlite_database()?;
    let server = serve(setup, &database, &[("FRONTDESK_EMBEDDING_MODEL", model)])?;
    let (account_id, key) = funded_account(server.grpc.expect("grpc"), "100000").await?;
    let api = Api::new(&server, &key);
    let agent = api.agent().await?;
    seed_faqs(&database, &account_id, &agent, faqs).await?;
    // The first search finds the FAQs without vectors and hands them to the `faq_embed` job.
    let started = Instant::now();
    let path = format!("/v1/agents/{agent}/search");
    api.call(reqwest::Method::POST, &path, Some(json!({"query": "refund"})))
        .await?;
    while vectors(&database).await? < faqs as i64 {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(1800),
            "the FAQ vectors were not made"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let vectors_in = started.elapsed();
    let mut measured = vec![measure(SEARCH_FUSED, &[&server], searches(&api, &agent, shape)).await?];
    drop(server);
    let server = serve(setup, &database, &[("FRONTDESK_EMBEDDING_MODEL", "none")])?;
    let api = Api::new(&server, &key);
    measured.push(measure(SEARCH_LEXICAL, &[&server], searches(&api, &agent, shape)).await?);
    Ok((measured, vectors_in))
}

/// The knowledge figures against the goals.
pub fn targets(results: &[Measured], run: &Run) -> String {
    let find = |name: &str| results.iter().find(|r| r.name == name);
    let p99 = |name: &str| find(name).map(|r| r.outcome.latency_us.value_at_quantile(0.99) as f64 / 1000.0);
    let mut out = String::from("| knowledge target | figure | goal | met |\n|---|---:|---|---|\n");
    let mut row = |what: &str, figure: String, goal: &str, met: bool| {
        out.push_str(&format!(
            "| {what} | {figure} | {goal} | {} |\n",
            if met { "yes" } else { "NO" }
        ));
    };
    if let Some(import) = find(IMPORT) {
        let rate = import.outcome.per_second();
        row(
            "bulk import, 100 local pages",
            format!("{rate:.1} pages/s"),
            ">= 20 pages/s",
            rate >= 20.0,
        );
    }
    if let Some(p) = p99(SEARCH_FUSED) {
        row(
            "search, 10,000 FAQs, fused, query embedding included: p99",
            format!("{p:.2} ms"),
            "< 15 ms",
            p < 15.0,
        );
    }
    if let Some(p) = p99(SEARCH_LEXICAL) {
        row(
            "search, 10,000 FAQs, lexical only: p99",
            format!("{p:.2} ms"),
            "< 5 ms",
            p < 5.0,
        );
    }
    if let Some(speed) = run.model {
        row(
            "embedding at import, one core (no goal set)",
            format!("{:.0} sections/s", speed.sections_per_second),
            "-",
            true,
        );
        row(
            "limit: one query's embedding alone, one core, p50 / p99",
            format!("{:.2} / {:.2} ms", speed.query_p50_ms, speed.query_p99_ms),
            "-",
            true,
        );
    }
    if let Some(took) = run.vectors_in {
        row(
            "faq_embed job: 10,000 FAQs' vectors (both cores)",
            format!("{:.0} s", took.as_secs_f64()),
            "-",
            true,
        );
    }
    out
}
