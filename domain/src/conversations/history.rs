//! A conversation's messages in the order they were stored (`seq`): the latest ones, those before a given
//! message, and all of them batch by batch. Scoped by account like every lookup.

use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Select};

use crate::{access::AccountId, store::entities::messages};

fn of(account_id: &AccountId, conversation_id: &str) -> Select<messages::Entity> {
    messages::Entity::find()
        .filter(messages::Column::AccountId.eq(account_id))
        .filter(messages::Column::ConversationId.eq(conversation_id))
}

/// The latest `limit` messages of the conversation, before the message at `before_seq` when given, oldest
/// first; and whether older ones remain.
pub async fn latest(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    conversation_id: &str,
    before_seq: Option<i64>,
    limit: u64,
) -> Result<(Vec<messages::Model>, bool), DbErr> {
    let mut select = of(account_id, conversation_id);
    if let Some(seq) = before_seq {
        select = select.filter(messages::Column::Seq.lt(seq));
    }
    let mut rows = select
        .order_by_desc(messages::Column::Seq)
        .limit(limit + 1)
        .all(db)
        .await?;
    let more = rows.len() as u64 > limit;
    rows.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    rows.reverse();
    Ok((rows, more))
}

/// Up to `limit` messages of the conversation after the message at `after_seq` (from the first when
/// `None`), oldest first: a batch of a read through the whole conversation.
pub async fn after(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    conversation_id: &str,
    after_seq: Option<i64>,
    limit: u64,
) -> Result<Vec<messages::Model>, DbErr> {
    let mut select = of(account_id, conversation_id);
    if let Some(seq) = after_seq {
        select = select.filter(messages::Column::Seq.gt(seq));
    }
    select.order_by_asc(messages::Column::Seq).limit(limit).all(db).await
}
