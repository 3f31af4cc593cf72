//! Model-written replies on PostgreSQL + Redis, against a chat model in the bench process that speaks OpenAI's
//! Chat Completions and answers each request 2 s after it came: the service's own work is what is timed.
//! First questions at 20 a second, each timed from its storage (the database's `created_at`) to the model's
//! receipt of its request (the bench's clock, on the same machine); then 500 conversations asking at once,
//! all answered, counted as replies stored per second from the first question to the last reply, with the
//! service's memory while the replies wait on the model.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{Json, Router, extract::State, routing::post};
use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, Database, Statement};
use serde_json::{Value, json};

use super::{AUTH_TOKEN, Engine, PUBLIC_URL, inbound, replies::agent_replies_since};
use crate::{
    load::{self, Outcome, Pace, Requests, Shape},
    process::ServerProcess,
    scenarios::{Measured, Setup, measure},
};

pub const MODEL_LATENCY: &str = "ai model: question stored to model request, 20/s, model answering in 2 s, debounce 0";
pub const MODEL_BURST: &str = "ai model: 500 conversations asking at once, model answering in 2 s: replies per second";

/// How long the model takes to answer.
const MODEL_DELAY: Duration = Duration::from_secs(2);

/// The service's memory while the burst's replies waited on the model.
#[derive(Clone, Copy)]
pub struct Waiting {
    /// Replies waiting on the model when the memory was read (the most seen).
    pub replies: usize,
    pub rss_mib: f64,
    /// Before the burst.
    pub idle_rss_mib: f64,
}

impl Waiting {
    pub fn kib_per_reply(&self) -> f64 {
        (self.rss_mib - self.idle_rss_mib).max(0.0) * 1024.0 / self.replies.max(1) as f64
    }
}

#[derive(Clone, Default)]
struct FakeModel {
    /// When each question's request came, by the question's text.
    arrivals: Arc<Mutex<HashMap<String, DateTime<Utc>>>>,
    waiting: Arc<AtomicUsize>,
}

async fn complete(State(model): State<FakeModel>, Json(body): Json<Value>) -> Json<Value> {
    let question = body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    model.arrivals.lock().unwrap().entry(question).or_insert_with(Utc::now);
    model.waiting.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(MODEL_DELAY).await;
    model.waiting.fetch_sub(1, Ordering::SeqCst);
    Json(json!({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 1, "model": body["model"],
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Thanks, noted."}}]
    }))
}

