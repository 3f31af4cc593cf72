//! Messenger and Instagram on the Messenger Platform. Sending is `POST {root}/me/messages` with the page's
//! token: `{"recipient": {"id"}, "messaging_type": "RESPONSE", "message": {"text"} | {"attachment"}}`,
//! answered with `{"recipient_id", "message_id"}`; `sender_action` `mark_seen`, `react` and `unreact` go to
//! the same path. Meta calls the hook with `{"object": "page" | "instagram", "entry": [{"id", "messaging":
//! [...]}]}`, each event a `message`, a `delivery` or `read` report (by message ids, or by `watermark`: every
//! message sent up to that time), a `reaction`, a `postback` or a `referral` (an `m.me` link with a `ref`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use wire::{Event, Payload, Referral};

use super::{
    graph::{Graph, GraphApi},
    hook::{Addressed, HookKeys, acknowledgement},
    placeholder, required, unreadable,
};
use crate::channels::{
    Attachment, Callbacks, ChannelAdapter, ConfigError, Inbound, InboundMessage, InboundReaction, Outbound, ParseError,
    ProviderStatus, RawRequest, Reply, SendOutcome, Sender, Signal, SignatureError, StatusUpdate, Watermark,
};
use crate::store::entities::channels::ChannelKind;

/// The Send API's path: the page is the token's.
const MESSAGES: &str = "me/messages";

pub struct MessengerAdapter {
    graph: Graph,
    page_id: String,
    /// `messenger` or `instagram`: the channel's type, which names its contacts' identities.
    kind: &'static str,
    keys: HookKeys,
}

impl MessengerAdapter {
    /// From the channel's type and decrypted config: `page_id` (for Instagram, the professional account's
    /// id, which Meta's events name as the entry), `access_token` (the page's), `app_secret`; and the
    /// channel's verify token.
    pub fn new(
        kind: ChannelKind,
        config: &BTreeMap<String, String>,
        verify_token: &str,
        api: &GraphApi,
        http: reqwest::Client,
    ) -> Result<Self, ConfigError> {
        let kind = if kind == ChannelKind::Instagram {
            "instagram"
        } else {
            "messenger"
        };
        Ok(Self {
            graph: Graph::new(api, required(config, "access_token")?, http),
            page_id: required(config, "page_id")?.to_owned(),
            kind,
            keys: HookKeys::new(required(config, "app_secret")?, verify_token),
        })
    }

    /// The `object` Meta names this channel's events with.
    fn object(&self) -> &'static str {
        if self.kind == "instagram" { "instagram" } else { "page" }
    }

    /// The message's parts, each one call: the text, then each attachment by its URL.
    fn parts(message: &Outbound<'_>) -> Vec<Value> {
        let recipient = json!({"id": message.to});
        let mut parts = Vec::new();
        if !message.text.is_empty() {
            parts
                .push(json!({"recipient": recipient, "messaging_type": "RESPONSE", "message": {"text": message.text}}));
        }
        for attachment in message.attachments {
            let kind = match attachment.content_type.split('/').next().unwrap_or_default() {
                kind @ ("image" | "video" | "audio") => kind,
                _ => "file",
            };
            parts.push(json!({
                "recipient": recipient,
                "messaging_type": "RESPONSE",
                "message": {"attachment": {"type": kind, "payload": {"url": attachment.url, "is_reusable": false}}},
            }));
        }
        parts
    }

    fn sender(&self, id: &str) -> Sender {
        Sender::Identity {
            kind: self.kind,
            external_id: id.to_owned(),
        }
    }
}

#[async_trait::async_trait]
impl ChannelAdapter for MessengerAdapter {
    fn callbacks(&self) -> Option<&dyn Callbacks> {
        Some(self)
    }

    async fn send(&self, message: &Outbound<'_>) -> SendOutcome {
        self.graph
            .send_parts(MESSAGES, Self::parts(message), |answer| answer["message_id"].as_str())
            .await
    }

    async fn signal(&self, signal: &Signal<'_>) -> Option<SendOutcome> {
        let body = match *signal {
            Signal::Read { to, .. } => json!({"recipient": {"id": to}, "sender_action": "mark_seen"}),
            Signal::React {
                to,
                provider_message_id,
                emoji: "",
            } => {
                json!({"recipient": {"id": to}, "sender_action": "unreact", "payload": {"message_id": provider_message_id}})
            }
            Signal::React {
                to,
                provider_message_id,
                emoji,
            } => json!({
                "recipient": {"id": to},
                "sender_action": "react",
                "payload": {"message_id": provider_message_id, "reaction": emoji},
            }),
        };
        Some(self.graph.signal(MESSAGES, &body).await)
    }
}

impl Callbacks for MessengerAdapter {
    fn handshake(&self, request: &RawRequest) -> Option<Reply> {
        self.keys.handshake(request)
    }

    fn verify(&self, request: &RawRequest) -> Result<(), SignatureError> {
        self.keys.verify(request)
    }

