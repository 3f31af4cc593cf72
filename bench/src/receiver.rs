//! The webhook receiver of the fan-out scenario, run as its own process (`frontdesk-bench webhook-receiver`)
//! like the bare server: `POST /hook/...` answers 200 and records the time from the event's `timestamp`
//! (its commit) to receipt; `POST /limit` answers 200 without recording (the physical limit: the same
//! receiver driven by a plain client); `GET /stats` reports deliveries, the first and last receipt and every
//! latency.

use std::{
    sync::{Arc, Mutex},
    time::{SystemTime, UNIX_EPOCH},
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::State,
    routing::{get, post},
};

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

/// Milliseconds since the epoch of the body's `"timestamp":"..."` (RFC 3339), read without parsing the
/// whole body.
fn event_ms(body: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(body).ok()?;
    let start = text.find(r#""timestamp":""#)? + 13;
    let end = start + text[start..].find('"')?;
    let at = chrono::DateTime::parse_from_rfc3339(&text[start..end]).ok()?;
    u64::try_from(at.timestamp_millis()).ok()
}

async fn hook(State(stats): State<Shared>, body: Bytes) {
    let received = now_ms();
    let mut stats = stats.lock().unwrap_or_else(|e| e.into_inner());
    stats.count += 1;
    if stats.first_ms == 0 {
        stats.first_ms = received;
    }
    stats.last_ms = received;
    if let Some(at) = event_ms(&body) {
        stats.latency_ms.push(received.saturating_sub(at));
    }
}

async fn stats(State(stats): State<Shared>) -> Json<serde_json::Value> {
    let stats = stats.lock().unwrap_or_else(|e| e.into_inner());
    Json(serde_json::json!({
        "count": stats.count,
        "first_ms": stats.first_ms,
        "last_ms": stats.last_ms,
        "latency_ms": stats.latency_ms,
    }))
}

pub async fn serve(addr: &str) -> anyhow::Result<()> {
    let shared: Shared = Arc::new(Mutex::new(Stats {
        count: 0,
        first_ms: 0,
        last_ms: 0,
        latency_ms: Vec::new(),
    }));
    let app = Router::new()
        .route("/hook/{subscription}", post(hook))
        .route("/limit", post(|_: Bytes| async {}))
        .route("/stats", get(stats))
        .with_state(shared);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    eprintln!(r#"{{"message":"http listening","addr":"{}"}}"#, listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_the_event_time() {
        let body = br#"{"type":"deal.created","timestamp":"2026-11-22T10:15:00.250Z","data":{}}"#;
        assert_eq!(super::event_ms(body), Some(1_795_342_500_250));
    }
}
