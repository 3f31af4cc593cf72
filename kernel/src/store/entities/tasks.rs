//! A task for the business's team, made by an agent (`create_task`) or by a handoff; shown in the daily
//! summary.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "tasks")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub account_id: String,
    pub title: String,
    pub due: Option<DateTimeUtc>,
    /// `open` or `done`.
    pub status: String,
    /// What made it: `tool` (an agent's `create_task`) or `handoff` (a person is to answer the contact).
    pub kind: String,
    /// A handoff's reason; "" for an agent's task.
    pub reason: String,
    pub contact_id: String,
    pub conversation_id: String,
    pub agent_id: String,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
