//! One message of a conversation. `seq` orders a conversation's messages; `attachments`, `reactions` and
//! `edits` are JSON arrays. `(channel_id, provider_message_id)` is unique, so a provider's retry of an
//! inbound message stores nothing new and a status callback finds its message.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "messages")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub seq: i64,
    pub id: crate::resource_id::MessageId,
    pub account_id: crate::tenant::AccountId,
    pub conversation_id: crate::resource_id::ConversationId,
    pub contact_id: crate::resource_id::ContactId,
    pub channel_id: crate::resource_id::ChannelId,
    pub direction: Direction,
    pub author: Author,
    pub text: String,
    pub attachments: String,
    pub status: MessageStatus,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    pub provider_message_id: Option<String>,
    pub reactions: String,
    pub edited: bool,
    pub edits: String,
    pub removed: bool,
    pub reply_to: String,
    pub broadcast_id: String,
    pub created_at: DateTimeUtc,
    pub sent_at: Option<DateTimeUtc>,
    pub delivered_at: Option<DateTimeUtc>,
    pub read_at: Option<DateTimeUtc>,
    /// When the message was last corrected, removed or reacted to: a reconnecting web chat visitor is sent
    /// the messages revised since it was last there.
    pub revised_at: Option<DateTimeUtc>,
    /// A WhatsApp template message's template as JSON (`channels::Template`); `""` for any other message.
    pub template: String,
}

/// Who a message went to: the business (`inbound`, from the contact) or the contact (`outbound`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "Text")]
pub enum Direction {
    #[sea_orm(string_value = "inbound")]
    Inbound,
    #[sea_orm(string_value = "outbound")]
    Outbound,
}

/// Who wrote a message: the contact (every inbound message), the agent (an AI reply), a person or an
/// integration through the API, or the service itself (a broadcast's opener is the API's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "Text")]
pub enum Author {
    #[sea_orm(string_value = "contact")]
    Contact,
    #[sea_orm(string_value = "agent")]
    Agent,
    #[sea_orm(string_value = "api")]
    Api,
    #[sea_orm(string_value = "system")]
    System,
}

/// Where a message stands: an inbound one is `received`; an outbound one moves forward only, queued ->
/// sent -> delivered -> read, or to failed before it is delivered (`conversations::status`). The order of
/// the outbound ones is the order they are reached in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "Text")]
pub enum MessageStatus {
    #[sea_orm(string_value = "received")]
    Received,
    #[sea_orm(string_value = "queued")]
    Queued,
    #[sea_orm(string_value = "sent")]
    Sent,
    #[sea_orm(string_value = "delivered")]
    Delivered,
    #[sea_orm(string_value = "read")]
    Read,
    #[sea_orm(string_value = "failed")]
    Failed,
}

/// What a delivery reads with its message in one statement.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(
        belongs_to = "super::channels::Entity",
        from = "Column::ChannelId",
        to = "super::channels::Column::Id"
    )]
    Channel,
    #[sea_orm(
        belongs_to = "super::contacts::Entity",
        from = "Column::ContactId",
        to = "super::contacts::Column::Id"
    )]
    Contact,
}

impl Related<super::channels::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::Channel.def()
    }
}

impl Related<super::contacts::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::Contact.def()
    }
}

impl ActiveModelBehavior for ActiveModel {}

/// A stored message for unit tests: the contact's is inbound, any other outbound.
#[cfg(any(test, feature = "testing"))]
pub fn sample(author: Author, text: &str) -> Model {
    Model {
        seq: 1,
        id: "msg_1".into(),
        account_id: crate::tenant::AccountId::of_row("acct_1"),
        conversation_id: "cv_1".into(),
        contact_id: "ct_1".into(),
        channel_id: "ch_1".into(),
        direction: if author == Author::Contact {
            Direction::Inbound
        } else {
            Direction::Outbound
        },
        author,
        text: text.into(),
        attachments: "[]".into(),
        status: MessageStatus::Received,
        error_code: None,
        error_message: None,
        provider_message_id: None,
        reactions: "[]".into(),
        edited: false,
        edits: "[]".into(),
        removed: false,
        reply_to: String::new(),
        broadcast_id: String::new(),
        created_at: chrono::DateTime::from_timestamp(1_800_000_060, 0).unwrap_or_default(),
        sent_at: None,
        delivered_at: None,
        read_at: None,
        revised_at: None,
        template: String::new(),
    }
}
