//! A conversation between a contact and the account on one channel; at most one is open per contact and
//! channel (a unique index over open ones).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "conversations")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: crate::resource_id::ConversationId,
    pub account_id: crate::tenant::AccountId,
    pub contact_id: crate::resource_id::ContactId,
    /// The channel's name, as the API shows it.
    pub channel: String,
    /// The connected channel's row id (a channel reconnected under the same name is another channel).
    pub channel_id: crate::resource_id::ChannelId,
    pub channel_type: super::channels::ChannelKind,
    pub agent_id: String,
    pub status: ConversationStatus,
    pub handoff: bool,
    pub handoff_reason: String,
    pub unread_count: i32,
    pub last_message_at: DateTimeUtc,
    /// The window `last_message_at` falls in (`conversations::activity::bucket`): what the indexes hold.
    pub activity_bucket: i64,
    pub broadcast_id: String,
    pub created_at: DateTimeUtc,
    pub closed_at: Option<DateTimeUtc>,
    /// Messages the contact sent in it, counted as they are stored.
    pub inbound_seq: i64,
    /// How many of those are answered: by an AI reply, or by a person's send.
    pub ai_answered_seq: i64,
    /// `inbound_seq` when the agent last replied: follow-ups go out while it is still the same.
    pub follow_up_seq: i64,
    /// Follow-ups sent since the agent's last reply.
    pub follow_ups_sent: i32,
}

/// Whether a conversation is open (at most one per contact and channel) or closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "Text")]
pub enum ConversationStatus {
    #[sea_orm(string_value = "open")]
    Open,
    #[sea_orm(string_value = "closed")]
    Closed,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

/// A stored conversation for unit tests: open, with no agent, nothing counted.
#[cfg(any(test, feature = "testing"))]
pub fn sample() -> Model {
    let at = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default();
    Model {
        id: "cv_1".into(),
        account_id: crate::tenant::AccountId::of_row("acct_1"),
        contact_id: "ct_1".into(),
        channel: "sms-main".into(),
        channel_id: "ch_1".into(),
        channel_type: super::channels::ChannelKind::Sms,
        agent_id: String::new(),
        status: ConversationStatus::Open,
        handoff: false,
        handoff_reason: String::new(),
        unread_count: 0,
        last_message_at: at,
        activity_bucket: 6_000_000,
        broadcast_id: String::new(),
        created_at: at,
        closed_at: None,
        inbound_seq: 0,
        ai_answered_seq: 0,
        follow_up_seq: 0,
        follow_ups_sent: 0,
    }
}
