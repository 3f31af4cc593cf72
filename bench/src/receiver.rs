//! The receiver of the fan-out, pipeline and web chat scenarios, run as its own process (`frontdesk-bench
//! webhook-receiver`) like the bare server. `POST /hook/...` answers 200 and records the time from the event's
//! `timestamp` (its commit), or from the `t=<epoch ms>` a bench visitor wrote in its message, to receipt; `POST /limit` answers 200 without recording (the physical limit: the
//! same receiver driven by a plain client). `POST /2010-04-01/Accounts/{sid}/Messages.json` is Twilio's
//! Messages API: it takes the form Twilio takes (`To`, `From`, `Body`, `StatusCallback`), answers 201 with a
//! message sid and `queued`, and records the time from the `t=<epoch ms>` the bench wrote in `Body` (when
//! the send was made) to receipt. `GET /stats` reports receipts and the first and last; `GET /latencies`
//! adds every latency (read once, at the end: polled while receipts arrive, its copy held the lock that
//! every receipt takes and cost the machine's CPU that the measured service needed); `DELETE /stats` starts
//! the count again. The bench reads it with `receipts` and `reset`.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::State,
    http::StatusCode,
    routing::{get, post},
};

#[derive(Default)]
struct Stats {
    count: u64,
    first_ms: u64,
    last_ms: u64,
    latency_ms: Vec<u64>,
}

