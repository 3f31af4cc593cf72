//! Storing a new message: what its writer decides (direction, author, text, status, ...), every other field
//! at its starting value, and the conversation's latest activity (and, for a message from the contact, its
//! unread count) moved in the same transaction.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveValue::NotSet, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QuerySelect,
    sea_query::OnConflict,
};

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

/// The row of a new message, with a fresh id.
pub fn row(new: &NewMessage<'_>, now: DateTime<Utc>) -> messages::Model {
    let conversation = new.conversation;
    messages::Model {
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
        revised_at: None,
    }
}

/// The row to insert: `seq` is the database's to number.
fn insertable(message: &messages::Model) -> messages::ActiveModel {
    let mut row = messages::ActiveModel::from(message.clone());
    row.seq = NotSet;
    row
}

/// Stores messages (rows from `row`) with one statement, in their order, and moves their conversations'
/// latest activity (and unread counts, for those from the contact) with another. Returns the ids stored: a
/// message whose provider id the channel holds already (a provider's retry racing the first delivery) is
/// not.
pub async fn store_all(
    db: &impl ConnectionTrait,
    messages: &[messages::Model],
    now: DateTime<Utc>,
) -> Result<HashSet<String>, DbErr> {
    if messages.is_empty() {
        return Ok(HashSet::new());
    }
    let written = messages::Entity::insert_many(messages.iter().map(insertable))
        .on_conflict(OnConflict::new().do_nothing().to_owned())
        .exec_without_returning(db)
        .await?;
    let ids = messages.iter().map(|m| m.id.clone());
    let stored: HashSet<String> = if written == messages.len() as u64 {
        ids.collect()
    } else {
        messages::Entity::find()
            .select_only()
            .column(messages::Column::Id)
            .filter(messages::Column::Id.is_in(ids))
            .into_tuple::<String>()
            .all(db)
            .await?
            .into_iter()
            .collect()
    };
    let mut unread: BTreeMap<&str, i32> = BTreeMap::new();
    for message in messages.iter().filter(|m| stored.contains(&m.id)) {
        *unread.entry(message.conversation_id.as_str()).or_default() += i32::from(message.direction == "inbound");
    }
    threads::touch(db, &unread, now).await?;
    Ok(stored)
}
