//! The drill on knowledge imports (`frontdesk-bench crash-drill --path import`): a bulk import of 100 pages
//! of a local site, each page answered after a pause so that the import spans the fault, while the service
//! goes through one (`faults`: by default SIGKILLs of `serve`). A client reads the source's progress the
//! whole time. Afterwards the source must be `ready` with every page in the knowledge base once: each
//! page's sections stored once, each page charged once, the source's counters and its FAQ vectors matching
//! what is stored. The drill reports pages fetched again (what a crash costs the site), answers of 500 or
//! above other than 503, and how long after the fault the import was ready.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{
        Arc, RwLock,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use sea_orm::Database;

use crate::{
    drill::{DrillArgs, Receipts, Tally, scalar, store, tear_down},
    faults::Stage,
    knowledge::{Api, model_folder, rest_client, site},
    process::ServerProcess,
    scenarios::funded_account,
};

/// The most pages one bulk import reads.
const MAX_PAGES: u64 = 100;
/// How long the site takes to answer each page: 100 pages take 10 s or more, longer than the fault.
const PAGE_PAUSE: Duration = Duration::from_millis(100);
/// Sections on each of the site's pages.
const SECTIONS_PER_PAGE: i64 = 3;

/// What the client reading the source's progress saw.
#[derive(Default)]
struct Watched {
    /// When it first read the source `ready`.
    ready_at: Option<Instant>,
    /// Its status at the last read.
    status: String,
    /// Answers 503.
    unavailable: u64,
    /// Answers of 500 or above other than 503, by status.
    server_errors: HashMap<u16, u64>,
}

