//! Conversation and message lookups, always scoped: by account for the API, by channel for provider
//! callbacks (a provider's message id means something only on the channel it came through).

use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseTransaction, DbBackend, DbErr, EntityTrait, PaginatorTrait, QueryFilter,
    QuerySelect, Select,
};

use crate::resource_id::{ContactId, MessageId};
use crate::{
    access::AccountId,
    store::{
        self,
        entities::{conversations, messages},
    },
};

/// The account's conversation with this id.
pub async fn conversation(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    id: &str,
) -> Result<Option<conversations::Model>, DbErr> {
    store::owned::<conversations::Entity>(db, conversations::Column::AccountId, account_id, id).await
}

// Not `store::owned`: a message's primary key is its `seq`, and the API names it by `id`.
fn account_message(account_id: &AccountId, id: &str) -> Select<messages::Entity> {
    messages::Entity::find()
        .filter(messages::Column::Id.eq(id))
        .filter(messages::Column::AccountId.eq(account_id))
}

/// The account's message with this id.
pub async fn message(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    id: &str,
) -> Result<Option<messages::Model>, DbErr> {
    account_message(account_id, id).one(db).await
}

/// The account's message with this id, kept from other writers until `txn` ends: PostgreSQL locks the
/// row; an SQLite write transaction holds the whole database already.
pub async fn message_for_update(
    txn: &DatabaseTransaction,
    account_id: &AccountId,
    id: &str,
) -> Result<Option<messages::Model>, DbErr> {
    let mut select = account_message(account_id, id);
    if txn.get_database_backend() == DbBackend::Postgres {
        select = select.lock_exclusive();
    }
    select.one(txn).await
}

/// Whether `message` is a message of the account's contact.
pub async fn belongs_to(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    message: &MessageId,
    contact: &ContactId,
) -> Result<bool, DbErr> {
    let count = messages::Entity::find()
        .filter(messages::Column::Id.eq(message))
        .filter(messages::Column::AccountId.eq(account_id))
        .filter(messages::Column::ContactId.eq(contact))
        .count(db)
        .await?;
    Ok(count > 0)
}
