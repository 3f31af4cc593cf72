//! One contact a broadcast is sent to: written when the audience is expanded (once per contact, however
//! the audience named it), then given the conversation and message its send made.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "broadcast_recipients")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub broadcast_id: crate::resource_id::BroadcastId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub contact_id: crate::resource_id::ContactId,
    pub account_id: crate::tenant::AccountId,
    /// `""` until the send made its message.
    pub conversation_id: String,
    pub message_id: String,
    /// The contact wrote into that conversation after the opener.
    pub replied: bool,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
