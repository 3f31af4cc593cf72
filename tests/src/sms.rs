//! An SMS set-up for conversation tests: the service started against a fake Twilio, with a public URL the
//! tests sign Twilio's callbacks for, fast job and webhook engines, and an sms channel connected.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    Db, Server,
    platform::Platform,
    twilio::{self, FakeTwilio, HookAnswer},
};

/// What Twilio is told to call; callbacks are signed for it (the service sits behind a proxy at this name).
pub const PUBLIC_URL: &str = "https://frontdesk.test";

/// Short retries, leases and polls, loopback webhook receivers allowed.
pub const FAST: &[(&str, &str)] = &[
    ("FRONTDESK_PUBLIC_URL", PUBLIC_URL),
    ("FRONTDESK_ALLOW_PRIVATE_URLS", "true"),
    ("FRONTDESK_SEND_RETRY_SCHEDULE", "200ms,200ms,200ms"),
    ("FRONTDESK_PROVIDER_TIMEOUT", "5s"),
    ("FRONTDESK_JOB_LEASE", "2s"),
    ("FRONTDESK_JOB_POLL_INTERVAL", "20ms"),
    ("FRONTDESK_WEBHOOK_RETRY_SCHEDULE", "1s,1s,1s"),
    ("FRONTDESK_WEBHOOK_POLL_INTERVAL", "20ms"),
];

/// The service on `db` talking to `twilio`, with `extra` environment on top of `FAST`; on PostgreSQL with
/// Redis beside it, as in production.
pub async fn start(db: &Db, twilio: &FakeTwilio, extra: &[(&str, &str)]) -> Server {
    let redis = crate::redis_server::shared_url();
    let mut env: Vec<(&str, &str)> = FAST.to_vec();
    env.push(("FRONTDESK_TWILIO_BASE_URL", &twilio.base_url));
    if db.is_postgres() {
        env.push(("REDIS_URL", &redis));
    }
    env.extend_from_slice(extra);
    Server::start(db, &env).await
}

/// `start` with the embedding model (`server::embedding_model`) and no reply debounce: replies decided by
/// meaning as well as words, as soon as a message is in.
pub async fn start_with_model(db: &Db, twilio: &FakeTwilio) -> Server {
    let model = crate::server::embedding_model();
    let env = [
        ("FRONTDESK_REPLY_DEBOUNCE_MS", "0"),
        ("FRONTDESK_EMBEDDING_MODEL", model.as_str()),
    ];
    start(db, twilio, &env).await
}

/// An account with an sms channel `sms` whose default agent, made of `agent`'s fields, knows one FAQ.
pub struct Desk<'a> {
    pub platform: Platform<'a>,
    pub channel: SmsChannel,
    pub agent: String,
}

impl<'a> Desk<'a> {
    pub async fn open(server: &'a Server, twilio: &FakeTwilio, agent: Value, faq: (&str, &str)) -> Desk<'a> {
        let platform = Platform::new(server).await;
        let channel = SmsChannel::connect(&platform, twilio, "sms", None).await;
        let created = platform.ok("POST", "/v1/agents", Some(agent)).await;
        let agent = created["agent"]["id"].as_str().expect("the agent's id").to_owned();
        platform.faq(&agent, faq.0, faq.1).await;
        let default = json!({"channel": "sms", "agent_id": agent});
        platform
            .ok("PUT", "/v1/entry-points/channel-defaults", Some(default))
            .await;
        Desk {
            platform,
            channel,
            agent,
        }
    }
}

/// A connected sms channel of the account.
#[derive(Clone)]
pub struct SmsChannel {
    pub id: String,
    pub name: String,
    /// `{PUBLIC_URL}/hooks/twilio/{id}`.
    pub webhook_url: String,
    auth_token: String,
    /// Where the test reaches the hook: the server's own address.
    local_url: String,
}

impl SmsChannel {
    /// Connects channel `name` with `twilio`'s credentials (and `max_per_second`, when given).
    pub async fn connect(platform: &Platform<'_>, twilio: &FakeTwilio, name: &str, per_second: Option<u32>) -> Self {
        let mut config = twilio.channel_config();
        if let Some(rate) = per_second {
            config["max_per_second"] = json!(rate.to_string());
        }
        let body = json!({"name": name, "type": "sms", "config": config});
        let channel = platform.ok("POST", "/v1/channels", Some(body)).await["channel"].clone();
        let id = channel["id"].as_str().expect("channel id").to_owned();
        Self {
            webhook_url: channel["webhook_url"].as_str().expect("webhook_url").to_owned(),
            local_url: platform.server.url(&format!("/hooks/twilio/{id}")),
            name: name.to_owned(),
            id,
            auth_token: twilio.auth_token.clone(),
        }
    }

    /// Plays Twilio delivering an inbound SMS `body` from `from` (message id `sid`).
    pub async fn inbound(&self, sid: &str, from: &str, body: &str) -> HookAnswer {
        self.inbound_with_media(sid, from, body, &[]).await
    }

    /// The same with `media` (URL, content type) pairs: an MMS.
    pub async fn inbound_with_media(&self, sid: &str, from: &str, body: &str, media: &[(&str, &str)]) -> HookAnswer {
        let form = twilio::inbound_message(sid, from, twilio::FROM_NUMBER, body, media);
        twilio::post_signed(&self.local_url, &self.webhook_url, &self.auth_token, &form).await
    }

    /// Plays Twilio's status callback for message `sid`.
    pub async fn status(&self, sid: &str, status: &str, error_code: Option<&str>) -> HookAnswer {
        let form = twilio::status_callback(sid, status, error_code);
        let local = format!("{}/status", self.local_url);
        let public = format!("{}/status", self.webhook_url);
        twilio::post_signed(&local, &public, &self.auth_token, &form).await
    }

    /// The same channel reached at `server` (another replica, or the process restarted on a new port).
    pub fn at(&self, server: &Server) -> Self {
        Self {
            local_url: server.url(&format!("/hooks/twilio/{}", self.id)),
            ..self.clone()
        }
    }

    /// The hook's local address, for requests the test builds itself.
    pub fn local_url(&self) -> &str {
        &self.local_url
    }
}

/// Sends `text` to `phone` on the account's channel named `channel` (`POST /v1/contacts/send`), which must
/// be accepted; the message's id.
pub async fn send(platform: &Platform<'_>, channel: &str, phone: &str, text: &str) -> String {
    let body = json!({"phone": phone, "text": text, "channel": channel});
    let answer = platform.send("POST", "/v1/contacts/send", Some(body)).await;
    assert_eq!(answer.status, 202, "{}", answer.body);
    answer.body["message_id"].as_str().unwrap().to_owned()
}

/// Polls message `id` until `done` holds for it; the message.
pub async fn message_when(platform: &Platform<'_>, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = std::time::Instant::now();
    loop {
        let message = platform.ok("GET", &format!("/v1/messages/{id}"), None).await["message"].clone();
        if done(&message) {
            return message;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "message {id} never got there: {message}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
