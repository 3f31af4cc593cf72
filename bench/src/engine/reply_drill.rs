//! The drill on AI replies (`frontdesk-bench crash-drill --path replies`): clients post customers' questions
//! as Twilio's signed inbound sms webhooks (each from a number of its own, so each is a conversation), a
//! model-written reply to each, while the service goes through a fault (`faults`: the model provider
//! hanging, SIGKILLs of `serve` during the burst of inbound webhooks, Redis or PostgreSQL down). A webhook
//! without a 2xx answer is posted again as Twilio would, with the same message sid. Afterwards every
//! acknowledged question must be stored once and answered once, by the model or by the handoff sentence;
//! the drill reports what was lost, stored or answered twice, every answer of 500 or above other than 503,
//! and how long after the fault the model answered again.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{
        Arc, RwLock,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{Json, Router, extract::State, routing::post};
use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, Database, Statement};
use serde_json::{Value, json};

use super::{AUTH_TOKEN, Engine, PUBLIC_URL, inbound::signed_inbound, send_drill::start_twilio};
use crate::{
    drill::{DrillArgs, scalar, store, tear_down},
    faults::{Provider, ProviderSwitch, Stage},
    process::ServerProcess,
};

/// What the drill's model says to every question.
const MODEL_ANSWER: &str = "Thanks, noted.";

/// OpenAI's Chat Completions, answering at once; while the switch says so, never answering.
async fn complete(State(switch): State<ProviderSwitch>, Json(body): Json<Value>) -> Json<Value> {
    if switch.get() != Provider::Answers {
        std::future::pending::<()>().await;
    }
    Json(json!({
        "id": "chatcmpl-drill", "object": "chat.completion", "created": 1, "model": body["model"],
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": MODEL_ANSWER}}]
    }))
}

async fn start_model(switch: ProviderSwitch) -> anyhow::Result<SocketAddr> {
    let app = Router::new()
        .route("/v1/chat/completions", post(complete))
        .with_state(switch);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(addr)
}

/// What the clients saw.
#[derive(Default)]
struct Answers {
    /// Questions whose webhook was answered 2xx, and when.
    acknowledged: Vec<(String, Instant)>,
    /// Answers of 500 or above other than 503, by status.
    server_errors: HashMap<u16, u64>,
    /// Answers 503.
    unavailable: u64,
}

