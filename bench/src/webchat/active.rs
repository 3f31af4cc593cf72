//! 1,000 visitors chatting at once (20 in a smoke run) on `serve` with PostgreSQL + Redis: each visitor's
//! socket sends a message every 2 s (its text `t=<epoch ms> u=<epoch µs>`), and the business answers each
//! visitor through `POST /v1/contacts/{id}/send-message` every 2 s (its text `u=<epoch µs>`, when the call
//! was due). The receiver times each visitor message to its `message.received` webhook; the visitors time
//! each answer from its API call to their frame, and each of their own messages to its echo (stored, then
//! pushed back to every socket of the session). The limit: the same sockets on the bare axum server's echo,
//! each frame timed out and back.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::{Site, post_json, socket_url};
use crate::{
    load::{self, HttpRequest, Outcome, Pace, Requests, Shape},
    process::ServerProcess,
    receiver,
    scenarios::{Measured, Setup, epoch_ms},
};

pub const ACTIVE_LIMIT: &str = "limit: bare axum WebSocket echo, 1,000 sockets, a frame every 2 s each, out and back";
pub const ACTIVE_VISITOR: &str =
    "webchat: visitor frame to message.received webhook, 1,000 active sessions (PostgreSQL + Redis)";
pub const ACTIVE_API: &str = "webchat: API send to the visitor's frame, 1,000 active sessions (PostgreSQL + Redis)";
pub const ACTIVE_ECHO: &str =
    "webchat: visitor frame to its echo on the socket (stored, then pushed back), 1,000 active sessions";
/// How often each visitor writes, and each is answered.
const PERIOD: Duration = Duration::from_secs(2);

pub async fn run(setup: &Setup, shape: Shape) -> anyhow::Result<Vec<Measured>> {
    let sessions = if shape.smoke() { 20 } else { 1_000 };
    let bare = ServerProcess::spawn(&setup.bench, &["bare-server"], &BTreeMap::new(), 1)?;
    let addr = bare.http.expect("bare server address");
    let sockets = open(vec![format!("ws://{addr}/ws"); sessions]).await?;
    let cpu = bare.cpu_seconds();
    let echoed = chat(sockets, Mode::Echo, shape).await?;
    let limit = Measured {
        name: ACTIVE_LIMIT,
        outcome: echoed.answers,
        server_cpu: bare.cpu_seconds() - cpu,
        database_cpu: 0.0,
        machine_cpu: 0.0,
        busy: shape.warmup + shape.duration,
        server_peak_rss: bare.rss_mib().1,
    };
    drop(bare);

    let receiver = ServerProcess::spawn(&setup.bench, &["webhook-receiver"], &BTreeMap::new(), 1)?;
    let receiver_addr = receiver.http.expect("receiver address");
    let postgres = setup.postgres_database().await?;
    let mut env = setup.env(&postgres, true);
    env.insert("FRONTDESK_ALLOW_PRIVATE_URLS".into(), "true".into());
    super::crowd_budgets(&mut env);
    // 30 a minute each is the scenario; the default limit (20) would refuse a third of them.
    env.insert("FRONTDESK_WEBCHAT_MESSAGES_PER_MINUTE".into(), "120".into());
    let serve = ServerProcess::spawn(&setup.frontdesk, &["serve"], &env, 2)?;
    let site = Site::prepare(&serve, sessions).await?;
    let hook =
        json!({"name": "bench", "url": format!("http://{receiver_addr}/hook/0"), "events": ["message.received"]});
    post_json(site.http, "/v1/webhooks", Some(&site.key), hook).await?;

    // Every socket is open before the first answer is due, so each answer has a socket to reach.
    let sockets = open(site.visitors.iter().map(|v| socket_url(site.http, &v.token)).collect()).await?;
    let cpu = serve.cpu_seconds();
    let window_start_ms = epoch_ms() + u64::try_from(shape.warmup.as_millis()).unwrap_or(0);
    let answers = answer_every_visitor(&site, shape);
    // The receiver counts from the window on (a few warm-up messages' webhooks may still come after).
    let window_opens = async {
        tokio::time::sleep(shape.warmup).await;
        receiver::reset(receiver_addr).await
    };
    let (chatted, answered, opened) = tokio::join!(chat(sockets, Mode::Service, shape), answers, window_opens);
    let (chatted, answered) = (chatted?, answered?);
    opened?;
    let server_cpu = serve.cpu_seconds() - cpu;
    anyhow::ensure!(answered.error_count() == 0, "API sends failed: {:?}", answered.errors);
    eprintln!(
        "webchat: {} visitor messages and {} answers in the window; {} answers' frames seen; frame errors {:?}",
        chatted.sent_in_window, answered.requests, chatted.answers.requests, chatted.answers.errors
    );
    let mut webhooks = receiver::receipts(receiver_addr, chatted.sent_in_window, window_start_ms).await?;
    webhooks.elapsed = shape.duration;
    let server_peak_rss = serve.rss_mib().1;
    drop(serve);
    setup.drop_database(&postgres).await?;
    Ok(vec![
        limit,
        Measured {
            name: ACTIVE_VISITOR,
            outcome: webhooks,
            server_cpu,
            database_cpu: 0.0,
            machine_cpu: 0.0,
            busy: shape.warmup + shape.duration,
            server_peak_rss,
        },
        Measured {
            name: ACTIVE_API,
            outcome: chatted.answers,
            server_cpu,
            database_cpu: 0.0,
            machine_cpu: 0.0,
            busy: shape.warmup + shape.duration,
            server_peak_rss,
        },
        Measured {
            name: ACTIVE_ECHO,
            outcome: chatted.echoes,
            server_cpu,
            database_cpu: 0.0,
            machine_cpu: 0.0,
            busy: shape.warmup + shape.duration,
            server_peak_rss,
        },
    ])
}

