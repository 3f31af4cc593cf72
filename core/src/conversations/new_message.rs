//! Storing a new message: what its writer decides (direction, author, text, status, ...), every other field
//! at its starting value, and the conversation's latest activity (and, for a message from the contact, its
//! unread count) moved in the same transaction.

use chrono::{DateTime, Utc};
use sea_orm::{ActiveValue::NotSet, ConnectionTrait, DbErr, EntityTrait, sea_query::OnConflict};

use super::{render::StoredAttachment, threads};
use crate::store::{
    entities::{conversations, messages},
    to_json_text,
};

pub struct NewMessage<'a> {
    pub conversation: &'a conversations::Model,
    /// `inbound` or `outbound`.
    pub direction: &'static str,
    pub author: &'a str,
    pub text: &'a str,
    pub attachments: &'a [StoredAttachment],
    /// `received`, or `queued` for a message to send.
    pub status: &'static str,
    pub provider_message_id: Option<&'a str>,
    pub reply_to: &'a str,
    pub broadcast_id: &'a str,
}

/// Stores the message; `None` when the channel holds a message with its provider id already (a provider's
/// retry racing the first delivery).
pub async fn store(
    db: &impl ConnectionTrait,
    new: NewMessage<'_>,
    now: DateTime<Utc>,
) -> Result<Option<messages::Model>, DbErr> {
    let conversation = new.conversation;
    let message = messages::Model {
        seq: 0,
        id: format!("msg_{}", crate::ids::base62(16)),
        account_id: conversation.account_id.clone(),
        conversation_id: conversation.id.clone(),
        contact_id: conversation.contact_id.clone(),
        channel_id: conversation.channel_id.clone(),
        direction: new.direction.to_owned(),
        author: new.author.to_owned(),
        text: new.text.to_owned(),
        attachments: to_json_text(&new.attachments),
        status: new.status.to_owned(),
        error_code: None,
        error_message: None,
        provider_message_id: new.provider_message_id.map(str::to_owned),
        reactions: "[]".to_owned(),
        edited: false,
        edits: "[]".to_owned(),
        removed: false,
        reply_to: new.reply_to.to_owned(),
        broadcast_id: new.broadcast_id.to_owned(),
        created_at: now,
        sent_at: None,
        delivered_at: None,
        read_at: None,
    };
    let mut row = messages::ActiveModel::from(message.clone());
    row.seq = NotSet;
    let stored = messages::Entity::insert(row)
        .on_conflict(OnConflict::new().do_nothing().to_owned())
        .exec_without_returning(db)
        .await?;
    if stored == 0 {
        return Ok(None);
    }
    threads::touch(db, &conversation.id, now, new.direction == "inbound").await?;
    Ok(Some(message))
}