/// Reads the source from whichever `serve` is up every 100 ms until the fault is `over` and the import
/// has ended, or five minutes after the fault.
async fn watch(serve: Arc<RwLock<Option<SocketAddr>>>, key: String, source: String, over: Arc<AtomicBool>) -> Watched {
    let http = rest_client();
    let mut watched = Watched::default();
    let mut over_since: Option<Instant> = None;
    loop {
        if over.load(Ordering::Relaxed) {
            let since = *over_since.get_or_insert_with(Instant::now);
            let ended = matches!(watched.status.as_str(), "ready" | "failed");
            if ended || since.elapsed() > Duration::from_secs(300) {
                return watched;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let Some(addr) = *serve.read().unwrap_or_else(|e| e.into_inner()) else {
            continue;
        };
        let answer = http
            .get(format!("http://{addr}/v1/kb-sources/{source}"))
            .bearer_auth(&key)
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        let Ok(answer) = answer else { continue }; // the process was killed under it
        match answer.status().as_u16() {
            503 => watched.unavailable += 1,
            status @ 500.. => *watched.server_errors.entry(status).or_default() += 1,
            _ => {
                let body: serde_json::Value = answer.json().await.unwrap_or_default();
                watched.status = body["kb_source"]["status"].as_str().unwrap_or_default().to_owned();
                if watched.status == "ready" && watched.ready_at.is_none() {
                    watched.ready_at = Some(Instant::now());
                }
            }
        }
    }
}

pub async fn run(mut stage: Stage, args: &DrillArgs) -> anyhow::Result<()> {
    let pages = args.sends.unwrap_or(MAX_PAGES).clamp(1, MAX_PAGES);
    let setup = &stage.setup.clone();
    let database = setup.database(args.sqlite).await?;
    let fetched = Receipts::default();
    let site = site(PAGE_PAUSE, fetched.clone()).await?;
    let model = model_folder();
    let mut env = setup.env(&database, !args.sqlite);
    env.insert("FRONTDESK_ALLOW_PRIVATE_URLS".into(), "true".into());
    if let Some(model) = &model {
        env.insert("FRONTDESK_EMBEDDING_MODEL".into(), model.clone());
    }
    let spawn = || ServerProcess::spawn(&setup.frontdesk, &["serve"], &env, 2);
    let serve = spawn()?;
    let (_, key) = funded_account(serve.grpc.expect("grpc"), "1000").await?;
    let api = Api::new(&serve, &key);
    let agent = api.agent().await?;
    let source = api.import_site(site, usize::try_from(pages)?, &agent).await?;
    let accepted_at = Instant::now();

    let current = Arc::new(RwLock::new(serve.http));
    let over = Arc::new(AtomicBool::new(false));
    let watcher = tokio::spawn(watch(current.clone(), key, source.clone(), over.clone()));
    let (serve, (_, fault_ended)) = stage.disrupt(serve, spawn, &current, |s| s.http, args).await?;
    over.store(true, Ordering::Relaxed);
    let watched = watcher.await?;

    let db = Database::connect(&database).await?;
    let done = scalar(
        &db,
        &format!("SELECT COUNT(*) FROM kb_source_pages WHERE source_id = '{source}' AND status = 'done'"),
    )
    .await?;
    let faqs = scalar(
        &db,
        &format!("SELECT COUNT(*) FROM source_faqs WHERE source_id = '{source}'"),
    )
    .await?;
    // A section's position is its page's times 1,000 plus its place on the page: one page read twice
    // repeats its positions, one never stored has none.
    let stored_twice = scalar(
        &db,
        &format!("SELECT COUNT(*) - COUNT(DISTINCT position) FROM source_faqs WHERE source_id = '{source}'"),
    )
    .await?;
    let without_faqs = scalar(
        &db,
        &format!(
            "SELECT COUNT(*) FROM kb_source_pages p WHERE p.source_id = '{source}' AND NOT EXISTS \
         (SELECT 1 FROM source_faqs f WHERE f.source_id = p.source_id AND f.position / 1000 = p.position)"
        ),
    )
    .await?;
    let counted = scalar(
        &db,
        &format!("SELECT CAST(faqs_created AS BIGINT) FROM kb_sources WHERE id = '{source}'"),
    )
    .await?;
    let charges = scalar(
        &db,
        &format!("SELECT COUNT(*) FROM credit_ledger WHERE reason = 'knowledge import {source}'"),
    )
    .await?;
    let charged = scalar(&db, &format!(
        "SELECT CAST(COALESCE(-SUM(delta_milli), 0) AS BIGINT) FROM credit_ledger WHERE reason = 'knowledge import {source}'"
    ))
    .await?;
    let pages_cost = scalar(
        &db,
        &format!(
            "SELECT CAST(COALESCE(SUM(credits_milli), 0) AS BIGINT) FROM kb_source_pages WHERE source_id = '{source}'"
        ),
    )
    .await?;
    let vectors = scalar(
        &db,
        &format!("SELECT COUNT(*) FROM faq_vectors WHERE source_id = '{source}'"),
    )
    .await?;
    let expected_paths: std::collections::HashSet<String> = (0..pages).map(|n| format!("/help/{n}")).collect();
    let Tally {
        twice: fetched_again, ..
    } = fetched.tally(&expected_paths, fault_ended);
    tear_down(setup, &database, [db], serve).await?;

    let ready_after = watched.ready_at.map(|at| {
        let seconds = |since: Instant| at.saturating_duration_since(since).as_secs_f64();
        (seconds(fault_ended), seconds(accepted_at))
    });
    let pages = i64::try_from(pages)?;
    println!(
        "drill, import ({}): {}, {pages} pages, each answered after {} ms",
        store(args.sqlite),
        args.fault.describe(args.kills, args.window, args.outage),
        PAGE_PAUSE.as_millis()
    );
    println!("| figure | value |\n|---|---|");
    println!("| the source's status at the end | {} |", watched.status);
    println!("| pages read | {done} of {pages} |");
    println!("| pages without their sections (lost) | {without_faqs} |");
    println!("| sections stored twice or more | {stored_twice} |");
    println!(
        "| sections stored, the source's count, expected | {faqs}, {counted}, {} |",
        pages * SECTIONS_PER_PAGE
    );
    println!("| charges, pages charged | {charges}, {done} |");
    println!("| credits charged, the pages' cost (milli) | {charged}, {pages_cost} |");
    match model {
        Some(_) => println!("| FAQ vectors, sections | {vectors}, {faqs} |"),
        None => println!("| FAQ vectors, sections | no embedding model, {faqs} |"),
    }
    println!(
        "| pages fetched again | {fetched_again} ({:.1}%) |",
        100.0 * fetched_again as f64 / pages as f64
    );
    println!("| answers 503 | {} |", watched.unavailable);
    println!(
        "| answers 5xx other than 503 | {} {:?} |",
        watched.server_errors.values().sum::<u64>(),
        watched.server_errors
    );
    match ready_after {
        Some((fault, accepted)) => {
            println!("| ready after the fault ended | {fault:.2} s |");
            println!("| ready after the import was accepted | {accepted:.2} s |");
        }
        None => println!("| ready after the fault ended | never |"),
    }
    anyhow::ensure!(watched.status == "ready", "the import ended {:?}", watched.status);
    anyhow::ensure!(
        done == pages && without_faqs == 0 && stored_twice == 0 && faqs == pages * SECTIONS_PER_PAGE,
        "pages lost or stored twice"
    );
    anyhow::ensure!(
        counted == faqs,
        "the source counts {counted} sections for {faqs} stored"
    );
    anyhow::ensure!(
        charges == done && charged == pages_cost,
        "{charges} charges of {charged} milli-credits for {done} pages costing {pages_cost}"
    );
    anyhow::ensure!(
        model.is_none() || vectors == faqs,
        "{vectors} vectors for {faqs} sections"
    );
    anyhow::ensure!(watched.server_errors.is_empty(), "answers 5xx other than 503");
    Ok(())
}