/// The business's answers: each visitor answered every `PERIOD`, paced open-loop, each text the time it was
/// due.
async fn answer_every_visitor(site: &Site, shape: Shape) -> anyhow::Result<Outcome> {
    let contacts: Arc<[String]> = site.visitors.iter().map(|v| v.contact_id.clone()).collect();
    let key = site.key.clone();
    let per_second = contacts.len() as f64 / PERIOD.as_secs_f64();
    let requests = Requests::each(move |turn| {
        let contact = &contacts[(turn.number % contacts.len() as u64) as usize];
        let due_us = turn
            .due
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros());
        Some(HttpRequest {
            method: http::Method::POST,
            path: format!("/v1/contacts/{contact}/send-message"),
            headers: vec![
                ("x-api-key".to_owned(), key.clone()),
                ("content-type".to_owned(), "application/json".to_owned()),
            ],
            body: Bytes::from(json!({"text": format!("u={due_us}")}).to_string()),
        })
    });
    let shape = Shape {
        concurrency: 64,
        ..shape
    };
    load::http_sends(site.http, requests, Pace::Open { per_second }, shape).await
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The bare echo: each frame comes back; its round trip is timed.
    Echo,
    /// The service: the visitor's messages go to the business; the business's answers are timed.
    Service,
}

/// What the visitors saw, from the window.
struct Chatted {
    /// The business's answers (the service), or the bare server's echoes, timed.
    answers: Outcome,
    /// The visitors' own messages pushed back by the service, timed.
    echoes: Outcome,
    /// Messages the visitors sent in the window.
    sent_in_window: u64,
}

