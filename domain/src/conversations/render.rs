//! Rows -> the API's shapes (also the `data` of their events).

use frontdesk_api::v1::{Attachment, Conversation, Edit, Message, MessageError, Reaction};
use sea_orm::ActiveEnum;
use serde::{Deserialize, Serialize};

use crate::{
    store::{
        entities::{conversations, messages},
        from_json_text,
    },
    timestamps,
};

/// An attachment as stored in `messages.attachments`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredAttachment {
    pub url: String,
    pub content_type: String,
    pub filename: String,
}

/// A reaction as stored in `messages.reactions`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredReaction {
    pub emoji: String,
    pub author: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// An earlier text as stored in `messages.edits`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredEdit {
    pub text: String,
    pub edited_at: chrono::DateTime<chrono::Utc>,
}

pub fn message(m: &messages::Model) -> Message {
    let attachments: Vec<StoredAttachment> = from_json_text(&m.attachments);
    let reactions: Vec<StoredReaction> = from_json_text(&m.reactions);
    let edits: Vec<StoredEdit> = from_json_text(&m.edits);
    Message {
        id: m.id.to_string(),
        conversation_id: m.conversation_id.to_string(),
        contact_id: m.contact_id.to_string(),
        direction: m.direction.to_value(),
        author: m.author.to_value(),
        text: m.text.clone(),
        attachments: attachments
            .into_iter()
            .map(|a| Attachment {
                url: a.url,
                content_type: a.content_type,
                filename: a.filename,
            })
            .collect(),
        status: m.status.to_value(),
        error: m.error_code.as_ref().map(|code| MessageError {
            code: code.clone(),
            message: m.error_message.clone().unwrap_or_default(),
        }),
        provider_message_id: m.provider_message_id.clone().unwrap_or_default(),
        reactions: reactions
            .into_iter()
            .map(|r| Reaction {
                emoji: r.emoji,
                author: r.author,
                created_at: Some(timestamps::to_proto(r.created_at)),
            })
            .collect(),
        edited: m.edited,
        edits: edits
            .into_iter()
            .map(|e| Edit {
                text: e.text,
                edited_at: Some(timestamps::to_proto(e.edited_at)),
            })
            .collect(),
        removed: m.removed,
        reply_to: m.reply_to.clone(),
        broadcast_id: m.broadcast_id.clone(),
        created_at: Some(timestamps::to_proto(m.created_at)),
        sent_at: m.sent_at.map(timestamps::to_proto),
        delivered_at: m.delivered_at.map(timestamps::to_proto),
        read_at: m.read_at.map(timestamps::to_proto),
    }
}

pub fn conversation(c: &conversations::Model) -> Conversation {
    Conversation {
        id: c.id.to_string(),
        contact_id: c.contact_id.to_string(),
        channel: c.channel.clone(),
        channel_type: c.channel_type.to_value(),
        agent_id: c.agent_id.clone(),
        status: c.status.to_value(),
        handoff: c.handoff,
        handoff_reason: c.handoff_reason.clone(),
        unread_count: c.unread_count,
        last_message_at: Some(timestamps::to_proto(c.last_message_at)),
        broadcast_id: c.broadcast_id.clone(),
        created_at: Some(timestamps::to_proto(c.created_at)),
        closed_at: c.closed_at.map(timestamps::to_proto),
    }
}

/// The `data` of a message event.
pub fn message_data(m: &messages::Model) -> serde_json::Value {
    crate::events::payload(&message(m), "frontdesk.v1.Message")
}

/// The `data` of a conversation event.
pub fn conversation_data(c: &conversations::Model) -> serde_json::Value {
    crate::events::payload(&conversation(c), "frontdesk.v1.Conversation")
}
