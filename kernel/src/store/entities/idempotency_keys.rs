//! The first answer to a send made with an idempotency key, kept 24 hours: a repeat with the same request
//! (same `fingerprint`) answers it again, a different request under the key is a conflict.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "idempotency_keys")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub account_id: crate::tenant::AccountId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub key: String,
    pub fingerprint: String,
    pub message_id: crate::resource_id::MessageId,
    pub contact_id: crate::resource_id::ContactId,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
