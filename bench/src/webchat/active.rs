//! 1,000 visitors chatting at once (20 in a smoke run) on `serve` with PostgreSQL + Redis: each visitor's
//! socket sends a message every 2 s (its text `t=<epoch ms>`), and the business answers each visitor through
//! `POST /v1/contacts/{id}/send-message` every 2 s (its text `u=<epoch µs>`, when the call was due). The
//! receiver times each visitor message to its `message.received` webhook; the visitors time each answer
//! from its API call to their frame. The limit: the same sockets on the bare axum server's echo, each frame
//! timed out and back.

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
/// How often each visitor writes, and each is answered.
const PERIOD: Duration = Duration::from_secs(2);

pub async fn run(setup: &Setup, shape: Shape) -> anyhow::Result<Vec<Measured>> {
    let sessions = if shape.concurrency <= 2 { 20 } else { 1_000 };
    let bare = ServerProcess::spawn(&setup.bench, &["bare-server"], &BTreeMap::new(), 1)?;
    let addr = bare.http.expect("bare server address");
    let urls = vec![format!("ws://{addr}/ws"); sessions];
    let cpu = bare.cpu_seconds();
    let echoed = chat(urls, Mode::Echo, shape).await?;
    let limit = Measured {
        name: ACTIVE_LIMIT,
        outcome: echoed.frames,
        server_cpu: bare.cpu_seconds() - cpu,
        server_peak_rss: bare.rss_mib().1,
    };
    drop(bare);

    let receiver = ServerProcess::spawn(&setup.bench, &["webhook-receiver"], &BTreeMap::new(), 1)?;
    let receiver_addr = receiver.http.expect("receiver address");
    let postgres = setup.postgres_database().await?;
    let mut env = setup.env(&postgres, true);
    env.insert("FRONTDESK_ALLOW_PRIVATE_URLS".into(), "true".into());
    env.insert("FRONTDESK_WEBCHAT_SESSIONS_PER_MINUTE".into(), "100000".into());
    // 30 a minute each is the scenario; the default limit (20) would refuse a third of them.
    env.insert("FRONTDESK_WEBCHAT_MESSAGES_PER_MINUTE".into(), "120".into());
    let serve = ServerProcess::spawn(&setup.frontdesk, &["serve"], &env, 2)?;
    let site = Site::prepare(&serve, sessions).await?;
    let hook = json!({"name": "bench", "url": format!("http://{receiver_addr}/hook/0"), "events": ["message.received"]});
    post_json(site.http, "/v1/webhooks", Some(&site.key), hook).await?;

    let cpu = serve.cpu_seconds();
    let urls = site.visitors.iter().map(|v| socket_url(site.http, &v.token)).collect();
    let window_start_ms = epoch_ms() + u64::try_from(shape.warmup.as_millis()).unwrap_or(0);
    let answers = answer_every_visitor(&site, shape);
    let (chatted, answered) = tokio::join!(chat(urls, Mode::Service, shape), answers);
    let (chatted, answered) = (chatted?, answered?);
    let server_cpu = serve.cpu_seconds() - cpu;
    anyhow::ensure!(
        answered.error_count() == 0,
        "API sends failed: {:?}",
        answered.errors
    );
    eprintln!(
        "webchat: {} visitor messages and {} answers in the window; {} answers' frames seen; frame errors {:?}",
        chatted.sent_in_window,
        answered.requests,
        chatted.frames.requests,
        chatted.frames.errors
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
            server_peak_rss,
        },
        Measured {
            name: ACTIVE_API,
            outcome: chatted.frames,
            server_cpu,
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

/// What the visitors saw.
struct Chatted {
    /// Timed frames (answers, or echoes), from the window.
    frames: Outcome,
    /// Messages the visitors sent in the window.
    sent_in_window: u64,
}

/// One socket per URL, each writing a message every `PERIOD` (staggered over the period) and timing the
/// frames it is waiting for, for the warm-up and the measured window.
async fn chat(urls: Vec<String>, mode: Mode, shape: Shape) -> anyhow::Result<Chatted> {
    let count = urls.len();
    let mut sockets = Vec::with_capacity(count);
    for url in urls {
        sockets.push(tokio_tungstenite::connect_async(url).await?.0);
    }
    let started = Instant::now();
    let record_from = started + shape.warmup;
    let stop = record_from + shape.duration;
    let timed = Arc::new(Mutex::new(Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?));
    let mut visitors = tokio::task::JoinSet::new();
    for (n, socket) in sockets.into_iter().enumerate() {
        let offset = PERIOD.mul_f64(n as f64 / count as f64);
        let timed = timed.clone();
        visitors.spawn(async move {
            let (mut write, mut read) = socket.split();
            let mut tick = tokio::time::interval_at((started + offset).into(), PERIOD);
            let (mut sent, mut timed_frames, mut errors) = (0_u64, 0_u64, 0_u64);
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
                            Mode::Service => format!("t={}", epoch_ms()),
                        };
                        let frame = json!({"type": "message", "text": text, "client_message_id": format!("b{n}-{sent}")});
                        if write.send(Message::Text(frame.to_string().into())).await.is_err() {
                            errors += 1;
                            break;
                        }
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
                        if let Some(due_us) = timed_text(&text, mode)
                            && Instant::now() >= record_from
                        {
                            let latency = u64::try_from(epoch_us().saturating_sub(due_us)).unwrap_or(u64::MAX);
                            let _ = timed.lock().unwrap_or_else(|e| e.into_inner()).record(latency.max(1));
                            timed_frames += 1;
                        }
                    }
                    () = &mut grace => break,
                }
            }
            (sent, timed_frames, errors)
        });
    }
    let (mut sent, mut frames, mut errors) = (0, 0, 0);
    for (s, f, e) in visitors.join_all().await {
        sent += s;
        frames += f;
        errors += e;
    }
    let latency_us = std::mem::replace(
        &mut *timed.lock().unwrap_or_else(|e| e.into_inner()),
        Histogram::new(3)?,
    );
    let mut outcome = Outcome {
        requests: frames,
        elapsed: shape.duration,
        latency_us,
        errors: Default::default(),
    };
    if errors > 0 {
        outcome.errors.insert("socket closed".to_owned(), errors);
    }
    Ok(Chatted {
        frames: outcome,
        sent_in_window: sent,
    })
}

/// The `u=<epoch µs>` of a frame being waited for: an echo (the bare server), or an answer from the API
/// (the service; the visitor's own messages coming back are not timed here).
fn timed_text(frame: &str, mode: Mode) -> Option<u128> {
    let frame: Value = serde_json::from_str(frame).ok()?;
    let text = match mode {
        Mode::Echo => frame["text"].as_str()?,
        Mode::Service if frame["type"] == "message" && frame["message"]["author"] == "api" => {
            frame["message"]["text"].as_str()?
        }
        Mode::Service => return None,
    };
    text.strip_prefix("u=")?.parse().ok()
}

fn epoch_us() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}