type Shared = Arc<Mutex<Stats>>;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// When the event's cause was made: the `t=<epoch ms>` a bench client wrote at the start of a message's
/// text (`"text":"t=..."`, a visitor's message in `message.received`), else the event's `"timestamp":"..."`
/// (RFC 3339, its commit). Read without parsing the whole body.
fn event_ms(body: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(body).ok()?;
    if let Some(start) = text.find(r#""text":"t="#) {
        let digits = &text[start + 10..];
        let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
        return digits[..end].parse().ok();
    }
    let start = text.find(r#""timestamp":""#)? + 13;
    let end = start + text[start..].find('"')?;
    let at = chrono::DateTime::parse_from_rfc3339(&text[start..end]).ok()?;
    u64::try_from(at.timestamp_millis()).ok()
}

/// The `t=<epoch ms>` at the start of a Twilio form's `Body`.
fn body_ms(form: &[u8]) -> Option<u64> {
    let (_, body) = url::form_urlencoded::parse(form).find(|(name, _)| name == "Body")?;
    let digits = body.strip_prefix("t=")?;
    let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
    digits[..end].parse().ok()
}

/// Counts a receipt now, with its latency from `sent_ms` when known.
fn receipt(stats: &Shared, sent_ms: Option<u64>) {
    let received = now_ms();
    let mut stats = stats.lock().unwrap_or_else(|e| e.into_inner());
    stats.count += 1;
    if stats.first_ms == 0 {
        stats.first_ms = received;
    }
    stats.last_ms = received;
    if let Some(at) = sent_ms {
        stats.latency_ms.push(received.saturating_sub(at));
    }
}

async fn hook(State(stats): State<Shared>, body: Bytes) {
    receipt(&stats, event_ms(&body));
}

/// Twilio's answer to a created message: 201 and the Message resource (of which the service reads `sid`).
async fn twilio_message(State(stats): State<Shared>, body: Bytes) -> (StatusCode, Json<serde_json::Value>) {
    receipt(&stats, body_ms(&body));
    let sid = format!("SM{:032x}", rand::random::<u128>());
    (
        StatusCode::CREATED,
        Json(serde_json::json!({"sid": sid, "status": "queued"})),
    )
}

async fn restart(State(stats): State<Shared>) {
    *stats.lock().unwrap_or_else(|e| e.into_inner()) = Stats::default();
}

async fn report(State(stats): State<Shared>) -> Json<serde_json::Value> {
    let stats = stats.lock().unwrap_or_else(|e| e.into_inner());
    Json(serde_json::json!({
        "count": stats.count,
        "first_ms": stats.first_ms,
        "last_ms": stats.last_ms,
    }))
}

async fn latencies(State(stats): State<Shared>) -> Json<serde_json::Value> {
    let latency_ms = stats.lock().unwrap_or_else(|e| e.into_inner()).latency_ms.clone();
    Json(serde_json::json!({ "latency_ms": latency_ms }))
}

pub async fn serve(addr: &str) -> anyhow::Result<()> {
    let shared: Shared = Arc::default();
    let app = Router::new()
        .route("/hook/{subscription}", post(hook))
        .route("/limit", post(|_: Bytes| async {}))
        .route("/2010-04-01/Accounts/{sid}/Messages.json", post(twilio_message))
        .route("/stats", get(report).delete(restart))
        .route("/latencies", get(latencies))
        .with_state(shared);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    eprintln!(r#"{{"message":"http listening","addr":"{}"}}"#, listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}

/// Calls the receiver at `addr`: `method path`, no body; the answer's body.
async fn call(addr: SocketAddr, method: http::Method, path: &str) -> anyhow::Result<Bytes> {
    use http_body_util::{BodyExt, Empty};
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::HOST, addr.to_string())
        .body(Empty::<Bytes>::new())?;
    Ok(sender
        .send_request(request)
        .await?
        .into_body()
        .collect()
        .await?
        .to_bytes())
}

/// Starts the receiver's count again.
pub async fn reset(addr: SocketAddr) -> anyhow::Result<()> {
    call(addr, http::Method::DELETE, "/stats").await?;
    Ok(())
}

/// Receipts so far.
pub async fn count(addr: SocketAddr) -> anyhow::Result<u64> {
    let stats: serde_json::Value = serde_json::from_slice(&call(addr, http::Method::GET, "/stats").await?)?;
    Ok(stats["count"].as_u64().unwrap_or(0))
}

/// Waits until the receiver at `addr` has `expected` receipts (at most 10 minutes); they as an outcome: per
/// second from `started_ms` to the last receipt, each receipt's latency.
pub async fn receipts(addr: SocketAddr, expected: u64, started_ms: u64) -> anyhow::Result<crate::load::Outcome> {
    let started = Instant::now();
    let stats = loop {
        let stats: serde_json::Value = serde_json::from_slice(&call(addr, http::Method::GET, "/stats").await?)?;
        if stats["count"].as_u64() >= Some(expected) {
            break stats;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(600),
            "only {} of {expected} receipts arrived",
            stats["count"]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut latency_us = hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3)?;
    let latencies: serde_json::Value = serde_json::from_slice(&call(addr, http::Method::GET, "/latencies").await?)?;
    for ms in latencies["latency_ms"].as_array().into_iter().flatten() {
        latency_us.record(ms.as_u64().unwrap_or(0).max(1) * 1_000)?;
    }
    let last_ms = stats["last_ms"].as_u64().unwrap_or(started_ms);
    Ok(crate::load::Outcome {
        requests: stats["count"].as_u64().unwrap_or(0),
        elapsed: Duration::from_millis(last_ms.saturating_sub(started_ms)),
        latency_us,
        errors: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_the_event_time() {
        let body = br#"{"type":"deal.created","timestamp":"2026-11-22T10:15:00.250Z","data":{}}"#;
        assert_eq!(super::event_ms(body), Some(1_795_342_500_250));
        let visitor = br#"{"type":"message.received","timestamp":"2026-11-22T10:15:00.250Z","data":{"text":"t=1795342500100","x":1}}"#;
        assert_eq!(super::event_ms(visitor), Some(1_795_342_500_100));
    }

    #[test]
    fn reads_the_send_time_from_the_body() {
        let form = b"To=%2B15550000001&From=%2B15005550006&Body=t%3D1795342500250&StatusCallback=http%3A%2F%2Fx";
        assert_eq!(super::body_ms(form), Some(1_795_342_500_250));
        assert_eq!(super::body_ms(b"To=%2B15550000001&Body=hello"), None);
    }
}
