//! Channel adapters: each messaging provider (Twilio SMS first) behind one trait. An adapter only verifies a
//! provider callback's signature, parses it into provider-neutral shapes, answers it the way the provider
//! expects, and sends a message through the provider's API, classifying the answer. No domain rules live here:
//! what a message means for a conversation is decided by the caller.

pub mod live_feed;
pub mod meta;
pub mod pacing;
mod provider_http;
pub mod registry;
pub mod signals;
pub mod twilio;
pub mod widget;

use std::time::Duration;

use axum::body::Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use twilio::TwilioAdapter;

use crate::store::entities::messages;

/// A provider callback exactly as it arrived: what an adapter needs to verify and parse it.
#[derive(Clone, Debug)]
pub struct RawRequest {
    pub method: String,
    /// The URL the provider called and signed: the public base URL + path + `?query` when there is one.
    pub public_url: String,
    /// What follows the channel's hook path: `""` for messages, `"status"` for Twilio's status callbacks.
    pub path_suffix: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
}

impl RawRequest {
    /// The first value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// What one callback carries: new messages, delivery updates of sent ones, the contacts' reactions, or
/// any mix of them (Meta batches them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inbound {
    pub messages: Vec<InboundMessage>,
    pub statuses: Vec<StatusUpdate>,
    pub watermarks: Vec<Watermark>,
    pub reactions: Vec<InboundReaction>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InboundMessage {
    pub provider_message_id: String,
    pub sender: Sender,
    /// Our address on the channel: the phone number or page id the message was sent to.
    pub recipient: String,
    pub text: String,
    pub attachments: Vec<Attachment>,
    /// The sender's display name when the provider gives one, else empty.
    pub sender_name: String,
    /// The ad or link that started the conversation when the provider says, else empty.
    pub referral: String,
    /// The web page the message was written on (web chat), else empty.
    pub page_url: String,
    /// Whether the message asks for an answer: `false` for what only stands in for something the contact did
    /// (a sticker, a link opened), which is stored for the record but prompts no AI reply.
    pub answerable: bool,
}

/// A contact's reaction to a message of the conversation (`""`: the reaction was taken back).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InboundReaction {
    /// The provider's id of the message reacted to.
    pub provider_message_id: String,
    pub emoji: String,
}

/// A delivery report by time (Messenger's and Instagram's `watermark`): every message sent to `recipient` on
/// the channel up to `up_to` reached `status` (delivered or read).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watermark {
    pub recipient: Sender,
    pub up_to: DateTime<Utc>,
    pub status: ProviderStatus,
}

/// A WhatsApp message template: its name, language code and body parameters, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Template {
    pub name: String,
    pub language: String,
    pub parameters: Vec<String>,
}

impl Template {
    /// What a message sent as this template shows in its conversation when the sender wrote no text:
    /// `[template order_update (en_US): 4417, Friday]`.
    pub fn describe(&self) -> String {
        let head = format!("[template {} ({})", self.name, self.language);
        if self.parameters.is_empty() {
            format!("{head}]")
        } else {
            format!("{head}: {}]", self.parameters.join(", "))
        }
    }
}

/// Who wrote a message, as the provider identifies them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sender {
    /// A phone number, E.164 as the provider gave it.
    Phone(String),
    /// An account on a platform: `kind` is `whatsapp`, `messenger`, `instagram` or `webchat`.
    Identity { kind: &'static str, external_id: String },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attachment {
    pub url: String,
    pub content_type: String,
    /// Empty when the provider does not name the file.
    pub filename: String,
}

/// A change in the delivery of a message we sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusUpdate {
    pub provider_message_id: String,
    pub status: ProviderStatus,
}

/// The delivery states that matter to a conversation; a provider's intermediate states produce no update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProviderStatus {
    Sent,
    Delivered,
    Read,
    Failed { code: String, message: String },
}

