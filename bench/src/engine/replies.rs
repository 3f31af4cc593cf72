//! AI replies on PostgreSQL + Redis with the local model and words-alone retrieval: an agent of 10,000 FAQs
//! (300 in a smoke run) routed to the sms channel, replies with no debounce, contacts asking its questions
//! from 1,000 numbers as signed Twilio inbound sms. First paced at 50 a second, timed from each question's
//! storage to its reply's (the reply queued, as the database's `created_at` of both say); then closed-loop,
//! counting replies stored per second. The decision (the context read, the knowledge searched, the rule
//! applied) is timed in the service (`frontdesk_ai_decision_seconds`), whose buckets say the share under
//! 10 ms: read after the paced phase (the goal's load) and again after the closed loop, where the decisions
//! queue for the two cores with everything else.

use std::{collections::BTreeMap, time::Duration};

use rand::{SeedableRng, rngs::StdRng};
use sea_orm::{ConnectionTrait, Database, Statement};

use super::{AUTH_TOKEN, Engine, PUBLIC_URL, inbound};
use crate::{
    load::{self, Outcome, Pace, Requests, Shape},
    process::ServerProcess,
    scenarios::{Measured, Setup, measure},
};

pub const REPLY_LATENCY: &str =
    "ai: question stored to reply queued, 50/s from 1,000 numbers, agent of 10,000 FAQs, words alone, debounce 0";
pub const REPLY_RATE: &str = "ai: replies stored per second, closed-loop questions from 1,000 numbers, same agent";

/// What the decision histogram said: decisions, and how many took at most 10 ms.
#[derive(Clone, Copy)]
pub struct Decisions {
    pub count: f64,
    pub within_10ms: f64,
}

impl Decisions {
    pub fn share_within_10ms(&self) -> f64 {
        self.within_10ms / self.count.max(1.0)
    }

    /// The decisions made since `before` was read.
    fn since(&self, before: &Decisions) -> Decisions {
        Decisions {
            count: self.count - before.count,
            within_10ms: self.within_10ms - before.within_10ms,
        }
    }
}

/// The decisions of the paced phase and of the closed loop.
pub struct DecisionsByPhase {
    pub paced: Decisions,
    pub closed_loop: Decisions,
}

pub async fn run(setup: &Setup, shape: Shape) -> anyhow::Result<(Vec<Measured>, DecisionsByPhase)> {
    let smoke = shape.smoke();
    let receiver = ServerProcess::spawn(&setup.bench, &["webhook-receiver"], &BTreeMap::new(), 1)?;
    let receiver_addr = receiver.http.expect("receiver address");
    let postgres = setup.postgres_database().await?;
    let mut env = setup.env(&postgres, true);
    env.insert("FRONTDESK_TWILIO_BASE_URL".into(), format!("http://{receiver_addr}"));
    env.insert("FRONTDESK_PUBLIC_URL".into(), PUBLIC_URL.into());
    env.insert("FRONTDESK_REPLY_DEBOUNCE_MS".into(), "0".into());
    let serve = ServerProcess::spawn(&setup.frontdesk, &["serve"], &env, 2)?;
    let engine = Engine::prepare(&serve, &postgres, 20).await?;
    desk(&engine, &postgres, if smoke { 300 } else { 10_000 }).await?;

    let paced = Shape {
        concurrency: shape.concurrency.min(16),
        warmup: Duration::ZERO,
        ..shape
    };
    let started = chrono::Utc::now();
    let latency = measure(REPLY_LATENCY, &[&serve], async {
        let asked = load::http_sends(engine.http, questions(&engine), Pace::Open { per_second: 50.0 }, paced).await?;
        anyhow::ensure!(asked.error_count() == 0, "questions refused: {:?}", asked.errors);
        tokio::time::sleep(Duration::from_secs(2)).await;
        reply_latency(&postgres, started, "created_at", asked).await
    })
    .await?;
    let paced = decisions(&serve).await?;
    let rate_started = chrono::Utc::now();
    let rate = measure(REPLY_RATE, &[&serve], async {
        let asked = load::http_sends(engine.http, questions(&engine), Pace::Closed, shape).await?;
        anyhow::ensure!(asked.error_count() == 0, "questions refused: {:?}", asked.errors);
        replies_per_second(&postgres, rate_started, asked.requests).await
    })
    .await?;
    let decisions = DecisionsByPhase {
        paced,
        closed_loop: decisions(&serve).await?.since(&paced),
    };
    drop(serve);
    engine.db.close().await?;
    setup.drop_database(&postgres).await?;
    Ok((vec![latency, rate], decisions))
}

/// The engine's sms channel answered by an agent of `faqs` FAQs (words alone, the local model), the
/// account's credits plenty for the run and the agent's index warm.
pub(super) async fn desk(engine: &Engine, postgres: &str, faqs: usize) -> anyhow::Result<()> {
    let account = engine
        .db
        .query_one_raw(Statement::from_sql_and_values(
            engine.db.get_database_backend(),
            "SELECT account_id FROM channels WHERE id = $1",
            [engine.channel_id.clone().into()],
        ))
        .await?
        .ok_or_else(|| anyhow::anyhow!("no channel"))?
        .try_get_by_index::<String>(0)?;
    let agent = engine.model_agent().await?;
    crate::knowledge::seed_faqs(postgres, &account, &agent, faqs).await?;
    let api = crate::knowledge::rest_client();
    let base = format!("http://{}", engine.http);
    api.post(format!("{base}/v1/agents/{agent}/search"))
        .header("x-api-key", &engine.key)
        .json(&serde_json::json!({"query": "warm up"}))
        .send()
        .await?
        .error_for_status()?;
    Ok(())
}

