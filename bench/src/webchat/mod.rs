//! Web chat's scenarios: what an idle visitor socket costs `serve` on its embedded default (SQLite), against
//! the same socket on a bare axum server (`idle`); and 1,000 visitors chatting at once on PostgreSQL + Redis,
//! each writing every 2 s and answered through the API every 2 s, timed from the visitor's frame to the
//! business's `message.received` webhook and from the API call to the visitor's frame, against a bare
//! WebSocket echo at the same rate (`active`).

mod active;
mod idle;

use std::{net::SocketAddr, sync::Arc};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

pub use active::{ACTIVE_API, ACTIVE_ECHO, ACTIVE_LIMIT, ACTIVE_VISITOR};
pub use idle::IdleSockets;

use crate::{process::ServerProcess, scenarios::Measured};

/// Web chat's figures.
pub struct Figures {
    pub measured: Vec<Measured>,
    pub idle: Option<IdleSockets>,
}

pub async fn run(
    setup: &crate::scenarios::Setup,
    shape: crate::load::Shape,
    wanted: impl Fn(&str) -> bool,
) -> anyhow::Result<Figures> {
    let mut figures = Figures {
        measured: Vec::new(),
        idle: None,
    };
    if wanted(idle::IDLE) {
        figures.idle = Some(idle::run(setup, shape).await?);
    }
    if wanted(ACTIVE_VISITOR) || wanted(ACTIVE_API) {
        figures.measured.extend(active::run(setup, shape).await?);
    }
    Ok(figures)
}

/// Lifts the visitor budgets past what a scenario does: its whole crowd of visitors comes from one address,
/// to one channel of one account, and would otherwise be refused as the flood it looks like.
fn crowd_budgets(env: &mut std::collections::BTreeMap<String, String>) {
    for (var, value) in [
        ("FRONTDESK_WEBCHAT_SESSIONS_PER_MINUTE", "100000"),
        ("FRONTDESK_WEBCHAT_CHANNEL_SESSIONS_PER_MINUTE", "1000000"),
        ("FRONTDESK_WEBCHAT_ACCOUNT_SESSIONS_PER_MINUTE", "1000000"),
        ("FRONTDESK_WEBCHAT_CHANNEL_MESSAGES_PER_MINUTE", "1000000"),
        ("FRONTDESK_WEBCHAT_ACCOUNT_MESSAGES_PER_MINUTE", "1000000"),
        ("FRONTDESK_WEBCHAT_SOCKETS_PER_ADDRESS", "1000000"),
    ] {
        env.insert(var.into(), value.into());
    }
}

/// A web chat channel and its visitors on a running server.
struct Site {
    http: SocketAddr,
    key: String,
    visitors: Vec<Visitor>,
}

#[derive(Clone)]
struct Visitor {
    token: String,
    contact_id: String,
}

impl Site {
    /// A fresh account on `serve`, a web chat channel, and `visitors` sessions started by 32 callers.
    async fn prepare(serve: &ServerProcess, visitors: usize) -> anyhow::Result<Self> {
        let http = serve.http.expect("http");
        let key = crate::scenarios::bench_account(serve.grpc.expect("grpc")).await?;
        let channel = post_json(
            http,
            "/v1/channels",
            Some(&key),
            json!({"name": "site", "type": "webchat"}),
        )
        .await?;
        let widget_key = channel["channel"]["widget_key"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("no widget key: {channel}"))?
            .to_owned();
        let started = Arc::new(std::sync::Mutex::new(Vec::with_capacity(visitors)));
        const CALLERS: usize = 32;
        let mut callers = tokio::task::JoinSet::new();
        for caller in 0..CALLERS {
            let (widget_key, started) = (widget_key.clone(), started.clone());
            callers.spawn(async move {
                for _ in (caller..visitors).step_by(CALLERS) {
                    let body = json!({"widget_key": widget_key});
                    let session = post_json(http, "/webchat/v1/sessions", None, body).await?;
                    let text = |name: &str| session[name].as_str().unwrap_or_default().to_owned();
                    let visitor = Visitor {
                        token: text("token"),
                        contact_id: text("contact_id"),
                    };
                    anyhow::ensure!(!visitor.token.is_empty(), "a session did not start: {session}");
                    started.lock().unwrap_or_else(|e| e.into_inner()).push(visitor);
                }
                anyhow::Ok(())
            });
        }
        for result in callers.join_all().await {
            result?;
        }
        let visitors = std::mem::take(&mut *started.lock().unwrap_or_else(|e| e.into_inner()));
        Ok(Self { http, key, visitors })
    }
}

/// `POST path` with a JSON body (and the API key when given); the answer's JSON, which must be a success.
async fn post_json(addr: SocketAddr, path: &str, key: Option<&str>, body: Value) -> anyhow::Result<Value> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let mut request = http::Request::post(path)
        .header(http::header::HOST, addr.to_string())
        .header(http::header::CONTENT_TYPE, "application/json");
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    let request = request.body(Full::new(Bytes::from(body.to_string())))?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    let bytes = response.into_body().collect().await?.to_bytes();
    let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    anyhow::ensure!(status.is_success(), "POST {path}: {status} {answer}");
    Ok(answer)
}

/// The visitor socket URL of `token` on `http`.
fn socket_url(http: SocketAddr, token: &str) -> String {
    format!("ws://{http}/webchat/v1/ws?token={token}")
}
