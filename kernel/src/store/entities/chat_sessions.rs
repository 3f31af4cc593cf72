//! A web chat visitor's session on a channel: the contact it speaks as, what the visitor told about
//! themselves, where they are on the site, and the hash of its token (the token itself is never kept).
//! Deleted with its channel (which revokes it) and with its contact (an erasure).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "chat_sessions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub account_id: crate::tenant::AccountId,
    pub channel_id: crate::resource_id::ChannelId,
    pub contact_id: crate::resource_id::ContactId,
    pub visitor_name: String,
    pub visitor_email: String,
    pub page_url: String,
    /// Hex SHA-256 of the session token.
    pub token_hash: String,
    pub expires_at: DateTimeUtc,
    pub started_at: DateTimeUtc,
    pub last_seen_at: DateTimeUtc,
    /// The visitor counts as online until then.
    pub present_until: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(
        belongs_to = "super::channels::Entity",
        from = "Column::ChannelId",
        to = "super::channels::Column::Id"
    )]
    Channel,
}

impl Related<super::channels::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::Channel.def()
    }
}

impl ActiveModelBehavior for ActiveModel {}