/// Signed inbound sms from 1,000 numbers in turn, each a question in the FAQs' words.
pub(super) fn questions(engine: &Engine) -> Requests {
    let path = format!("/hooks/twilio/{}", engine.channel_id);
    let url = format!("{PUBLIC_URL}{path}");
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, AUTH_TOKEN.as_bytes());
    let run = rand::random::<u64>();
    Requests::each(move |turn| {
        let mut rng = StdRng::seed_from_u64(turn.number);
        let sid = format!("SM{run:016x}{:016x}", turn.number);
        let from = format!("+1777{:07}", turn.number % 1_000);
        let question = crate::knowledge::query(&mut rng);
        Some(inbound::signed_inbound(&key, &url, &path, &sid, &from, &question))
    })
}

/// Each reply stored since `since`, timed from the latest question of its conversation before it to the
/// reply's `end` (`created_at`: stored; `sent_at`: taken by the provider; replies without one are left out).
pub(super) async fn reply_latency(
    database: &str,
    since: chrono::DateTime<chrono::Utc>,
    end: &str,
    asked: Outcome,
) -> anyhow::Result<Outcome> {
    let db = Database::connect(database).await?;
    // EXTRACT gives `numeric`: cast, so the row decodes as f64.
    let sql = format!(
        "SELECT (EXTRACT(EPOCH FROM (a.{end} - (SELECT max(i.created_at) FROM messages i \
         WHERE i.conversation_id = a.conversation_id AND i.direction = 'inbound' \
         AND i.created_at <= a.created_at))) * 1000000)::float8 \
         FROM messages a WHERE a.author = 'agent' AND a.created_at >= $1 AND a.{end} IS NOT NULL"
    );
    let rows = db
        .query_all_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            sql,
            [since.into()],
        ))
        .await?;
    let mut latency_us = hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3)?;
    for row in &rows {
        // A reply with no question before it has no latency: an error, not a zero.
        let us: f64 = row.try_get_by_index(0)?;
        latency_us.record(us.max(1.0) as u64)?;
    }
    db.close().await?;
    anyhow::ensure!(!rows.is_empty(), "no reply was stored");
    Ok(Outcome {
        requests: rows.len() as u64,
        latency_us,
        ..asked
    })
}

/// Replies stored per second from `since` to the last reply, once the replies to `asked` questions are all
/// stored or have stopped coming (a second without a new one, 30 s at most).
async fn replies_per_second(
    database: &str,
    since: chrono::DateTime<chrono::Utc>,
    asked: u64,
) -> anyhow::Result<Outcome> {
    let give_up = std::time::Instant::now() + Duration::from_secs(30);
    let mut stored = (0, None);
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = agent_replies_and_last(database, since).await?;
        let settled = now.0 > 0 && now.0 == stored.0;
        stored = now;
        if stored.0 as u64 >= asked || settled || std::time::Instant::now() >= give_up {
            break;
        }
    }
    let (count, last) = stored;
    let mut outcome = Outcome::new();
    outcome.requests = count as u64;
    outcome.elapsed = last.map_or(Duration::ZERO, |last| (last - since).to_std().unwrap_or_default());
    outcome.latency_us.record(1)?;
    Ok(outcome)
}

/// Agent replies stored since `since`, and when the last was.
async fn agent_replies_and_last(
    database: &str,
    since: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<(usize, Option<chrono::DateTime<chrono::Utc>>)> {
    let db = Database::connect(database).await?;
    let row = db
        .query_one_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            "SELECT count(*), max(created_at) FROM messages WHERE author = 'agent' AND created_at >= $1",
            [since.into()],
        ))
        .await?
        .ok_or_else(|| anyhow::anyhow!("no count"))?;
    let count: i64 = row.try_get_by_index(0)?;
    let last: Option<chrono::DateTime<chrono::Utc>> = row.try_get_by_index(1)?;
    db.close().await?;
    Ok((usize::try_from(count).unwrap_or(0), last))
}

/// Agent replies stored since `since`.
pub(super) async fn agent_replies_since(database: &str, since: chrono::DateTime<chrono::Utc>) -> anyhow::Result<usize> {
    Ok(agent_replies_and_last(database, since).await?.0)
}

/// The decision histogram of the service's `/metrics`: decisions in all, and those within 10 ms.
async fn decisions(serve: &ServerProcess) -> anyhow::Result<Decisions> {
    let text = reqwest::get(format!("http://{}/metrics", serve.http.expect("http")))
        .await?
        .text()
        .await?;
    let bucket = |le: &str| {
        text.lines()
            .find(|l| l.starts_with("frontdesk_ai_decision_seconds_bucket") && l.contains(&format!("le=\"{le}\"")))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Ok(Decisions {
        count: bucket("+Inf"),
        within_10ms: bucket("0.01"),
    })
}
