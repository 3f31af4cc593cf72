//! A contact's reaction to a message, as its provider reports it (WhatsApp, Messenger, Instagram): the
//! contact's one reaction on the message becomes the new emoji, or goes when the contact took it back. A
//! reaction to a message the channel does not hold (sent from the provider's own console) changes nothing.

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, sea_query::Expr};

use super::render::StoredReaction;
use crate::{
    channels::InboundReaction,
    store::{entities::messages, from_json_text, to_json_text},
};

/// Who a contact's reactions are by, in `messages.reactions`.
const AUTHOR: &str = "contact";

/// Applies `reaction`, which came through the channel `channel_id`; whether a message changed.
pub async fn apply(
    db: &impl ConnectionTrait,
    channel_id: &str,
    reaction: &InboundReaction,
    now: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let Some(message) = messages::Entity::find()
        .filter(messages::Column::ChannelId.eq(channel_id))
        .filter(messages::Column::ProviderMessageId.eq(&reaction.provider_message_id))
        .one(db)
        .await?
    else {
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
    let same = |a: &[StoredReaction], b: &[StoredReaction]| {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.emoji == y.emoji && x.author == y.author)
    };
    if same(&before, &after) {
        return Ok(false);
    }
    // Only over the reactions read: a concurrent change (the business's own reaction) is not overwritten,
    // the provider's retry of this report finds the message as it is then.
    let changed = messages::Entity::update_many()
        .col_expr(messages::Column::Reactions, Expr::value(to_json_text(&after)))
        .col_expr(messages::Column::RevisedAt, Expr::value(now))
        .filter(messages::Column::Seq.eq(message.seq))
        .filter(messages::Column::Reactions.eq(&message.reactions))
        .exec(db)
        .await?
        .rows_affected;
    Ok(changed > 0)
}