/// Posts questions against whichever `serve` is up, each until it is answered 2xx (a 4xx is an error of
/// the drill), until `questions` are acknowledged and the fault is `over`.
async fn client(
    serve: Arc<RwLock<Option<SocketAddr>>>,
    channel_id: String,
    (next, acknowledged, questions, over): (Arc<AtomicU64>, Arc<AtomicU64>, u64, Arc<AtomicBool>),
) -> anyhow::Result<Answers> {
    let http = crate::knowledge::rest_client();
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, AUTH_TOKEN.as_bytes());
    let path = format!("/hooks/twilio/{channel_id}");
    let url = format!("{PUBLIC_URL}{path}");
    let mut answers = Answers::default();
    while acknowledged.load(Ordering::Relaxed) < questions || !over.load(Ordering::Relaxed) {
        let n = next.fetch_add(1, Ordering::Relaxed);
        let question = format!("drill question {n}");
        let hook = signed_inbound(
            &key,
            &url,
            &path,
            &format!("SMdrill{n:026}"),
            &format!("+1777{n:07}"),
            &question,
        );
        loop {
            let Some(addr) = *serve.read().unwrap_or_else(|e| e.into_inner()) else {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            let mut request = http
                .post(format!("http://{addr}{}", hook.path))
                .timeout(Duration::from_secs(10));
            for (name, value) in &hook.headers {
                request = request.header(name, value);
            }
            match request.body(hook.body.clone()).send().await.map(|a| a.status()) {
                Ok(status) if status.is_success() => {
                    acknowledged.fetch_add(1, Ordering::Relaxed);
                    answers.acknowledged.push((question, Instant::now()));
                    break;
                }
                Ok(status) if status.is_client_error() => anyhow::bail!("the webhook was refused: {status}"),
                Ok(status) => {
                    if status.as_u16() == 503 {
                        answers.unavailable += 1;
                    } else {
                        *answers.server_errors.entry(status.as_u16()).or_default() += 1;
                    }
                }
                Err(_) => {}
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    Ok(answers)
}

/// One question as the database has it at the end.
struct Fate {
    /// Inbound messages stored with its text.
    stored: i64,
    /// Agent messages in its conversation, and those of them the model wrote.
    replies: i64,
    by_model: i64,
    /// When the last reply was stored.
    answered_at: Option<DateTime<Utc>>,
}

async fn fates(db: &sea_orm::DatabaseConnection) -> anyhow::Result<HashMap<String, Fate>> {
    let sql = format!(
        "SELECT q.text, COUNT(DISTINCT q.id), COUNT(DISTINCT r.id), \
         COUNT(DISTINCT r.id) FILTER (WHERE r.text = '{MODEL_ANSWER}'), MAX(r.created_at) \
         FROM messages q LEFT JOIN messages r ON r.conversation_id = q.conversation_id AND r.author = 'agent' \
         WHERE q.direction = 'inbound' GROUP BY q.text"
    );
    let rows = db
        .query_all_raw(Statement::from_string(db.get_database_backend(), sql))
        .await?;
    let mut fates = HashMap::with_capacity(rows.len());
    for row in rows {
        fates.insert(
            row.try_get_by_index(0)?,
            Fate {
                stored: row.try_get_by_index(1)?,
                replies: row.try_get_by_index(2)?,
                by_model: row.try_get_by_index(3)?,
                answered_at: row.try_get_by_index(4)?,
            },
        );
    }
    Ok(fates)
}

pub async fn run(mut stage: Stage, args: &DrillArgs) -> anyhow::Result<()> {
    let setup = &stage.setup.clone();
    let database = setup.database(args.sqlite).await?;
    let (twilio, _) = start_twilio(ProviderSwitch::default()).await?;
    let model = start_model(stage.provider.clone()).await?;
    let mut env = setup.env(&database, !args.sqlite);
    for (name, value) in [
        ("FRONTDESK_TWILIO_BASE_URL", format!("http://{twilio}")),
        ("FRONTDESK_PUBLIC_URL", PUBLIC_URL.to_owned()),
        ("FRONTDESK_REPLY_DEBOUNCE_MS", "0".to_owned()),
        ("FRONTDESK_MODEL_PROVIDER", "openai".to_owned()),
        ("OPENAI_BASE_URL", format!("http://{model}/v1")),
        ("OPENAI_API_KEY", "drill".to_owned()),
    ] {
        env.entry(name.to_owned()).or_insert(value);
    }
    let spawn = || ServerProcess::spawn(&setup.frontdesk, &["serve"], &env, 2);
    let serve = spawn()?;
    let engine = Engine::prepare(&serve, &database, 0).await?;
    engine.model_agent().await?;

    let current = Arc::new(RwLock::new(serve.http));
    let (next, acknowledged) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let over = Arc::new(AtomicBool::new(false));
    let questions = args.sends.unwrap_or(2_000);
    let clients: Vec<_> = (0..args.clients)
        .map(|_| {
            let state = (next.clone(), acknowledged.clone(), questions, over.clone());
            tokio::spawn(client(current.clone(), engine.channel_id.clone(), state))
        })
        .collect();
    let (serve, (_, fault_ended)) = stage.disrupt(serve, spawn, &current, |s| s.http, args).await?;
    let fault_ended_at = Utc::now();
    over.store(true, Ordering::Relaxed);
    let mut answers = Answers::default();
    for client in clients {
        let seen = client.await??;
        answers.acknowledged.extend(seen.acknowledged);
        answers.unavailable += seen.unavailable;
        for (status, n) in seen.server_errors {
            *answers.server_errors.entry(status).or_default() += n;
        }
    }

    // Until every question has its reply and no reply or its delivery is left to run.
    let db = Database::connect(&database).await?;
    const UNSETTLED: &str = "SELECT COUNT(*) FROM jobs WHERE kind IN ('agent_reply', 'deliver_message') \
                             AND status IN ('pending', 'running')";
    let started = Instant::now();
    let mut fates = fates(&db).await?;
    loop {
        let unanswered = answers
            .acknowledged
            .iter()
            .any(|(q, _)| fates.get(q).is_none_or(|f| f.replies == 0));
        if (!unanswered && scalar(&db, UNSETTLED).await? == 0) || started.elapsed() > Duration::from_secs(300) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        fates = self::fates(&db).await?;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let fates = self::fates(&db).await?;
    let undelivered = scalar(
        &db,
        "SELECT COUNT(*) FROM messages WHERE author = 'agent' AND status NOT IN ('sent', 'delivered')",
    )
    .await?;
    tear_down(setup, &database, [db, engine.db], serve).await?;

    let count = |test: &dyn Fn(&Fate) -> bool| {
        answers
            .acknowledged
            .iter()
            .filter(|(q, _)| fates.get(q).is_some_and(test))
            .count()
    };
    let lost = answers
        .acknowledged
        .iter()
        .filter(|(q, _)| !fates.contains_key(q))
        .count();
    let unanswered = count(&|f| f.replies == 0);
    let stored_twice = count(&|f| f.stored > 1);
    let answered_twice = count(&|f| f.replies > 1);
    let by_model = count(&|f| f.by_model == 1 && f.replies == 1);
    let handed_off = count(&|f| f.by_model == 0 && f.replies == 1);
    // The model's first answer to a question asked after the fault ended.
    let model_again = answers
        .acknowledged
        .iter()
        .filter(|(_, at)| *at >= fault_ended)
        .filter_map(|(q, _)| fates.get(q).filter(|f| f.by_model > 0).and_then(|f| f.answered_at))
        .min()
        .map(|at| (at - fault_ended_at).num_milliseconds() as f64 / 1000.0);
    let settled = fates
        .values()
        .filter_map(|f| f.answered_at)
        .max()
        .map(|at| (at - fault_ended_at).num_milliseconds() as f64 / 1000.0);
    let server_errors: u64 = answers.server_errors.values().sum();
    let seconds = |s: Option<f64>| s.map_or("none".to_owned(), |s| format!("{s:.2} s"));
    let store = store(args.sqlite);
    println!(
        "drill, replies ({store}): {}, {} clients, at least {questions} questions",
        args.fault.describe(args.kills, args.window, args.outage),
        args.clients
    );
    println!("| figure | value |\n|---|---|");
    println!("| questions acknowledged | {} |", answers.acknowledged.len());
    println!("| lost (acknowledged, never stored) | {lost} |");
    println!("| stored twice or more | {stored_twice} |");
    println!("| unanswered | {unanswered} |");
    println!("| answered by the model | {by_model} |");
    println!("| answered by the handoff sentence | {handed_off} |");
    println!("| answered twice or more | {answered_twice} |");
    println!("| replies not delivered to the provider | {undelivered} |");
    println!("| answers 503 | {} |", answers.unavailable);
    println!(
        "| answers 5xx other than 503 | {server_errors} {:?} |",
        answers.server_errors
    );
    println!(
        "| a question asked after the fault answered by the model, after its end | {} |",
        seconds(model_again)
    );
    println!("| last reply after the fault ended | {} |", seconds(settled));
    anyhow::ensure!(
        lost == 0 && unanswered == 0,
        "{lost} questions lost, {unanswered} unanswered"
    );
    anyhow::ensure!(
        server_errors == 0,
        "answers of 5xx other than 503: {:?}",
        answers.server_errors
    );
    Ok(())
}
