//! A task for the business's team, made by an agent (`create_task`) or by a handoff; shown in the daily
//! summary.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "tasks")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub account_id: crate::tenant::AccountId,
    pub title: String,
    pub due: Option<DateTimeUtc>,
    pub status: TaskStatus,
    /// What made it: `tool` (an agent's `create_task`) or `handoff` (a person is to answer the contact).
    pub kind: String,
    /// A handoff's reason; "" for an agent's task.
    pub reason: String,
    pub contact_id: crate::resource_id::ContactId,
    pub conversation_id: crate::resource_id::ConversationId,
    pub agent_id: String,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

/// Whether the team still has a task to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "Text")]
pub enum TaskStatus {
    #[sea_orm(string_value = "open")]
    Open,
    #[sea_orm(string_value = "done")]
    Done,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
