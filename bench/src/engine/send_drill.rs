//! The crash drill on sends (`frontdesk-bench crash-drill --path sends`): clients send 10,000 messages over
//! REST (`POST /v1/contacts/{id}/send-message`, each text unique) to 1,000 contacts of an sms channel whose
//! Twilio is a receiver in this process, while `serve` is killed with SIGKILL several times and restarted at
//! once. Afterwards every accepted send must reach the receiver; the drill reports what was lost, what
//! reached the provider twice (a send on the wire, or answered but not yet recorded, when its process died),
//! every answer of 500 or above other than 503, and how long the service took to accept and to deliver again.

use std::{
    collections::{HashMap, HashSet},
    net::SocketAddr,
    sync::{
        Arc, RwLock,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{Json, Router, body::Bytes, extract::State, http::StatusCode, routing::post};
use sea_orm::Database;

use super::Engine;
use crate::{
    drill::{DrillArgs, Receipts, Tally, kill_and_restart, scalar},
    process::ServerProcess,
    scenarios::Setup,
};

/// Contacts the sends go to, in turn.
const CONTACTS: usize = 1_000;

/// Twilio's Messages API: records the form's `Body`, answers 201 with a message sid.
async fn twilio(State(received): State<Receipts>, body: Bytes) -> (StatusCode, Json<serde_json::Value>) {
    let text = url::form_urlencoded::parse(&body)
        .find(|(name, _)| name == "Body")
        .map(|(_, text)| text.into_owned())
        .unwrap_or_default();
    received.record(text);
    let sid = format!("SM{:032x}", rand::random::<u128>());
    (
        StatusCode::CREATED,
        Json(serde_json::json!({"sid": sid, "status": "queued"})),
    )
}

async fn start_twilio() -> anyhow::Result<(SocketAddr, Receipts)> {
    let received = Receipts::default();
    let app = Router::new()
        .route("/2010-04-01/Accounts/{sid}/Messages.json", post(twilio))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((addr, received))
}

/// What the clients saw.
#[derive(Default)]
struct Answers {
    /// Texts whose send was answered 2xx, and when.
    accepted: Vec<(String, Instant)>,
    /// Answers of 500 or above other than 503, by status.
    server_errors: HashMap<u16, u64>,
}

/// Sends unique texts to the contacts in turn against whichever `serve` is up, until `sends` are accepted.
async fn client(
    serve: Arc<RwLock<Option<SocketAddr>>>,
    key: String,
    contacts: Arc<[String]>,
    (next, accepted, sends): (Arc<AtomicU64>, Arc<AtomicU64>, u64),
) -> Answers {
    let http = crate::knowledge::rest_client();
    let mut answers = Answers::default();
    while accepted.load(Ordering::Relaxed) < sends {
        let Some(addr) = *serve.read().unwrap_or_else(|e| e.into_inner()) else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let n = next.fetch_add(1, Ordering::Relaxed);
        let contact = &contacts[n as usize % contacts.len()];
        let text = format!("drill {n}");
        let answer = http
            .post(format!("http://{addr}/v1/contacts/{contact}/send-message"))
            .header("x-api-key", &key)
            .json(&serde_json::json!({ "text": text }))
            .timeout(Duration::from_secs(5))
            .send()
            .await;
        match answer.map(|a| a.status()) {
            Ok(status) if status.is_success() => {
                accepted.fetch_add(1, Ordering::Relaxed);
                answers.accepted.push((text, Instant::now()));
            }
            Ok(status) => {
                if status.is_server_error() && status != StatusCode::SERVICE_UNAVAILABLE {
                    *answers.server_errors.entry(status.as_u16()).or_default() += 1;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            // The process died under the request, or is not listening yet: no answer to count.
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    answers
}

pub async fn run(setup: &Setup, args: &DrillArgs) -> anyhow::Result<()> {
    let database = setup.database(args.sqlite).await?;
    let (twilio, received) = start_twilio().await?;
    let mut env = setup.env(&database, !args.sqlite);
    env.insert("FRONTDESK_TWILIO_BASE_URL".into(), format!("http://{twilio}"));
    env.insert("FRONTDESK_PUBLIC_URL".into(), super::PUBLIC_URL.into());
    let spawn = || ServerProcess::spawn(&setup.frontdesk, &["serve"], &env, 2);
    let serve = spawn()?;
    let engine = Engine::prepare(&serve, &database, CONTACTS).await?;

    let current = Arc::new(RwLock::new(serve.http));
    let (next, accepted) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let contacts: Arc<[String]> = engine.contact_ids.clone().into();
    let clients: Vec<_> = (0..args.clients)
        .map(|_| {
            let (current, key, contacts) = (current.clone(), engine.key.clone(), contacts.clone());
            tokio::spawn(client(
                current,
                key,
                contacts,
                (next.clone(), accepted.clone(), args.sends),
            ))
        })
        .collect();
    let (serve, last_restart) = kill_and_restart(serve, spawn, &current, |s| s.http, args).await?;
    let mut answers = Answers::default();
    for client in clients {
        let seen = client.await?;
        answers.accepted.extend(seen.accepted);
        for (status, n) in seen.server_errors {
            *answers.server_errors.entry(status).or_default() += n;
        }
    }
    let accepted_after_restart = answers
        .accepted
        .iter()
        .map(|(_, at)| *at)
        .filter(|at| *at >= last_restart)
        .min()
        .map(|at| at - last_restart);
    let texts: HashSet<String> = answers.accepted.into_iter().map(|(text, _)| text).collect();

    // Until every accepted send has reached the receiver and no delivery is left to run, so that the
    // sends a kill cut off and ran again are counted too.
    let db = Database::connect(&database).await?;
    const UNSETTLED: &str =
        "SELECT COUNT(*) FROM jobs WHERE kind = 'deliver_message' AND status IN ('pending', 'running')";
    let started = Instant::now();
    loop {
        let settled = received.missing(&texts) == 0 && scalar(&db, UNSETTLED).await? == 0;
        if settled || started.elapsed() > Duration::from_secs(180) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let Tally {
        lost,
        twice,
        unacknowledged: unanswered,
        last_after_restart: last_receipt,
    } = received.tally(&texts, last_restart);
    let failed = scalar(
        &db,
        "SELECT COUNT(*) FROM jobs WHERE kind = 'deliver_message' AND status = 'failed'",
    )
    .await?;
    db.close().await?;
    engine.db.close().await?;
    drop(serve);
    setup.drop_database(&database).await?;

    let store = if args.sqlite { "SQLite" } else { "PostgreSQL + Redis" };
    let server_errors: u64 = answers.server_errors.values().sum();
    println!(
        "crash drill, sends ({store}): {} SIGKILLs in {:.1} s, {} clients, {} sends to {CONTACTS} contacts",
        args.kills, args.window, args.clients, args.sends
    );
    println!("| figure | value |\n|---|---|");
    println!("| sends accepted | {} |", texts.len());
    println!("| delivered to the provider | {} |", texts.len() - lost);
    println!("| lost (accepted, never delivered) | {lost} |");
    println!(
        "| delivered twice or more | {twice} ({:.2}%) |",
        100.0 * twice as f64 / texts.len().max(1) as f64
    );
    println!("| delivered, send not answered (killed before the answer) | {unanswered} |");
    println!("| deliveries failed | {failed} |");
    println!(
        "| answers 5xx other than 503 | {server_errors} {:?} |",
        answers.server_errors
    );
    println!(
        "| first send accepted after the last restart | {} |",
        accepted_after_restart.map_or("none".to_owned(), |d| format!("{:.2} s", d.as_secs_f64()))
    );
    println!(
        "| last receipt after the last restart | {:.2} s |",
        last_receipt.as_secs_f64()
    );
    anyhow::ensure!(lost == 0, "{lost} accepted sends never reached the provider");
    anyhow::ensure!(
        server_errors == 0,
        "answers of 5xx other than 503: {:?}",
        answers.server_errors
    );
    Ok(())
}