/// One message to send.
#[derive(Clone, Copy, Debug)]
pub struct Outbound<'a> {
    /// The message as stored, for providers that show all of it (web chat).
    pub message: &'a messages::Model,
    /// A phone number (E.164) or the provider's id of the recipient.
    pub to: &'a str,
    pub text: &'a str,
    pub attachments: &'a [Attachment],
    /// Absolute URL the provider calls with delivery updates; empty for none.
    pub status_callback: &'a str,
    /// The template to send instead of the text (WhatsApp).
    pub template: Option<&'a Template>,
}

/// What a provider is told besides messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal<'a> {
    /// The business read the contact's messages up to the one with this provider id.
    Read { to: &'a str, provider_message_id: &'a str },
    /// The business's reaction to a message (`""` takes it back).
    React {
        to: &'a str,
        provider_message_id: &'a str,
        emoji: &'a str,
    },
}

/// How a provider answered a send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SendOutcome {
    Accepted {
        provider_message_id: String,
    },
    /// Taken, and in the recipient's hands already (web chat to a visitor whose socket is open).
    Delivered {
        provider_message_id: String,
    },
    /// The provider refused the message itself (a 4xx other than 429): retrying cannot help. `code` is the
    /// provider's own error code (Twilio's `21211`), or the HTTP status when it gave none.
    Rejected {
        code: String,
        message: String,
    },
    /// Throttled, failing, slow, unreachable or not understood: worth retrying, after `retry_after` if given.
    Unavailable {
        reason: String,
        retry_after: Option<Duration>,
    },
}

/// What the provider gets back from a callback.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

/// Why a callback is not from the provider; the caller answers 401 and stores nothing.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SignatureError {
    #[error("the signature header is missing")]
    Missing,
    #[error("the signature does not match")]
    Mismatch,
}

/// Why a signed callback cannot be read; the caller answers 400 with this text, which never quotes the body.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    #[error("missing field {0}")]
    MissingField(String),
    #[error("field {field} is {reason}")]
    InvalidField { field: String, reason: &'static str },
    #[error("unknown callback path {0:?}")]
    UnknownPath(String),
    /// Signed with this channel's secret, but about another page or number: the caller answers 404.
    #[error("the callback is for {0}, not this channel")]
    OtherChannel(String),
}

/// Why a channel's stored configuration cannot make an adapter.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("channel config lacks {0}")]
    Missing(&'static str),
    #[error("channel config {key} is {reason}")]
    Invalid { key: &'static str, reason: &'static str },
}

#[async_trait::async_trait]
pub trait ChannelAdapter: Send + Sync {
    /// Sends one message through the provider's API.
    async fn send(&self, message: &Outbound<'_>) -> SendOutcome;
    /// Tells the provider `signal`; `None` when the provider has no such thing (sms read receipts).
    async fn signal(&self, _signal: &Signal<'_>) -> Option<SendOutcome> {
        None
    }
    /// How the provider's callbacks (`/hooks/...`) are read; `None` for a channel that has none (web chat,
    /// whose visitors use the visitor API).
    fn callbacks(&self) -> Option<&dyn Callbacks> {
        None
    }
}

/// A provider's callbacks: incoming messages and delivery reports, signed by the provider.
pub trait Callbacks: Send + Sync {
    /// The answer to a provider's check of the callback URL (Meta's `GET` with `hub.challenge`), or `None`
    /// when `request` is no such check.
    fn handshake(&self, _request: &RawRequest) -> Option<Reply> {
        None
    }
    /// Checks that the provider signed this request; `Err` when the signature is missing or wrong.
    fn verify(&self, request: &RawRequest) -> Result<(), SignatureError>;
    /// Reads a verified request into provider-neutral shapes.
    fn parse(&self, request: &RawRequest) -> Result<Inbound, ParseError>;
    /// The answer the provider expects once a callback is taken.
    fn acknowledge(&self) -> Reply;
}
