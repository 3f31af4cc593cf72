//! The Messenger Platform's webhook events as Meta sends them: only the fields read here, the rest ignored.

use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
pub(super) struct Payload {
    pub(super) object: String,
    #[serde(default)]
    pub(super) entry: Vec<Entry>,
}

#[derive(Deserialize)]
pub(super) struct Entry {
    pub(super) id: String,
    #[serde(default)]
    pub(super) messaging: Vec<Event>,
}

#[derive(Deserialize)]
pub(super) struct Event {
    /// Absent on some events this service does not read (a plugin's opt-in names a `user_ref`).
    pub(super) sender: Option<Party>,
    #[serde(default)]
    pub(super) timestamp: i64,
    pub(super) message: Option<Message>,
    pub(super) postback: Option<Postback>,
    pub(super) referral: Option<Referral>,
    pub(super) delivery: Option<Delivery>,
    pub(super) read: Option<Read>,
    pub(super) reaction: Option<Reaction>,
}

#[derive(Deserialize)]
pub(super) struct Party {
    pub(super) id: String,
}

#[derive(Deserialize)]
pub(super) struct Message {
    pub(super) mid: String,
    pub(super) text: Option<String>,
    #[serde(default)]
    pub(super) attachments: Vec<MessageAttachment>,
    #[serde(default)]
    pub(super) is_echo: bool,
    #[serde(default)]
    pub(super) is_deleted: bool,
    #[serde(default)]
    pub(super) is_unsupported: bool,
    pub(super) referral: Option<Referral>,
}

#[derive(Deserialize)]
pub(super) struct MessageAttachment {
    #[serde(rename = "type")]
    pub(super) kind: String,
    pub(super) payload: Option<AttachmentPayload>,
}

#[derive(Deserialize)]
pub(super) struct AttachmentPayload {
    pub(super) url: Option<String>,
    pub(super) sticker_id: Option<Value>,
}

#[derive(Deserialize)]
pub(super) struct Postback {
    #[serde(default)]
    pub(super) title: String,
    pub(super) mid: Option<String>,
    pub(super) referral: Option<Referral>,
}

/// Where the contact came from: an `m.me` link's `ref`, else the ad's id.
#[derive(Deserialize)]
pub(super) struct Referral {
    #[serde(rename = "ref", default)]
    pub(super) reference: String,
    #[serde(default)]
    pub(super) ad_id: String,
}

impl Referral {
    pub(super) fn key(&self) -> String {
        if self.reference.is_empty() {
            self.ad_id.clone()
        } else {
            self.reference.clone()
        }
    }
}

#[derive(Deserialize)]
pub(super) struct Delivery {
    #[serde(default)]
    pub(super) mids: Vec<String>,
    pub(super) watermark: Option<i64>,
}

#[derive(Deserialize)]
pub(super) struct Read {
    pub(super) watermark: Option<i64>,
    /// Instagram names the message read instead of a watermark.
    pub(super) mid: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct Reaction {
    pub(super) mid: String,
    #[serde(default)]
    pub(super) action: String,
    #[serde(default)]
    pub(super) emoji: String,
    /// The reaction's name when no emoji is given (`love`, `smile`, ...).
    #[serde(default)]
    pub(super) reaction: String,
}

impl Reaction {
    /// The emoji, `""` when the contact took the reaction back.
    pub(super) fn emoji(&self) -> String {
        if self.action == "unreact" {
            return String::new();
        }
        if !self.emoji.is_empty() {
            return self.emoji.clone();
        }
        match self.reaction.as_str() {
            "smile" => "\u{1F606}",
            "angry" => "\u{1F620}",
            "sad" => "\u{1F622}",
            "wow" => "\u{1F62E}",
            "love" => "\u{2764}\u{FE0F}",
            "like" => "\u{1F44D}",
            _ => "\u{2757}",
        }
        .to_owned()
    }
}