    fn parse(&self, request: &RawRequest) -> Result<Inbound, ParseError> {
        let payload: Payload = serde_json::from_slice(&request.body).map_err(|e| unreadable(&e))?;
        match payload.object.as_str() {
            "page" | "instagram" if payload.object == self.object() => {}
            "page" | "instagram" => return Err(ParseError::OtherChannel(format!("object {}", payload.object))),
            _ => {
                return Err(ParseError::InvalidField {
                    field: "object".to_owned(),
                    reason: "not page or instagram",
                });
            }
        }
        let mut inbound = Inbound::default();
        let mut addressed = Addressed::default();
        for entry in &payload.entry {
            if entry.id != self.page_id {
                addressed.other(format!("page {}", entry.id));
                continue;
            }
            addressed.ours();
            for event in &entry.messaging {
                self.read_event(event, &mut inbound)?;
            }
        }
        addressed.verdict(inbound)
    }

    fn acknowledge(&self) -> Reply {
        acknowledgement()
    }
}

impl MessengerAdapter {
    /// Reads one event into `inbound`; an event of a kind read here must name its sender.
    fn read_event(&self, event: &Event, inbound: &mut Inbound) -> Result<(), ParseError> {
        let read = event.message.is_some()
            || event.postback.is_some()
            || event.referral.is_some()
            || event.delivery.is_some()
            || event.read.is_some()
            || event.reaction.is_some();
        if !read {
            return Ok(());
        }
        let contact = event
            .sender
            .as_ref()
            .map(|sender| sender.id.as_str())
            .ok_or_else(|| ParseError::MissingField("entry[].messaging[].sender.id".to_owned()))?;
        let arrival = |id: String, text: String, attachments, referral: String, answerable| InboundMessage {
            provider_message_id: id,
            sender: self.sender(contact),
            recipient: self.page_id.clone(),
            text,
            attachments,
            sender_name: String::new(),
            referral,
            page_url: String::new(),
            answerable,
        };
        if let Some(message) = &event.message {
            // Echoes are the page's own messages, deleted ones are gone: neither is the contact's news.
            if message.is_echo || message.is_deleted {
                return Ok(());
            }
            let attachments: Vec<Attachment> = message
                .attachments
                .iter()
                .filter_map(|a| {
                    Some(Attachment {
                        url: a.payload.as_ref()?.url.clone()?,
                        content_type: content_type(&a.kind).to_owned(),
                        filename: String::new(),
                    })
                })
                .collect();
            let sticker = message
                .attachments
                .iter()
                .any(|a| a.payload.as_ref().is_some_and(|p| p.sticker_id.is_some()));
            let (text, answerable) = match &message.text {
                Some(text) if !text.is_empty() => (text.clone(), true),
                _ if sticker => (placeholder("sticker"), false),
                _ if message.is_unsupported => (placeholder("unsupported"), false),
                _ => match message.attachments.first() {
                    Some(first) => (placeholder(&first.kind), true),
                    None => (placeholder("message"), false),
                },
            };
            let referral = message
                .referral
                .as_ref()
                .or(event.referral.as_ref())
                .map(Referral::key)
                .unwrap_or_default();
            inbound
                .messages
                .push(arrival(message.mid.clone(), text, attachments, referral, answerable));
        } else if let Some(postback) = &event.postback {
            let id = postback
                .mid
                .clone()
                .unwrap_or_else(|| format!("postback:{contact}:{}", event.timestamp));
            let referral = postback.referral.as_ref().map(Referral::key).unwrap_or_default();
            let text = if postback.title.is_empty() {
                placeholder("postback")
            } else {
                postback.title.clone()
            };
            inbound.messages.push(arrival(id, text, Vec::new(), referral, true));
        } else if let Some(referral) = &event.referral {
            // The contact opened the thread from a link or an ad: kept so that the conversation it opens goes
            // to the entry point's agent, and shown, but it asks nothing.
            let key = referral.key();
            let id = format!("referral:{contact}:{}", event.timestamp);
            let text = format!("[referral: {key}]");
            inbound.messages.push(arrival(id, text, Vec::new(), key, false));
        } else if let Some(delivery) = &event.delivery {
            for mid in &delivery.mids {
                inbound.statuses.push(StatusUpdate {
                    provider_message_id: mid.clone(),
                    status: ProviderStatus::Delivered,
                });
            }
            if let Some(up_to) = delivery.watermark.and_then(DateTime::<Utc>::from_timestamp_millis) {
                inbound.watermarks.push(Watermark {
                    recipient: self.sender(contact),
                    up_to,
                    status: ProviderStatus::Delivered,
                });
            }
        } else if let Some(read) = &event.read {
            if let Some(mid) = &read.mid {
                inbound.statuses.push(StatusUpdate {
                    provider_message_id: mid.clone(),
                    status: ProviderStatus::Read,
                });
            }
            if let Some(up_to) = read.watermark.and_then(DateTime::<Utc>::from_timestamp_millis) {
                inbound.watermarks.push(Watermark {
                    recipient: self.sender(contact),
                    up_to,
                    status: ProviderStatus::Read,
                });
            }
        } else if let Some(reaction) = &event.reaction {
            inbound.reactions.push(InboundReaction {
                provider_message_id: reaction.mid.clone(),
                emoji: reaction.emoji(),
            });
        }
        Ok(())
    }
}

/// The content type an attachment's type stands for, as far as Meta says.
fn content_type(kind: &str) -> &'static str {
    match kind {
        "image" => "image/*",
        "video" => "video/*",
        "audio" => "audio/*",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests;
mod wire;
