//! Meta both ways. `FakeGraph` is a local server speaking the Graph API's messaging calls: WhatsApp Cloud's
//! `POST /{version}/{phone_number_id}/messages` (sends, reactions and `"status": "read"`) and the Messenger
//! Platform's `POST /{version}/me/messages` (sends and `sender_action`s), each with the channel's token as a
//! Bearer; it records every call and answers as Meta does, or with a scripted error. The free functions play
//! Meta calling our hooks: documented webhook bodies (`tests/fixtures/meta`) and batches built the same way,
//! signed with `X-Hub-Signature-256` computed here independently of the core's verifier.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    Router,
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use serde_json::{Value, json};

use crate::{Db, Server, platform::Platform, twilio::HookAnswer};

/// What Meta is told to call; the hooks are reached at the server's own address.
pub const PUBLIC_URL: &str = crate::sms::PUBLIC_URL;
pub const VERSION: &str = "v21.0";
pub const WHATSAPP_TOKEN: &str = "EAAG-whatsapp-token";
pub const PAGE_TOKEN: &str = "EAAG-page-token";
pub const APP_SECRET: &str = "fd0test0app0secret";
/// The documented samples' WhatsApp number id, and the page and contact ids of the Messenger ones.
pub const PHONE_NUMBER_ID: &str = "106540352242922";
pub const PAGE_ID: &str = "1234567890";
pub const PSID: &str = "6543210987654321";
pub const IG_ACCOUNT_ID: &str = "17841405822304914";

/// One call as it arrived.
#[derive(Clone, Debug)]
pub struct GraphCall {
    /// After the version: `{phone_number_id}/messages` or `me/messages`.
    pub path: String,
    pub authorization: String,
    pub body: Value,
    /// The id answered for a message sent, if any.
    pub answered_id: Option<String>,
}

impl GraphCall {
    /// A message (not a read mark, reaction or sender action).
    pub fn is_message(&self) -> bool {
        self.answered_id.is_some()
    }
}

#[derive(Default)]
struct Shared {
    calls: Mutex<Vec<GraphCall>>,
    /// Answers for the next calls, in order: status and Graph error code and message.
    errors: Mutex<VecDeque<(u16, i64, String)>>,
    /// Each call is taken in after a random wait of up to this, so calls made together land in any order.
    jitter: Mutex<Duration>,
}

#[derive(Clone)]
pub struct FakeGraph {
    /// `http://127.0.0.1:PORT`: `FRONTDESK_GRAPH_BASE_URL`.
    pub base_url: String,
    shared: Arc<Shared>,
}

impl FakeGraph {
    pub async fn start() -> Self {
        let shared = Arc::new(Shared::default());
        let app = Router::new()
            .route("/{version}/{node}/messages", post(messages))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base_url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { base_url, shared }
    }

    /// The next call is answered with Meta's error `code` and `message` under HTTP `status`.
    pub fn then_error(&self, status: u16, code: i64, message: &str) {
        self.shared
            .errors
            .lock()
            .unwrap()
            .push_back((status, code, message.to_owned()));
    }

    /// Every later call is taken in (recorded, applied) after a random wait of up to `up_to`.
    pub fn jitter(&self, up_to: Duration) {
        *self.shared.jitter.lock().unwrap() = up_to;
    }

    pub fn calls(&self) -> Vec<GraphCall> {
        self.shared.calls.lock().unwrap().clone()
    }