/// Which frames a visitor times.
#[derive(Clone, Copy)]
enum Timed {
    Answer,
    Echo,
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A socket to each URL.
async fn open(urls: Vec<String>) -> anyhow::Result<Vec<Socket>> {
    let mut sockets = Vec::with_capacity(urls.len());
    for url in urls {
        sockets.push(tokio_tungstenite::connect_async(url).await?.0);
    }
    Ok(sockets)
}

/// Each socket writing a message every `PERIOD` (staggered over the period) and timing the frames it is
/// waiting for, for the warm-up and the measured window.
async fn chat(sockets: Vec<Socket>, mode: Mode, shape: Shape) -> anyhow::Result<Chatted> {
    let count = sockets.len();
    let started = Instant::now();
    let record_from = started + shape.warmup;
    let stop = record_from + shape.duration;
    let histogram = || Histogram::<u64>::new_with_bounds(1, 60_000_000, 3);
    let timed = Arc::new(Mutex::new([histogram()?, histogram()?]));
    let mut visitors = tokio::task::JoinSet::new();
    for (n, socket) in sockets.into_iter().enumerate() {
        let offset = PERIOD.mul_f64(n as f64 / count as f64);
        let timed = timed.clone();
        visitors.spawn(async move {
            let (mut write, mut read) = socket.split();
            let mut tick = tokio::time::interval_at((started + offset).into(), PERIOD);
            let (mut written, mut sent, mut errors) = (0_u64, 0_u64, 0_u64);
            // After the window, a grace period for frames still on their way.
            let grace = tokio::time::sleep_until((stop + Duration::from_secs(3)).into());
            tokio::pin!(grace);
            loop {
                tokio::select! {
                    at = tick.tick() => {
                        let at = at.into_std();
                        if at >= stop {
                            continue;
                        }
                        let text = match mode {
                            Mode::Echo => format!("u={}", epoch_us()),
                            Mode::Service => format!("t={} u={}", epoch_ms(), epoch_us()),
                        };
                        let frame = json!({"type": "message", "text": text, "client_message_id": format!("b{n}-{written}")});
                        if write.send(Message::Text(frame.to_string().into())).await.is_err() {
                            errors += 1;
                            break;
                        }
                        written += 1;
                        if at >= record_from {
                            sent += 1;
                        }
                    }
                    frame = read.next() => {
                        let Some(Ok(Message::Text(text))) = frame else {
                            if !matches!(frame, Some(Ok(_))) {
                                errors += 1;
                                break;
                            }
                            continue;
                        };
                        if let Some((kind, due_us)) = timed_text(&text, mode)
                            && Instant::now() >= record_from
                        {
                            let latency = u64::try_from(epoch_us().saturating_sub(due_us)).unwrap_or(u64::MAX);
                            let _ = timed.lock().unwrap_or_else(|e| e.into_inner())[kind as usize].record(latency.max(1));
                        }
                    }
                    () = &mut grace => break,
                }
            }
            (sent, errors)
        });
    }
    let (mut sent, mut errors) = (0, 0);
    for (s, e) in visitors.join_all().await {
        sent += s;
        errors += e;
    }
    let [answers, echoes] = std::mem::replace(
        &mut *timed.lock().unwrap_or_else(|e| e.into_inner()),
        [histogram()?, histogram()?],
    );
    let outcome = |latency_us: Histogram<u64>| {
        let mut outcome = Outcome {
            requests: latency_us.len(),
            elapsed: shape.duration,
            latency_us,
            errors: Default::default(),
        };
        if errors > 0 {
            outcome.errors.insert("socket closed".to_owned(), errors);
        }
        outcome
    };
    Ok(Chatted {
        answers: outcome(answers),
        echoes: outcome(echoes),
        sent_in_window: sent,
    })
}

/// Which timed frame this is, and the `u=<epoch µs>` in its text: an echo of the bare server (counted as
/// an answer), an answer from the API, or a visitor's own message pushed back.
fn timed_text(frame: &str, mode: Mode) -> Option<(Timed, u128)> {
    let frame: Value = serde_json::from_str(frame).ok()?;
    let (kind, text) = match mode {
        Mode::Echo => (Timed::Answer, frame["text"].as_str()?),
        Mode::Service if frame["type"] != "message" => return None,
        Mode::Service if frame["message"]["author"] == "api" => (Timed::Answer, frame["message"]["text"].as_str()?),
        Mode::Service => (Timed::Echo, frame["message"]["text"].as_str()?),
    };
    let (_, micros) = text.split_once("u=")?;
    Some((kind, micros.parse().ok()?))
}

fn epoch_us() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}
