//! A question handed off for want of an answer, one per conversation, in the knowledge gap it joined.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "gap_questions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub conversation_id: crate::resource_id::ConversationId,
    pub account_id: crate::tenant::AccountId,
    pub agent_id: crate::resource_id::AgentId,
    pub gap_id: crate::resource_id::GapId,
    pub question: String,
    pub asked_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
