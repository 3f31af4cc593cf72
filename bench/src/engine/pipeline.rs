//! The send pipeline, accept to provider: 20,000 sends (200 in a smoke run) accepted by closed-loop senders
//! and delivered to the Twilio receiver, timed from the first accept to the last receipt: the capacity. Then
//! senders paced open-loop at half that capacity, each send's time written in its text (`t=<epoch ms>`, when
//! it was due), so the receiver times accept to provider. The receiver's own limit, driven by a plain client
//! with the same form, runs first.

use std::{net::SocketAddr, time::Duration};

use bytes::Bytes;

use super::{Engine, FROM_NUMBER, PUBLIC_URL};
use crate::{
    load::{self, HttpRequest, Outcome, Pace, Requests, Shape},
    process::ServerProcess,
    receiver,
    scenarios::{Measured, epoch_ms, measure},
};

pub const TWILIO_LIMIT: &str = "limit: the Twilio receiver, plain keep-alive POST client, Messages API form";
pub const PIPELINE: &str = "engine: pipeline capacity, sends from first accept to last receipt at the Twilio receiver";
pub const PIPELINE_HALF: &str = "engine: pipeline at half capacity, paced sends, accept to provider";

/// The receiver's Messages API driven directly with the form the service sends, then its count reset.
pub async fn receiver_limit(receiver: &ServerProcess, shape: Shape) -> anyhow::Result<Measured> {
    let addr = receiver.http.expect("receiver address");
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    form.append_pair("To", "+15550000001")
        .append_pair("From", FROM_NUMBER)
        .append_pair("Body", &format!("t={}", epoch_ms()))
        .append_pair(
            "StatusCallback",
            &format!("{PUBLIC_URL}/hooks/twilio/ch_0123456789abcdefghij/status"),
        );
    let request = HttpRequest {
        method: http::Method::POST,
        path: format!("/2010-04-01/Accounts/{}/Messages.json", super::ACCOUNT_SID),
        headers: vec![
            (
                "content-type".to_owned(),
                "application/x-www-form-urlencoded".to_owned(),
            ),
            ("authorization".to_owned(), super::basic_auth()),
        ],
        body: Bytes::from(form.finish()),
    };
    let limit = measure(TWILIO_LIMIT, &[receiver], load::http(addr, request, shape)).await?;
    receiver::reset(addr).await?;
    Ok(limit)
}

/// Both phases: the capacity, then accept-to-provider latency at half of it.
pub async fn run(
    engine: &Engine,
    serve: &ServerProcess,
    receiver_addr: SocketAddr,
    shape: Shape,
) -> anyhow::Result<Vec<Measured>> {
    let capacity = capacity(engine, serve, receiver_addr, shape, PIPELINE).await?;
    let per_second = capacity.outcome.per_second();
    engine.drained().await?;
    receiver::reset(receiver_addr).await?;
    let half = measure(PIPELINE_HALF, &[serve], async {
        let paced = Shape {
            warmup: Duration::ZERO,
            ..shape
        };
        let started_ms = epoch_ms();
        let pace = Pace::Open {
            per_second: (per_second / 2.0).max(1.0),
        };
        let accepted = load::http_sends(engine.http, sends(engine, |_| true), pace, paced).await?;
        delivered("half capacity", receiver_addr, accepted, started_ms).await
    })
    .await?;
    eprintln!(
        "pipeline: capacity {per_second:.0} messages/s, paced at {:.0}/s",
        per_second / 2.0
    );
    Ok(vec![capacity, half])
}

/// The capacity: `count` sends accepted closed-loop, timed from the first accept to the last receipt, on a
/// receiver counting from zero (receipts of an earlier scenario would end the wait early and inflate the rate).
pub async fn capacity(
    engine: &Engine,
    serve: &ServerProcess,
    receiver_addr: SocketAddr,
    shape: Shape,
    name: &'static str,
) -> anyhow::Result<Measured> {
    let count: u64 = if shape.smoke() { 200 } else { 20_000 };
    receiver::reset(receiver_addr).await?;
    measure(name, &[serve], async {
        // Closed loop until `count` sends are made; the deadline is only a bound.
        let bounded = Shape {
            duration: Duration::from_secs(600),
            warmup: Duration::ZERO,
            ..shape
        };
        let started_ms = epoch_ms();
        let sends = sends(engine, move |n| n < count);
        let accepted = load::http_sends(engine.http, sends, Pace::Closed, bounded).await?;
        let backlog = count.saturating_sub(receiver::count(receiver_addr).await?);
        let accepted_ms = epoch_ms();
        let outcome = delivered("capacity", receiver_addr, accepted, started_ms).await?;
        let last_ms = started_ms + outcome.elapsed.as_millis() as u64;
        eprintln!(
            "pipeline, capacity: accepted in {:.1} s, {backlog} then undelivered, delivered in {:.1} s more ({:.0}/s)",
            accepted_ms.saturating_sub(started_ms) as f64 / 1000.0,
            last_ms.saturating_sub(accepted_ms) as f64 / 1000.0,
            backlog as f64 * 1000.0 / last_ms.saturating_sub(accepted_ms).max(1) as f64
        );
        Ok(outcome)
    })
    .await
}

/// Sends while `more(n)` holds, spread over the contacts, each text the time it was due (`t=<epoch ms>`).
fn sends(engine: &Engine, more: impl Fn(u64) -> bool + Send + Sync + 'static) -> Requests {
    let made: Vec<HttpRequest> = engine.contact_ids.iter().map(|id| engine.send(id, "")).collect();
    Requests::each(move |turn| {
        more(turn.number).then(|| {
            let mut request = made[(turn.number % made.len() as u64) as usize].clone();
            let due_ms = turn
                .due
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            request.body = Bytes::from(format!(r#"{{"text":"t={due_ms}"}}"#));
            request
        })
    })
}

/// The receipts of the `accepted` sends (all of them, every one answered 202): receipts per second from
/// `started_ms` to the last, each one's send-to-receipt latency. Prints the accept latencies of the `phase`.
async fn delivered(
    phase: &str,
    receiver_addr: SocketAddr,
    accepted: Outcome,
    started_ms: u64,
) -> anyhow::Result<Outcome> {
    anyhow::ensure!(accepted.error_count() == 0, "sends refused: {:?}", accepted.errors);
    let ms = |q: f64| accepted.latency_us.value_at_quantile(q) as f64 / 1000.0;
    eprintln!(
        "pipeline, {phase}: {} sends accepted, accept p50 {:.2} ms, p99 {:.2} ms",
        accepted.requests,
        ms(0.5),
        ms(0.99)
    );
    receiver::receipts(receiver_addr, accepted.requests, started_ms).await
}
