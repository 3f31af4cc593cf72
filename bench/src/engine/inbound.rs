//! Inbound sms as Twilio sends it: the form of its messaging webhook to `POST /hooks/twilio/{channelId}`,
//! signed with `X-Twilio-Signature` (base64 HMAC-SHA1 keyed with the auth token, over the public URL and each
//! parameter's name and value sorted by name), each with a fresh `MessageSid`, from 1,000 numbers in turn: the
//! first message of each (a new contact and conversation) comes mostly in the warm-up, so the figures are
//! those of conversations going on. Afterwards the database is counted: every answered request must have
//! stored one message with its `message.received`.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use base64::{Engine as _, engine::general_purpose::STANDARD};
use bytes::Bytes;

use super::{ACCOUNT_SID, AUTH_TOKEN, Engine, FROM_NUMBER, PUBLIC_URL};
use crate::{
    load::{self, HttpRequest, Pace, Requests, Shape},
    process::ServerProcess,
    scenarios::{Measured, measure},
};

pub const INBOUND: &str = "engine: POST /hooks/twilio/{channelId}, signed inbound sms";

/// What the database holds after the inbound run, against what was sent.
pub struct Stored {
    /// Requests sent (each one answered: a failed connection ends the run).
    pub sent: u64,
    /// Of them, answered other than 200.
    pub refused: u64,
    /// Messages each request carries.
    pub per_request: u64,
    pub messages: i64,
    pub distinct_sids: i64,
    pub events: i64,
}

impl Stored {
    /// What the channel `channel_id` holds after `sent` requests of `per_request` messages, `refused` of them
    /// answered other than 200, beside the `events` counted for them.
    pub(super) async fn counted(
        engine: &Engine,
        channel_id: &str,
        sent: u64,
        refused: u64,
        per_request: u64,
        events: i64,
    ) -> anyhow::Result<Self> {
        let channel = vec![channel_id.into()];
        Ok(Self {
            sent,
            refused,
            per_request,
            messages: engine
                .count(
                    "SELECT count(*) FROM messages WHERE channel_id = $1 AND direction = 'inbound'",
                    channel.clone(),
                )
                .await?,
            distinct_sids: engine
                .count(
                    "SELECT count(DISTINCT provider_message_id) FROM messages WHERE channel_id = $1 AND direction = 'inbound'",
                    channel,
                )
                .await?,
            events,
        })
    }

    /// Every request answered 200 stored exactly its messages and their events.
    pub fn exact(&self) -> bool {
        let answered = i64::try_from((self.sent - self.refused) * self.per_request).unwrap_or(-1);
        self.messages == answered && self.distinct_sids == answered && self.events == answered
    }
}

pub async fn run(engine: &Engine, serve: &ServerProcess, shape: Shape) -> anyhow::Result<(Measured, Stored)> {
    let senders: u64 = if shape.smoke() { 50 } else { 1_000 };
    let path = format!("/hooks/twilio/{}", engine.channel_id);
    let url = format!("{PUBLIC_URL}{path}");
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, AUTH_TOKEN.as_bytes());
    // Message sids unique across runs too: the run's own prefix, then the send's number.
    let run = rand::random::<u64>();
    let sent = Arc::new(AtomicU64::new(0));
    let counted = sent.clone();
    let requests = Requests::each(move |turn| {
        counted.fetch_add(1, Ordering::Relaxed);
        let sid = format!("SM{run:016x}{:016x}", turn.number);
        let from = format!("+1666{:07}", turn.number % senders);
        Some(signed_inbound(
            &key,
            &url,
            &path,
            &sid,
            &from,
            "Hi, is my order on its way?",
        ))
    });
    let measured = measure(
        INBOUND,
        &[serve],
        load::http_sends(engine.http, requests, Pace::Closed, shape),
    )
    .await?;
    let events = engine
        .count(
            "SELECT count(*) FROM event_outbox WHERE event_type = 'message.received'",
            vec![],
        )
        .await?;
    let sent = sent.load(Ordering::Relaxed);
    let stored = Stored::counted(
        engine,
        &engine.channel_id,
        sent,
        measured.outcome.error_count(),
        1,
        events,
    )
    .await?;
    Ok((measured, stored))
}

/// The form Twilio posts for an inbound sms (no media) from `from` to the channel's number.
fn inbound_form(sid: &str, from: &str, body: &str) -> [(&'static str, String); 19] {
    let to = FROM_NUMBER.to_owned();
    [
        ("ToCountry", "US".to_owned()),
        ("ToState", "CA".to_owned()),
        ("SmsMessageSid", sid.to_owned()),
        ("NumMedia", "0".to_owned()),
        ("ToCity", "SAN FRANCISCO".to_owned()),
        ("FromZip", "94105".to_owned()),
        ("SmsSid", sid.to_owned()),
        ("FromState", "CA".to_owned()),
        ("SmsStatus", "received".to_owned()),
        ("FromCity", "SAN FRANCISCO".to_owned()),
        ("Body", body.to_owned()),
        ("FromCountry", "US".to_owned()),
        ("To", to),
        ("ToZip", "94105".to_owned()),
        ("NumSegments", "1".to_owned()),
        ("MessageSid", sid.to_owned()),
        ("AccountSid", ACCOUNT_SID.to_owned()),
        ("From", from.to_owned()),
        ("ApiVersion", "2010-04-01".to_owned()),
    ]
}

/// `X-Twilio-Signature` of a request to `url` with `form`.
fn sign(key: &ring::hmac::Key, url: &str, form: &[(&'static str, String)]) -> String {
    let mut sorted: Vec<&(&str, String)> = form.iter().collect();
    sorted.sort();
    let mut signed = url.to_owned();
    for (name, value) in sorted {
        signed.push_str(name);
        signed.push_str(value);
    }
    STANDARD.encode(ring::hmac::sign(key, signed.as_bytes()))
}

/// Twilio's inbound sms request to the hook at `path` (public `url`), signed with `key`.
pub(super) fn signed_inbound(
    key: &ring::hmac::Key,
    url: &str,
    path: &str,
    sid: &str,
    from: &str,
    text: &str,
) -> HttpRequest {
    let form = inbound_form(sid, from, text);
    let signature = sign(key, url, &form);
    let mut body = url::form_urlencoded::Serializer::new(String::new());
    body.extend_pairs(&form);
    HttpRequest {
        method: http::Method::POST,
        path: path.to_owned(),
        headers: vec![
            (
                "content-type".to_owned(),
                "application/x-www-form-urlencoded".to_owned(),
            ),
            ("x-twilio-signature".to_owned(), signature),
        ],
        body: Bytes::from(body.finish()),
    }
}

#[cfg(test)]
mod tests {
    /// The example of Twilio's webhook-security documentation (twilio-python's test vector).
    #[test]
    fn signs_as_twilio_does() {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, b"12345");
        let form = [
            ("CallSid", "CA1234567890ABCDE".to_owned()),
            ("Digits", "1234".to_owned()),
            ("From", "+14158675309".to_owned()),
            ("To", "+18005551212".to_owned()),
            ("Caller", "+14158675309".to_owned()),
        ];
        let url = "https://mycompany.com/myapp.php?foo=1&bar=2";
        assert_eq!(super::sign(&key, url, &form), "RSOYDt4T1cUTdK1PDd93/VVr8B8=");
    }
}
