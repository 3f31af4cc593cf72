//! WhatsApp Cloud API. Sending is `POST {root}/{phone_number_id}/messages` with
//! `{"messaging_product": "whatsapp", "to", "type": "text" | "template" | "image" | "document" | ... }`,
//! answered with `{"messages": [{"id": "wamid..."}]}`; the same path marks a message read (`"status":
//! "read"`) and carries reactions (`"type": "reaction"`). Meta calls the hook with
//! `{"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages", "value": {...}}]}]}`
//! whose values hold the contacts' messages (with `contacts[].profile.name`) and the statuses of ours.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};
use wire::{ChangeValue, Location, Payload, WaError, WaMessage};

use super::{
    graph::{Graph, GraphApi},
    hook::{Addressed, HookKeys, acknowledgement},
    placeholder, required, unreadable,
};
use crate::channels::{
    Attachment, Callbacks, ChannelAdapter, ConfigError, Inbound, InboundMessage, InboundReaction, Outbound, ParseError,
    ProviderStatus, RawRequest, Reply, SendOutcome, Sender, Signal, SignatureError, StatusUpdate, Template,
};

pub struct WhatsAppAdapter {
    graph: Graph,
    phone_number_id: String,
    keys: HookKeys,
}

impl WhatsAppAdapter {
    /// From the channel's decrypted config: `phone_number_id`, `access_token`, `app_secret`; and the
    /// channel's verify token.
    pub fn new(
        config: &BTreeMap<String, String>,
        verify_token: &str,
        api: &GraphApi,
        http: reqwest::Client,
    ) -> Result<Self, ConfigError> {
        let phone_number_id = required(config, "phone_number_id")?;
        if !is_number_id(phone_number_id) {
            return Err(ConfigError::Invalid {
                key: "phone_number_id",
                reason: "not a number id",
            });
        }
        Ok(Self {
            graph: Graph::new(api, required(config, "access_token")?, http),
            phone_number_id: phone_number_id.to_owned(),
            keys: HookKeys::new(required(config, "app_secret")?, verify_token),
        })
    }

    /// The Cloud API's path for the number's messages.
    fn path(&self) -> String {
        format!("{}/messages", self.phone_number_id)
    }

    /// The message's parts, each one call: a template alone; else the text, or the attachments with the
    /// text as the first one's caption where its type takes one.
    fn parts(message: &Outbound<'_>) -> Vec<Value> {
        let to = message.to.trim_start_matches('+');
        let part = |kind: &str, content: Value| json!({"messaging_product": "whatsapp", "recipient_type": "individual", "to": to, "type": kind, kind: content});
        if let Some(template) = message.template {
            return vec![part("template", template_body(template))];
        }
        let text = message.text;
        let mut parts = Vec::new();
        let mut caption = (!text.is_empty()).then_some(text);
        for attachment in message.attachments {
            let kind = media_kind(&attachment.content_type);
            let mut media = json!({"link": attachment.url});
            if kind != "audio"
                && let Some(caption) = caption.take()
            {
                media["caption"] = caption.into();
            }
            if kind == "document" && !attachment.filename.is_empty() {
                media["filename"] = attachment.filename.clone().into();
            }
            parts.push(part(kind, media));
        }
        if let Some(text) = caption {
            parts.insert(0, part("text", json!({"preview_url": false, "body": text})));
        }
        parts
    }
}

/// Whether `id` reads as a WhatsApp number's id (digits only), so that it is a plain path segment.
pub fn is_number_id(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())
}

/// WhatsApp's media type for a content type: image, video, audio, else a document.
fn media_kind(content_type: &str) -> &'static str {
    match content_type.split('/').next().unwrap_or_default() {
        "image" => "image",
        "video" => "video",
        "audio" => "audio",
        _ => "document",
    }
}

/// `{"name", "language": {"code"}, "components": [{"type": "body", "parameters": [{"type": "text", ...}]}]}`.
fn template_body(template: &Template) -> Value {
    let mut body = json!({"name": template.name, "language": {"code": template.language}});
    if !template.parameters.is_empty() {
        let parameters: Vec<Value> = template
            .parameters
            .iter()
            .map(|text| json!({"type": "text", "text": text}))
            .collect();
        body["components"] = json!([{"type": "body", "parameters": parameters}]);
    }
    body
}