pub async fn run(setup: &Setup, shape: Shape) -> anyhow::Result<(Vec<Measured>, Waiting)> {
    let smoke = shape.smoke();
    let model = FakeModel::default();
    let app = Router::new()
        .route("/v1/chat/completions", post(complete))
        .with_state(model.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let model_addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });

    let receiver = ServerProcess::spawn(&setup.bench, &["webhook-receiver"], &BTreeMap::new(), 1)?;
    let postgres = setup.postgres_database().await?;
    let mut env = setup.env(&postgres, true);
    env.insert(
        "FRONTDESK_TWILIO_BASE_URL".into(),
        format!("http://{}", receiver.http.expect("receiver address")),
    );
    env.insert("FRONTDESK_PUBLIC_URL".into(), PUBLIC_URL.into());
    env.insert("FRONTDESK_REPLY_DEBOUNCE_MS".into(), "0".into());
    env.insert("FRONTDESK_MODEL_PROVIDER".into(), "openai".into());
    env.insert("OPENAI_BASE_URL".into(), format!("http://{model_addr}/v1"));
    env.insert("OPENAI_API_KEY".into(), "bench".into());
    // Replies waiting 2 s each on the model: the job engine's caps (64 an account's lane, 256 a process by
    // default) would make the burst's rate theirs (about 32 a second). Above the burst here, so that the
    // service's own work is what is measured; docs/models.md says how to size them.
    for knob in [
        "FRONTDESK_JOB_CONCURRENCY",
        "FRONTDESK_JOB_LANE_CONCURRENCY",
        "FRONTDESK_JOB_ACCOUNT_CONCURRENCY",
    ] {
        env.insert(knob.into(), "1024".into());
    }
    let serve = ServerProcess::spawn(&setup.frontdesk, &["serve"], &env, 2)?;
    let engine = Engine::prepare(&serve, &postgres, 20).await?;
    engine.model_agent().await?;

    let paced = Shape {
        concurrency: shape.concurrency.min(16),
        warmup: Duration::ZERO,
        ..shape
    };
    let started = Utc::now();
    let latency = measure(MODEL_LATENCY, &[&serve], async {
        let asked = load::http_sends(
            engine.http,
            questions(&engine, "paced", None),
            Pace::Open { per_second: 20.0 },
            paced,
        )
        .await?;
        anyhow::ensure!(asked.error_count() == 0, "questions refused: {:?}", asked.errors);
        tokio::time::sleep(MODEL_DELAY + Duration::from_secs(2)).await;
        to_model_request(&postgres, started, &model, asked).await
    })
    .await?;

    // The paced phase's replies all stored first, so none is counted as the burst's.
    let paced_asked = latency.outcome.requests as usize;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while agent_replies_since(&postgres, started).await? < paced_asked && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let conversations = if smoke { 20 } else { 500 };
    let idle_rss_mib = serve.rss_mib().0;
    let burst_started = Utc::now();
    let mut waiting = Waiting {
        replies: 0,
        rss_mib: idle_rss_mib,
        idle_rss_mib,
    };
    let burst = measure(MODEL_BURST, &[&serve], async {
        let shape = Shape {
            concurrency: shape.concurrency.max(2),
            duration: Duration::from_secs(120),
            warmup: Duration::ZERO,
        };
        let sending = load::http_sends(
            engine.http,
            questions(&engine, "burst", Some(conversations)),
            Pace::Closed,
            shape,
        );
        let watching = async {
            // While the replies wait on the model: the memory at the most of them waiting.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
            while tokio::time::Instant::now() < deadline {
                let now_waiting = model.waiting.load(Ordering::SeqCst);
                if now_waiting > waiting.replies {
                    waiting.replies = now_waiting;
                    waiting.rss_mib = serve.rss_mib().0;
                }
                if agent_replies_since(&postgres, burst_started).await? >= conversations {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            anyhow::Ok(())
        };
        let (asked, watched) = tokio::join!(sending, watching);
        let asked = asked?;
        watched?;
        anyhow::ensure!(asked.error_count() == 0, "questions refused: {:?}", asked.errors);
        replies_per_second(&postgres, burst_started, conversations).await
    })
    .await?;
    drop(serve);
    engine.db.close().await?;
    setup.drop_database(&postgres).await?;
    Ok((vec![latency, burst], waiting))
}

/// Signed inbound sms, each from a number of its own and with a text of its own; `count` of them, or
/// endless.
fn questions(engine: &Engine, phase: &'static str, count: Option<usize>) -> Requests {
    let path = format!("/hooks/twilio/{}", engine.channel_id);
    let url = format!("{PUBLIC_URL}{path}");
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, AUTH_TOKEN.as_bytes());
    let run = rand::random::<u32>();
    Requests::each(move |turn| {
        if count.is_some_and(|count| turn.number >= count as u64) {
            return None;
        }
        let sid = format!("SM{run:08x}{phase}{:016x}", turn.number);
        let from = format!("+1888{}{:06}", if phase == "paced" { 1 } else { 2 }, turn.number);
        let question = format!("bench {phase} question {run} {}", turn.number);
        Some(inbound::signed_inbound(&key, &url, &path, &sid, &from, &question))
    })
}

/// Each question stored since `since`, timed to its model request.
async fn to_model_request(
    database: &str,
    since: DateTime<Utc>,
    model: &FakeModel,
    asked: Outcome,
) -> anyhow::Result<Outcome> {
    let db = Database::connect(database).await?;
    let rows = db
        .query_all_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            "SELECT text, created_at FROM messages WHERE direction = 'inbound' AND created_at >= $1",
            [since.into()],
        ))
        .await?;
    db.close().await?;
    let arrivals = model.arrivals.lock().unwrap().clone();
    let mut latency_us = hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3)?;
    for row in &rows {
        let text: String = row.try_get_by_index(0)?;
        let stored: DateTime<Utc> = row.try_get_by_index(1)?;
        let Some(asked_at) = arrivals.get(&text) else {
            anyhow::bail!("the model was never asked about `{text}`");
        };
        latency_us.record((*asked_at - stored).num_microseconds().unwrap_or(0).max(1) as u64)?;
    }
    anyhow::ensure!(!rows.is_empty(), "no question was stored");
    Ok(Outcome {
        requests: rows.len() as u64,
        latency_us,
        ..asked
    })
}

/// The burst's replies per second: all `expected` of them, from the first question stored to the last reply.
async fn replies_per_second(database: &str, since: DateTime<Utc>, expected: usize) -> anyhow::Result<Outcome> {
    let db = Database::connect(database).await?;
    let row = db
        .query_one_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            "SELECT count(*) FILTER (WHERE author = 'agent'), \
             (EXTRACT(EPOCH FROM (max(created_at) FILTER (WHERE author = 'agent') - min(created_at))) * 1000000)::float8 \
             FROM messages WHERE created_at >= $1",
            [since.into()],
        ))
        .await?
        .ok_or_else(|| anyhow::anyhow!("no count"))?;
    db.close().await?;
    let replies: i64 = row.try_get_by_index(0)?;
    let span_us: f64 = row.try_get_by_index(1)?;
    anyhow::ensure!(
        usize::try_from(replies).unwrap_or(0) == expected,
        "{replies} of {expected} conversations were answered"
    );
    let mut outcome = Outcome::new();
    outcome.requests = u64::try_from(replies).unwrap_or(0);
    outcome.elapsed = Duration::from_micros(span_us.max(1.0) as u64);
    outcome.latency_us.record(span_us.max(1.0) as u64)?;
    Ok(outcome)
}
