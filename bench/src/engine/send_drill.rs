//! The drill on sends (`frontdesk-bench crash-drill --path sends`): clients send at least 10,000 messages
//! over REST (`POST /v1/contacts/{id}/send-message`, each text unique) to 1,000 contacts of an sms channel
//! whose Twilio is a receiver in this process, while the service goes through a fault (`faults`: SIGKILLs
//! of `serve`, Redis or PostgreSQL down, the provider failing) and until it is over. Afterwards every
//! accepted send must reach the receiver; the drill reports what was lost, what reached the provider twice
//! (a send on the wire, or answered but not yet recorded, when its process died), every answer of 500 or
//! above other than 503, and how long the service took to accept and to deliver again.

use std::{
    collections::{HashMap, HashSet},
    net::SocketAddr,
    sync::{
        Arc, RwLock,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{Json, Router, body::Bytes, extract::State, http::StatusCode, routing::post};
use sea_orm::Database;

use super::Engine;
use crate::{
    drill::{DrillArgs, Receipts, Tally, scalar, store, tear_down},
    faults::{Provider, ProviderSwitch, Stage},
    process::ServerProcess,
};

/// Contacts the sends go to, in turn.
const CONTACTS: usize = 1_000;

/// What the drill's Twilio received: each message by its text, and by the number it went to.
#[derive(Clone, Default)]
pub(super) struct Received {
    pub texts: Receipts,
    pub recipients: Receipts,
}

/// Twilio's Messages API: records the form's `Body` and `To`, answers 201 with a message sid; while the switch
/// says so, answers Twilio's 500 or never answers, recording nothing.
async fn twilio(
    State((received, switch)): State<(Received, ProviderSwitch)>,
    body: Bytes,
) -> (StatusCode, Json<serde_json::Value>) {
    match switch.get() {
        Provider::Answers => {}
        Provider::Fails => {
            let error = serde_json::json!({"code": 20500, "message": "Internal Server Error", "status": 500});
            return (StatusCode::INTERNAL_SERVER_ERROR, Json(error));
        }
        Provider::Hangs => std::future::pending::<()>().await,
    }
    for (name, value) in url::form_urlencoded::parse(&body) {
        match &*name {
            "Body" => received.texts.record(value.into_owned()),
            "To" => received.recipients.record(value.into_owned()),
            _ => {}
        }
    }
    let sid = format!("SM{:032x}", rand::random::<u128>());
    (
        StatusCode::CREATED,
        Json(serde_json::json!({"sid": sid, "status": "queued"})),
    )
}

pub(super) async fn start_twilio(switch: ProviderSwitch) -> anyhow::Result<(SocketAddr, Received)> {
    let received = Received::default();
    let app = Router::new()
        .route("/2010-04-01/Accounts/{sid}/Messages.json", post(twilio))
        .with_state((received.clone(), switch));
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
    /// Answers 503.
    unavailable: u64,
    /// Requests that got no answer within `ANSWER_WITHIN`.
    unanswered: u64,
    /// The longest a request waited for its answer.
    slowest: Duration,
}

/// How long a client waits for an answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// Sends unique texts to the contacts in turn against whichever `serve` is up, until `sends` are accepted
/// and the fault is `over`.
async fn client(
    serve: Arc<RwLock<Option<SocketAddr>>>,
    key: String,
    contacts: Arc<[String]>,
    (next, accepted, sends, over): (Arc<AtomicU64>, Arc<AtomicU64>, u64, Arc<AtomicBool>),
) -> Answers {
    let http = crate::knowledge::rest_client();
    let mut answers = Answers::default();
    while accepted.load(Ordering::Relaxed) < sends || !over.load(Ordering::Relaxed) {
        let Some(addr) = *serve.read().unwrap_or_else(|e| e.into_inner()) else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let n = next.fetch_add(1, Ordering::Relaxed);
        let contact = &contacts[n as usize % contacts.len()];
        let text = format!("drill {n}");
        let asked = Instant::now();
        let answer = http
            .post(format!("http://{addr}/v1/contacts/{contact}/send-message"))
            .header("x-api-key", &key)
            .json(&serde_json::json!({ "text": text }))
            .timeout(ANSWER_WITHIN)
            .send()
            .await;
        if answer.is_ok() {
            answers.slowest = answers.slowest.max(asked.elapsed());
        }
        match answer.map(|a| a.status()) {
            Ok(status) if status.is_success() => {
                accepted.fetch_add(1, Ordering::Relaxed);
                answers.accepted.push((text, Instant::now()));
            }
            Ok(status) => {
                if status == StatusCode::SERVICE_UNAVAILABLE {
                    answers.unavailable += 1;
                } else if status.is_server_error() {
                    *answers.server_errors.entry(status.as_u16()).or_default() += 1;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            // The process died under the request, is not listening yet, or held it past its time.
            Err(err) => {
                if err.is_timeout() {
                    answers.unanswered += 1;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    answers
}

pub async fn run(mut stage: Stage, args: &DrillArgs) -> anyhow::Result<()> {
    let setup = &stage.setup.clone();
    let database = setup.database(args.sqlite).await?;
    let (twilio, received) = start_twilio(stage.provider.clone()).await?;
    let received = received.texts;
    let mut env = setup.env(&database, !args.sqlite);
    env.insert("FRONTDESK_TWILIO_BASE_URL".into(), format!("http://{twilio}"));
    env.insert("FRONTDESK_PUBLIC_URL".into(), super::PUBLIC_URL.into());
    let spawn = || ServerProcess::spawn(&setup.frontdesk, &["serve"], &env, 2);
    let serve = spawn()?;
    let engine = Engine::prepare(&serve, &database, CONTACTS).await?;

    let current = Arc::new(RwLock::new(serve.http));
    let (next, accepted) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let over = Arc::new(AtomicBool::new(false));
    let sends = args.sends.unwrap_or(10_000);
    let contacts: Arc<[String]> = engine.contact_ids.clone().into();
    let clients: Vec<_> = (0..args.clients)
        .map(|_| {
            let (current, key, contacts) = (current.clone(), engine.key.clone(), contacts.clone());
            tokio::spawn(client(
                current,
                key,
                contacts,
                (next.clone(), accepted.clone(), sends, over.clone()),
            ))
        })
        .collect();
    let (serve, (fault_began, fault_ended)) = stage.disrupt(serve, spawn, &current, |s| s.http, args).await?;
    over.store(true, Ordering::Relaxed);
    let mut answers = Answers::default();
    for client in clients {
        let seen = client.await?;
        answers.accepted.extend(seen.accepted);
        for (status, n) in seen.server_errors {
            *answers.server_errors.entry(status).or_default() += n;
        }
        answers.unavailable += seen.unavailable;
        answers.unanswered += seen.unanswered;
        answers.slowest = answers.slowest.max(seen.slowest);
    }
    let accepted_during = answers
        .accepted
        .iter()
        .filter(|(_, at)| *at >= fault_began && *at < fault_ended)
        .count();
    let accepted_before_end: HashSet<String> = answers
        .accepted
        .iter()
        .filter(|(_, at)| *at < fault_ended)
        .map(|(text, _)| text.clone())
        .collect();
    let accepted_after_fault = answers
        .accepted
        .iter()
        .map(|(_, at)| *at)
        .filter(|at| *at >= fault_ended)
        .min()
        .map(|at| at - fault_ended);
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
        last_after_fault: last_receipt,
    } = received.tally(&texts, fault_ended);
    let caught_up = received.last_receipt_after(&accepted_before_end, fault_ended);
    let failed = scalar(
        &db,
        "SELECT COUNT(*) FROM jobs WHERE kind = 'deliver_message' AND status = 'failed'",
    )
    .await?;
    tear_down(setup, &database, [db, engine.db], serve).await?;

    let store = store(args.sqlite);
    let server_errors: u64 = answers.server_errors.values().sum();
    let seconds = |d: Option<Duration>| d.map_or("none".to_owned(), |d| format!("{:.2} s", d.as_secs_f64()));
    println!(
        "drill, sends ({store}): {}, {} clients, at least {} sends to {CONTACTS} contacts",
        args.fault.describe(args.kills, args.window, args.outage),
        args.clients,
        sends
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
    println!("| sends accepted during the fault | {accepted_during} |");
    println!("| answers 503 | {} |", answers.unavailable);
    println!(
        "| requests unanswered within {} s | {} |",
        ANSWER_WITHIN.as_secs(),
        answers.unanswered
    );
    println!("| slowest answer | {:.2} s |", answers.slowest.as_secs_f64());
    println!(
        "| answers 5xx other than 503 | {server_errors} {:?} |",
        answers.server_errors
    );
    println!(
        "| first send accepted after the fault ended | {} |",
        seconds(accepted_after_fault)
    );
    println!(
        "| every send accepted before the fault ended delivered, after its end | {} |",
        seconds(caught_up)
    );
    println!(
        "| last receipt after the fault ended | {:.2} s |",
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