#[async_trait::async_trait]
impl ChannelAdapter for WhatsAppAdapter {
    fn callbacks(&self) -> Option<&dyn Callbacks> {
        Some(self)
    }

    async fn send(&self, message: &Outbound<'_>) -> SendOutcome {
        self.graph
            .send_parts(&self.path(), Self::parts(message), |answer| {
                answer["messages"][0]["id"].as_str()
            })
            .await
    }

    async fn signal(&self, signal: &Signal<'_>) -> Option<SendOutcome> {
        let body = match *signal {
            Signal::Read {
                provider_message_id, ..
            } => json!({"messaging_product": "whatsapp", "status": "read", "message_id": provider_message_id}),
            Signal::React {
                to,
                provider_message_id,
                emoji,
            } => json!({
                "messaging_product": "whatsapp",
                "recipient_type": "individual",
                "to": to.trim_start_matches('+'),
                "type": "reaction",
                "reaction": {"message_id": provider_message_id, "emoji": emoji},
            }),
        };
        Some(self.graph.signal(&self.path(), &body).await)
    }
}

impl Callbacks for WhatsAppAdapter {
    fn handshake(&self, request: &RawRequest) -> Option<Reply> {
        self.keys.handshake(request)
    }

    fn verify(&self, request: &RawRequest) -> Result<(), SignatureError> {
        self.keys.verify(request)
    }

    fn parse(&self, request: &RawRequest) -> Result<Inbound, ParseError> {
        let payload: Payload = serde_json::from_slice(&request.body).map_err(|e| unreadable(&e))?;
        if payload.object != "whatsapp_business_account" {
            return Err(ParseError::InvalidField {
                field: "object".to_owned(),
                reason: "not whatsapp_business_account",
            });
        }
        let mut inbound = Inbound::default();
        let mut addressed = Addressed::default();
        for change in payload.entry.iter().flat_map(|e| &e.changes) {
            // Account, template and quality updates come on other fields of the same subscription.
            if change.field != "messages" {
                continue;
            }
            let Some(value) = &change.value else {
                return Err(ParseError::MissingField("entry[].changes[].value".to_owned()));
            };
            if value.metadata.phone_number_id != self.phone_number_id {
                addressed.other(format!("phone number id {}", value.metadata.phone_number_id));
                continue;
            }
            addressed.ours();
            self.read_value(value, &mut inbound);
        }
        addressed.verdict(inbound)
    }

    fn acknowledge(&self) -> Reply {
        acknowledgement()
    }
}

impl WhatsAppAdapter {
    fn read_value(&self, value: &ChangeValue, inbound: &mut Inbound) {
        let names: HashMap<&str, &str> = value
            .contacts
            .iter()
            .filter_map(|c| Some((c.wa_id.as_str(), c.profile.as_ref()?.name.as_str())))
            .collect();
        for message in &value.messages {
            let sender = Sender::Identity {
                kind: "whatsapp",
                external_id: message.from.clone(),
            };
            if message.kind == "reaction"
                && let Some(reaction) = &message.reaction
            {
                inbound.reactions.push(InboundReaction {
                    provider_message_id: reaction.message_id.clone(),
                    emoji: reaction.emoji.clone(),
                });
                continue;
            }
            let (mut text, attachments, mut answerable) = self.content(message);
            let mut referral = match &message.referral {
                Some(ad) => ad.source_id.clone(),
                None => String::new(),
            };
            if let Some((token, without)) = prefilled_ref(&text) {
                if referral.is_empty() {
                    referral = token.to_owned();
                }
                if without.is_empty() {
                    answerable = false;
                    text = format!("[referral: {token}]");
                } else {
                    text = without;
                }
            }
            inbound.messages.push(InboundMessage {
                provider_message_id: message.id.clone(),
                sender,
                recipient: self.phone_number_id.clone(),
                text,
                attachments,
                sender_name: names.get(message.from.as_str()).copied().unwrap_or_default().to_owned(),
                referral,
                page_url: String::new(),
                answerable,
            });
        }
        for status in &value.statuses {
            let reported = match status.status.as_str() {
                "sent" => ProviderStatus::Sent,
                "delivered" => ProviderStatus::Delivered,
                "read" => ProviderStatus::Read,
                "failed" => {
                    let error = status.errors.first();
                    ProviderStatus::Failed {
                        code: error.map_or_else(|| "failed".to_owned(), |e| e.code.to_string()),
                        message: error.map_or_else(|| "failed".to_owned(), WaError::text),
                    }
                }
                // `deleted`, `warning` and states added later change nothing we show.
                _ => continue,
            };
            inbound.statuses.push(StatusUpdate {
                provider_message_id: status.id.clone(),
                status: reported,
            });
        }
    }