    /// Waits until `done` holds for the calls so far; the calls.
    pub async fn wait_for(&self, what: &str, done: impl Fn(&[GraphCall]) -> bool) -> Vec<GraphCall> {
        let started = Instant::now();
        loop {
            let calls = self.calls();
            if done(&calls) {
                return calls;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "fake graph: no {what} within 30 s; calls: {calls:#?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn messages(
    State(shared): State<Arc<Shared>>,
    Path((version, node)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let jitter = *shared.jitter.lock().unwrap();
    tokio::time::sleep(jitter.mul_f64(rand::random::<f64>())).await;
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let expected_token = if node == "me" { PAGE_TOKEN } else { WHATSAPP_TOKEN };
    let error = if version != VERSION || (node != "me" && node != PHONE_NUMBER_ID) {
        Some((404, 803, "Unknown path components".to_owned()))
    } else if authorization != format!("Bearer {expected_token}") {
        Some((401, 190, "Error validating access token".to_owned()))
    } else {
        shared.errors.lock().unwrap().pop_front()
    };
    let is_message = if node == "me" {
        body.get("message").is_some()
    } else {
        body.get("status").is_none() && body["type"] != "reaction"
    };
    let answered_id = (error.is_none() && is_message).then(|| {
        if node == "me" {
            format!("m_{:032x}", rand::random::<u128>())
        } else {
            format!("wamid.{:032x}", rand::random::<u128>())
        }
    });
    shared.calls.lock().unwrap().push(GraphCall {
        path: format!("{node}/messages"),
        authorization,
        body: body.clone(),
        answered_id: answered_id.clone(),
    });
    if let Some((status, code, message)) = error {
        let answer =
            json!({"error": {"message": message, "type": "OAuthException", "code": code, "fbtrace_id": "AbC"}});
        return (StatusCode::from_u16(status).unwrap(), axum::Json(answer)).into_response();
    }
    let answer = match (node.as_str(), answered_id) {
        ("me", Some(id)) => json!({"recipient_id": body["recipient"]["id"], "message_id": id}),
        ("me", None) => json!({"recipient_id": body["recipient"]["id"]}),
        (_, Some(id)) => json!({"messaging_product": "whatsapp",
            "contacts": [{"input": body["to"], "wa_id": body["to"]}], "messages": [{"id": id}]}),
        (_, None) => json!({"success": true}),
    };
    axum::Json(answer).into_response()
}

/// The service on `db` talking to `graph` (and `FAST`'s engines), with `extra` environment.
pub async fn start(db: &Db, graph: &FakeGraph, extra: &[(&str, &str)]) -> Server {
    let redis = crate::redis_server::shared_url();
    let mut env: Vec<(&str, &str)> = crate::sms::FAST.to_vec();
    env.push(("FRONTDESK_GRAPH_BASE_URL", &graph.base_url));
    if db.is_postgres() {
        env.push(("REDIS_URL", &redis));
    }
    env.extend_from_slice(extra);
    Server::start(db, &env).await
}

/// `X-Hub-Signature-256` of `body`: `sha256=` and the lower-case hex HMAC-SHA256 keyed with the app secret.
pub fn signature(app_secret: &str, body: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, app_secret.as_bytes());
    format!("sha256={}", hex::encode(ring::hmac::sign(&key, body)))
}

/// A connected Meta channel.
#[derive(Clone)]
pub struct MetaChannel {
    pub id: String,
    pub name: String,
    pub webhook_url: String,
    pub verify_token: String,
    /// The hook at the server's own address.
    pub local_url: String,
}

impl MetaChannel {
    /// Connects a `whatsapp` channel with the documented samples' number id.
    pub async fn whatsapp(platform: &Platform<'_>, name: &str) -> Self {
        let config =
            json!({"phone_number_id": PHONE_NUMBER_ID, "access_token": WHATSAPP_TOKEN, "app_secret": APP_SECRET});
        Self::connect(platform, name, "whatsapp", config).await
    }

    /// Connects a `messenger` channel for the documented samples' page.
    pub async fn messenger(platform: &Platform<'_>, name: &str) -> Self {
        let config = json!({"page_id": PAGE_ID, "access_token": PAGE_TOKEN, "app_secret": APP_SECRET});
        Self::connect(platform, name, "messenger", config).await
    }

    /// Connects an `instagram` channel for the documented samples' account.
    pub async fn instagram(platform: &Platform<'_>, name: &str) -> Self {
        let config = json!({"page_id": IG_ACCOUNT_ID, "access_token": PAGE_TOKEN, "app_secret": APP_SECRET});
        Self::connect(platform, name, "instagram", config).await
    }

    pub async fn connect(platform: &Platform<'_>, name: &str, kind: &str, config: Value) -> Self {
        let body = json!({"name": name, "type": kind, "config": config});
        let channel = platform.ok("POST", "/v1/channels", Some(body)).await["channel"].clone();
        let id = channel["id"].as_str().expect("channel id").to_owned();
        Self {
            webhook_url: channel["webhook_url"].as_str().expect("webhook_url").to_owned(),
            verify_token: channel["verify_token"].as_str().expect("verify_token").to_owned(),
            local_url: platform.server.url(&format!("/hooks/meta/{id}")),
            name: name.to_owned(),
            id,
        }
    }

    /// Plays Meta posting `body`, signed with the app secret.
    pub async fn post(&self, body: &str) -> HookAnswer {
        self.post_with(body, Some(&signature(APP_SECRET, body.as_bytes())))
            .await
    }

    /// Posts `body` with `signature` as `X-Hub-Signature-256` (no header when `None`).
    pub async fn post_with(&self, body: &str, signature: Option<&str>) -> HookAnswer {
        post_to(&self.local_url, body, signature).await
    }
}

/// POSTs `body` as JSON to `url` with `signature` as `X-Hub-Signature-256`.
pub async fn post_to(url: &str, body: &str, signature: Option<&str>) -> HookAnswer {
    let mut request = crate::http_client()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(signature) = signature {
        request = request.header("x-hub-signature-256", signature);
    }
    HookAnswer::of(request).await
}

/// A documented webhook body from `tests/fixtures/meta`.
pub fn fixture(name: &str) -> String {
    let path = format!("{}/fixtures/meta/{name}.json", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A WhatsApp `messages` webhook for our number holding `messages` (values of `messages[]`), with a contact
/// profile for each sender.
pub fn whatsapp_batch(messages: &[Value]) -> String {
    let contacts: Vec<Value> = messages
        .iter()
        .map(|m| json!({"profile": {"name": format!("Contact {}", m["from"].as_str().unwrap_or_default())}, "wa_id": m["from"]}))
        .collect();
    whatsapp_value(json!({"contacts": contacts, "messages": messages}))
}

/// A WhatsApp text message from `from` with id `wamid`.
pub fn whatsapp_text(from: &str, wamid: &str, text: &str) -> Value {
    json!({"from": from, "id": wamid, "timestamp": "1749416383", "type": "text", "text": {"body": text}})
}

/// A WhatsApp status webhook for our message `wamid`.
pub fn whatsapp_status(wamid: &str, status: &str, recipient: &str) -> String {
    let mut one = json!({"id": wamid, "status": status, "timestamp": "1750263773", "recipient_id": recipient});
    if status == "failed" {
        one["errors"] = json!([{"code": 131026, "title": "Message undeliverable", "message": "Message undeliverable",
            "error_data": {"details": "Message could not be delivered."}}]);
    }
    whatsapp_value(json!({"statuses": [one]}))
}

/// The envelope of a WhatsApp `messages` change whose value holds `fields` besides the metadata.
pub fn whatsapp_value(fields: Value) -> String {
    let mut value = json!({"messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550783881", "phone_number_id": PHONE_NUMBER_ID}});
    for (key, field) in fields.as_object().expect("fields").clone() {
        value[key] = field;
    }
    json!({"object": "whatsapp_business_account",
        "entry": [{"id": "102290129340398", "changes": [{"value": value, "field": "messages"}]}]})
    .to_string()
}

/// A Messenger (`object` `page`) or Instagram (`instagram`) webhook for `entry_id` holding `events`.
pub fn messaging(object: &str, entry_id: &str, events: &[Value]) -> String {
    json!({"object": object, "entry": [{"id": entry_id, "time": 1_458_692_752_478_i64, "messaging": events}]})
        .to_string()
}
