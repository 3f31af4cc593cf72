//! An appointment an agent booked for a contact (`book_appointment`).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "appointments")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub account_id: crate::tenant::AccountId,
    pub contact_id: crate::resource_id::ContactId,
    pub conversation_id: crate::resource_id::ConversationId,
    pub agent_id: crate::resource_id::AgentId,
    pub start_time: DateTimeUtc,
    pub name: String,
    pub email: String,
    pub notes: String,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