    /// A message's text, attachments, and whether it asks for an answer.
    fn content(&self, message: &WaMessage) -> (String, Vec<Attachment>, bool) {
        let media = match message.kind.as_str() {
            "image" => message.image.as_ref(),
            "video" => message.video.as_ref(),
            "audio" => message.audio.as_ref(),
            "document" => message.document.as_ref(),
            "sticker" => message.sticker.as_ref(),
            _ => None,
        };
        if let Some(media) = media {
            let attachment = Attachment {
                // The media object; its download URL is read from it with the channel's token.
                url: format!("{}/{}", self.graph.root(), media.id),
                content_type: media.mime_type.clone(),
                filename: media.filename.clone(),
            };
            let text = match &media.caption {
                Some(caption) if !caption.is_empty() => caption.clone(),
                _ => placeholder(&message.kind),
            };
            return (text, vec![attachment], message.kind != "sticker");
        }
        match message.kind.as_str() {
            "text" => (
                message.text.as_ref().map(|t| t.body.clone()).unwrap_or_default(),
                Vec::new(),
                true,
            ),
            "button" => (
                message.button.as_ref().map(|b| b.text.clone()).unwrap_or_default(),
                Vec::new(),
                true,
            ),
            "interactive" => {
                let reply = message
                    .interactive
                    .as_ref()
                    .and_then(|i| i.button_reply.as_ref().or(i.list_reply.as_ref()))
                    .filter(|r| !r.title.is_empty());
                match reply {
                    Some(reply) => (reply.title.clone(), Vec::new(), true),
                    // A form's answer (`nfm_reply`) and replies added later: kept, not answered by the AI.
                    None => (placeholder("interactive"), Vec::new(), false),
                }
            }
            "location" => {
                let where_ = message.location.as_ref().map(Location::describe).unwrap_or_default();
                (
                    format!("{} {where_}", placeholder("location")).trim_end().to_owned(),
                    Vec::new(),
                    true,
                )
            }
            // Contacts cards, orders, system notices, unsupported types and any added later: a readable
            // stand-in rather than a dropped message.
            other => (placeholder(other), Vec::new(), false),
        }
    }
}

/// The entry-point ref a `wa.me` link's prefilled text carries, as a `(ref:TOKEN)` marker (letters, digits,
/// `-` and `_`), as in `https://wa.me/15551234567?text=Hi!%20(ref:spring-sale)`: the token, and the text
/// without the marker (routing data, not the contact's words).
pub fn prefilled_ref(text: &str) -> Option<(&str, String)> {
    let start = text.find("(ref:")?;
    let rest = &text[start + "(ref:".len()..];
    let end = rest.find(')')?;
    let token = &rest[..end];
    let well_formed = !token.is_empty()
        && token.len() <= 64
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !well_formed {
        return None;
    }
    let (before, after) = (text[..start].trim_end(), rest[end + 1..].trim_start());
    let without = match (before.is_empty(), after.is_empty()) {
        (false, false) => format!("{before} {after}"),
        _ => format!("{before}{after}"),
    };
    Some((token, without))
}

#[cfg(test)]
mod tests;
mod wire;
