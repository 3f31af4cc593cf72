//! What the visitor has of the business's messages: a message only `sent` (pushed while no socket was open)
//! is `delivered` once the visitor's widget has it (a thread read, a replay), and messages up to one the
//! visitor saw are `read`. Both go through the status machine, with their events.

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter, QueryOrder};

use crate::{
    channels::ProviderStatus,
    conversations::receipts::{self, Applied},
    store::entities::{chat_sessions, messages},
};

/// Marks the business's messages among `messages` that were only `sent` as `delivered`.
pub async fn reached(db: &DatabaseConnection, messages: &[messages::Model], now: DateTime<Utc>) -> Result<(), DbErr> {
    for message in messages
        .iter()
        .filter(|m| m.direction == messages::Direction::Outbound && m.status == messages::MessageStatus::Sent)
    {
        receipts::apply_to_message(db, &message.id, &ProviderStatus::Delivered, now).await?;
    }
    Ok(())
}

/// Marks the business's messages of the thread up to `upto` as `read` (also those whose send's outcome is
/// not written yet: the visitor has them); returns those that changed, as they are now.
pub async fn seen(
    db: &DatabaseConnection,
    session: &chat_sessions::Model,
    upto: &messages::Model,
    now: DateTime<Utc>,
) -> Result<Vec<messages::Model>, DbErr> {
    let unread = messages::Entity::find()
        .filter(messages::Column::AccountId.eq(&session.account_id))
        .filter(messages::Column::ContactId.eq(&session.contact_id))
        .filter(messages::Column::ChannelId.eq(&session.channel_id))
        .filter(messages::Column::Seq.lte(upto.seq))
        .filter(messages::Column::Direction.eq(messages::Direction::Outbound))
        .filter(messages::Column::Status.is_in([
            messages::MessageStatus::Queued,
            messages::MessageStatus::Sent,
            messages::MessageStatus::Delivered,
        ]))
        .order_by_asc(messages::Column::Seq)
        .all(db)
        .await?;
    let mut changed = Vec::new();
    for message in &unread {
        if let Applied::Moved(_) = receipts::apply_to_message(db, &message.id, &ProviderStatus::Read, now).await? {
            changed.push(message.id.clone());
        }
    }
    if changed.is_empty() {
        return Ok(Vec::new());
    }
    messages::Entity::find()
        .filter(messages::Column::Id.is_in(changed))
        .order_by_asc(messages::Column::Seq)
        .all(db)
        .await
}
