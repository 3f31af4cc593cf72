//! A contact's reaction to a message, as its provider reports it (WhatsApp, Messenger, Instagram): the
//! contact's one reaction on the message becomes the new emoji, or goes when the contact took it back. The
//! message is read and written under a row lock (on SQLite the write transaction holds the database), as the
//! business's own reactions are, so neither overwrites the other. A reaction to a message the channel does
//! not hold (one sent from the provider's own console) changes nothing.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, DatabaseConnection, DbBackend, DbErr, EntityTrait, IntoActiveModel, QueryFilter,
    QuerySelect,
};

use super::render::StoredReaction;
use crate::{
    channels::InboundReaction,
    store::{entities::messages, from_json_text, to_json_text},
};

/// Who a contact's reactions are by, in `messages.reactions`.
const AUTHOR: &str = "contact";

/// Applies `reaction`, which came through the channel `channel_id`; whether the message changed.
pub async fn apply(
    db: &DatabaseConnection,
    channel_id: &str,
    reaction: &InboundReaction,
    now: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let txn = crate::store::begin_write(db).await?;
    let mut select = messages::Entity::find()
        .filter(messages::Column::ChannelId.eq(channel_id))
        .filter(messages::Column::ProviderMessageId.eq(&reaction.provider_message_id));
    if db.get_database_backend() == DbBackend::Postgres {
        select = select.lock_exclusive();
    }
    let Some(mut message) = select.one(&txn).await? else {
        return Ok(false);
    };
    let before: Vec<StoredReaction> = from_json_text(&message.reactions);
    let mut after: Vec<StoredReaction> = before.iter().filter(|r| r.author != AUTHOR).cloned().collect();
    if !reaction.emoji.is_empty() && !message.removed {
        after.push(StoredReaction {
            emoji: reaction.emoji.clone(),
            author: AUTHOR.to_owned(),
            created_at: now,
        });
    }
    let unchanged = before.len() == after.len()
        && before
            .iter()
            .zip(&after)
            .all(|(b, a)| b.emoji == a.emoji && b.author == a.author);
    if unchanged {
        return Ok(false);
    }
    message.reactions = to_json_text(&after);
    message.revised_at = Some(now);
    message.into_active_model().reset_all().update(&txn).await?;
    txn.commit().await?;
    Ok(true)
}
