//! Inbound WhatsApp as Meta sends it: `POST /hooks/meta/{channelId}` with the Cloud API's `messages` webhook,
//! ten text messages per POST (Meta batches a number's traffic), each from one of 1,000 contacts in turn and
//! with a fresh wamid, signed with `X-Hub-Signature-256` (HMAC-SHA256 of the body with the app secret). A
//! closed loop says how many messages get stored per second; the same POSTs paced at the goal's 5,000
//! messages per second say how long each ack takes when the hook is not kept saturated. The limit beside
//! them: the same POSTs refused at the signature check (401, nothing parsed or stored), which is
//! what the hook path costs before the storage: ten times its rate is the most messages per second the
//! hook could take here. Afterwards the database is counted: every answered POST must
//! have stored ten messages with their `message.received`.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use bytes::Bytes;
use frontdesk_api::v1::{ConnectChannelRequest, channels_client::ChannelsClient};
use serde_json::json;
use tonic::{metadata::MetadataValue, transport::Channel};

use super::{Engine, Stored, keyed};
use crate::{
    load::{self, HttpRequest, Pace, Requests, Shape},
    process::ServerProcess,
    scenarios::{Measured, measure},
};

pub const META_INBOUND: &str = "engine: POST /hooks/meta/{channelId}, signed WhatsApp batches of 10 messages";
pub const META_REFUSED: &str =
    "engine: the same WhatsApp batches with a wrong signature (401 at the signature check): the hook's floor";
pub const META_PACED: &str =
    "engine: the same signed WhatsApp batches paced at 500 POSTs/s (5,000 messages/s, the goal), ack";
/// Messages in each POST.
pub const PER_POST: u64 = 10;

/// The goal for stored messages per second: the paced run's rate.
pub const GOAL_MESSAGES_PER_SECOND: f64 = 5_000.0;

const APP_SECRET: &str = "bench0app0secret";
const PHONE_NUMBER_ID: &str = "106540352242922";

pub async fn run(engine: &Engine, serve: &ServerProcess, shape: Shape) -> anyhow::Result<(Vec<Measured>, Stored)> {
    let channel_id = connect(serve, &engine.key).await?;
    let path = format!("/hooks/meta/{channel_id}");
    let senders: u64 = if shape.smoke() { 50 } else { 1_000 };
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, APP_SECRET.as_bytes());
    let wrong = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"not the app secret");
    // Message ids unique across runs and across this scenario's loads: each load's own prefix, then the
    // message's number (a repeated wamid would be Meta's retry, which stores nothing).
    let batches = move |key: ring::hmac::Key, path: String, sent: Arc<AtomicU64>| {
        let run = rand::random::<u64>();
        Requests::each(move |turn| {
            sent.fetch_add(1, Ordering::Relaxed);
            let messages: Vec<serde_json::Value> = (0..PER_POST)
                .map(|i| {
                    let n = turn.number * PER_POST + i;
                    json!({"from": format!("1666{:07}", n % senders), "id": format!("wamid.{run:016x}{n:016x}"),
                        "timestamp": "1750000000", "type": "text", "text": {"body": "Hi, is my order on its way?"}})
                })
                .collect();
            Some(signed(&key, &path, &batch(&messages)))
        })
    };
    let refused_sent = Arc::new(AtomicU64::new(0));
    let floor = measure(
        META_REFUSED,
        &[serve],
        load::http_sends(
            engine.http,
            batches(wrong, path.clone(), refused_sent),
            Pace::Closed,
            shape,
        ),
    )
    .await?;
    let events_before = received_events(engine).await?;
    let sent = Arc::new(AtomicU64::new(0));
    let stored_run = measure(
        META_INBOUND,
        &[serve],
        load::http_sends(
            engine.http,
            batches(key.clone(), path.clone(), sent.clone()),
            Pace::Closed,
            shape,
        ),
    )
    .await?;
    // The closed loop answers how much gets stored; its acks wait in the queue it keeps full. At the goal's
    // rate, the acks say how long Meta waits.
    let goal = Pace::Open {
        per_second: GOAL_MESSAGES_PER_SECOND / PER_POST as f64,
    };
    let paced = measure(
        META_PACED,
        &[serve],
        load::http_sends(engine.http, batches(key, path, sent.clone()), goal, shape),
    )
    .await?;
    let refused = stored_run.outcome.error_count() + paced.outcome.error_count();
    let events = received_events(engine).await? - events_before;
    let sent = sent.load(Ordering::Relaxed);
    let stored = Stored::counted(engine, &channel_id, sent, refused, PER_POST, events).await?;
    Ok((vec![floor, stored_run, paced], stored))
}

async fn received_events(engine: &Engine) -> anyhow::Result<i64> {
    engine
        .count(
            "SELECT count(*) FROM event_outbox WHERE event_type = 'message.received'",
            vec![],
        )
        .await
}

/// A WhatsApp channel of the account on `serve`; its id.
async fn connect(serve: &ServerProcess, key: &str) -> anyhow::Result<String> {
    let grpc = Channel::from_shared(format!("http://{}", serve.grpc.expect("grpc")))?
        .connect()
        .await?;
    let metadata: MetadataValue<_> = key.parse()?;
    let config = [
        ("phone_number_id", PHONE_NUMBER_ID),
        ("access_token", "EAAG-bench"),
        ("app_secret", APP_SECRET),
    ];
    let connected = ChannelsClient::new(grpc)
        .connect_channel(keyed(
            &metadata,
            ConnectChannelRequest {
                name: "whatsapp".into(),
                r#type: "whatsapp".into(),
                config: config.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
                ..Default::default()
            },
        ))
        .await?
        .into_inner();
    let id = connected.channel.map(|c| c.id).unwrap_or_default();
    anyhow::ensure!(!id.is_empty(), "the whatsapp channel came back without an id");
    Ok(id)
}

/// The Cloud API's `messages` webhook for the channel's number holding `messages`, with each sender's profile.
fn batch(messages: &[serde_json::Value]) -> String {
    let contacts: Vec<serde_json::Value> = messages
        .iter()
        .map(|m| json!({"profile": {"name": "Bench Customer"}, "wa_id": m["from"]}))
        .collect();
    json!({"object": "whatsapp_business_account", "entry": [{"id": "102290129340398", "changes": [{"field": "messages",
        "value": {"messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550783881", "phone_number_id": PHONE_NUMBER_ID},
            "contacts": contacts, "messages": messages}}]}]})
    .to_string()
}

/// Meta's POST of `body` to the hook at `path`, signed with `key`.
fn signed(key: &ring::hmac::Key, path: &str, body: &str) -> HttpRequest {
    let digest = ring::hmac::sign(key, body.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let signature = format!("sha256={hex}");
    HttpRequest {
        method: http::Method::POST,
        path: path.to_owned(),
        headers: vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("x-hub-signature-256".to_owned(), signature),
        ],
        body: Bytes::from(body.to_owned()),
    }
}
